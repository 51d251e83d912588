"""Take the README's screenshots: ``python contrib/dashboard/tests/screenshots.py``.

Fills a SQLite file with runs (some failed, one paused queue, a schedule triggered
once), keeps a worker client alive so the servers page has a live server, serves
it with ``cairn dashboard`` and photographs each main page with the system
Chromium into ``contrib/dashboard/docs/``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import flows  # noqa: E402
from browser import chromium_path, dashboard  # noqa: E402
from conftest import PASSWORD, QUEUES, USER, fill  # noqa: E402

import cairnflow as cf  # noqa: E402

DOCS = HERE.parent / "docs"


def main() -> None:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'screens.db'}"
        flows.FAILING.clear()
        filled = fill(url, count=14)
        store = cf.open_store(url)
        worker = cf.Client(store, workers=2, poll_interval=0.2, queues=QUEUES, node_id="worker-a")
        worker.register(*flows.build())
        worker.start()
        try:
            worker.trigger_schedule("report", "nightly")
            worker.pause_queue("billing")
            with dashboard(url) as base, sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=executable, headless=True, args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 760})
                page.goto(base + "/login")
                page.fill("input[name=user]", USER)
                page.fill("input[name=password]", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_url(base + "/runs")
                shots = {
                    "runs": "/runs",
                    "run": f"/runs/{filled.failed}",
                    "queues": "/queues",
                    "schedules": "/schedules",
                    "servers": "/servers",
                    "throughput": "/throughput",
                }
                DOCS.mkdir(exist_ok=True)
                for name, path in shots.items():
                    page.goto(base + path)
                    page.screenshot(path=str(DOCS / f"{name}.png"), full_page=True)
                    print(f"docs/{name}.png")
                browser.close()
        finally:
            worker.stop()
            store.close()
            flows.FAILING.clear()


if __name__ == "__main__":
    main()
