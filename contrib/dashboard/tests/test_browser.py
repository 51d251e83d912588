"""The dashboard in a real headless Chromium over a real server and a real SQLite file.

``cairn dashboard`` serves the file in a subprocess; this process fills it with
runs (one failed) and then keeps a worker client running on it. The browser signs
in, filters the runs, opens the failed one, retries it, and sees it succeed once
the worker has run it again.
"""

from __future__ import annotations

import time
from pathlib import Path

import flows
import pytest
from browser import chromium_path, dashboard
from conftest import PASSWORD, QUEUES, USER, fill

import cairnflow as cf

pytestmark = pytest.mark.timeout(300)


def test_sign_in_filter_open_retry_and_see_it_succeed(tmp_path: Path) -> None:
    executable = chromium_path()
    from playwright.sync_api import expect, sync_playwright

    flows.FAILING.clear()
    url = f"sqlite:///{tmp_path / 'browser.db'}"
    filled = fill(url)
    store = cf.open_store(url)
    worker = cf.Client(store, workers=2, poll_interval=0.05, queues=QUEUES)
    worker.register(*flows.build())
    worker.start()
    try:
        with dashboard(url) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=executable, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(base + "/runs")
            page.fill("input[name=user]", USER)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(base + "/runs")
            expect(page.locator("tr[data-run]")).to_have_count(len(filled.runs))

            page.select_option("select[name=status]", "failed")
            page.click("form.filters button[type=submit]")
            page.wait_for_url("**/runs?*status=failed*")
            expect(page.locator("tr[data-run]")).to_have_count(1)
            expect(page.locator(f'tr[data-run="{filled.failed}"]')).to_be_visible()

            page.click(f'a[href="/runs/{filled.failed}"]')
            page.wait_for_url(f"{base}/runs/{filled.failed}")
            expect(page.locator("#run-status")).to_have_text("failed")
            expect(page.locator('g.dag-node[data-step="charge"]')).to_have_attribute(
                "data-status", "failed"
            )
            expect(page.locator("text=card declined for order o-1").first).to_be_visible()

            flows.FAILING.clear()  # the card goes through now
            page.click("button:has-text('Retry')")
            expect(page.locator(".notice")).to_have_text("retried")

            deadline = time.monotonic() + 120
            while page.locator("#run-status").inner_text().strip() != "succeeded":
                assert time.monotonic() < deadline, "the retried run did not succeed in 120s"
                page.wait_for_timeout(250)
                page.reload()
            expect(page.locator('g.dag-node[data-step="pack"]')).to_have_attribute(
                "data-status", "succeeded"
            )
            browser.close()
    finally:
        worker.stop()
        store.close()
        flows.FAILING.clear()
    assert cf.Client(cf.open_store(url)).info(filled.failed).status is cf.Status.SUCCEEDED
