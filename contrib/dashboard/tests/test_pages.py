"""Every page over a real SQLite file with real runs, and each action's effect in the store."""

from __future__ import annotations

import re
import time

import flows
from conftest import Filled, csrf, make_app, signed_in

import cairnflow as cf


def test_runs_page_lists_and_filters(filled: Filled) -> None:
    app, store = make_app(filled.url)
    try:
        web = signed_in(app)
        page = web.get("/runs")
        assert page.status_code == 200
        for run_id in filled.runs:
            assert run_id in page.text
        failed = web.get("/runs", params={"status": "failed"})
        assert set(re.findall(r'data-run="([^"]+)"', failed.text)) == {filled.failed}
        acme = web.get("/runs", params={"label": "tenant=acme"})
        assert set(re.findall(r'data-run="([^"]+)"', acme.text)) == set(filled.acme)
        billing = web.get("/runs", params={"queue": "billing", "workflow": "orders"})
        assert set(re.findall(r'data-run="([^"]+)"', billing.text)) == {
            filled.runs[0],
            filled.runs[3],
        }
        bad = web.get("/runs", params={"label": "no-equals-sign"})
        assert bad.status_code == 400 and "NAME=PREFIX" in bad.text
        bad_status = web.get("/runs", params={"status": "sideways"})
        assert bad_status.status_code == 400
    finally:
        store.close()


def test_runs_page_filters_by_tenant_and_a_run_shows_its_tenant(filled: Filled) -> None:
    app, store = make_app(filled.url)
    try:
        web = signed_in(app)
        page = web.get("/runs", params={"tenant": "acme-eu"})
        assert page.status_code == 200
        assert set(re.findall(r'data-run="([^"]+)"', page.text)) == set(filled.acme)
        assert 'name="tenant" value="acme-eu"' in page.text
        assert '<a href="/runs?tenant=globex">globex</a>' not in page.text
        everyone = web.get("/runs")
        assert '<a href="/runs?tenant=globex">globex</a>' in everyone.text
        assert "No tenant filter" not in everyone.text
        nobody = web.get("/runs", params={"tenant": "initech"})
        assert re.findall(r'data-run="([^"]+)"', nobody.text) == []
        bad = web.get("/runs", params={"tenant": "no good"})
        assert bad.status_code == 400 and "invalid tenant name" in bad.text
        shown = web.get(f"/runs/{filled.acme[0]}")
        assert '<dt>Tenant</dt><dd><a href="/runs?tenant=acme-eu">acme-eu</a></dd>' in shown.text
    finally:
        store.close()


def test_runs_page_pages_with_the_cursor(filled: Filled) -> None:
    app, store = make_app(filled.url)
    try:
        web = signed_in(app)
        seen: list[str] = []
        url: str | None = "/runs?workflow=orders"
        # 50 a page: six runs fit on one, so ask the client directly for a small page
        # to prove the link carries the filter and the cursor.
        listing = cf.Client(store).runs(workflow="orders", limit=4)
        assert listing.cursor is not None
        page = web.get("/runs", params={"workflow": "orders", "cursor": listing.cursor})
        seen = re.findall(r'data-run="([^"]+)"', page.text)
        assert seen == list(reversed(filled.runs))[4:]
        assert "First page" in page.text
        assert url
    finally:
        store.close()


def test_run_page_shows_the_dag_errors_payload(filled: Filled) -> None:
    app, store = make_app(filled.url)
    try:
        web = signed_in(app)
        page = web.get(f"/runs/{filled.failed}")
        assert page.status_code == 200
        text = page.text
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="dag"' in text
        for step in ("validate", "charge", "reserve", "pack"):
            assert f'data-step="{step}"' in text
        assert re.search(r'class="dag-node" data-step="charge" data-status="failed"', text)
        assert "card declined for order o-1" in text
        assert "&#34;qty&#34;: 2" in text or "&quot;qty&quot;: 2" in text
        assert "/retry" in text
        ok = web.get(f"/runs/{filled.runs[0]}")
        assert "&#34;box&#34;" in ok.text or "&quot;box&quot;" in ok.text
        assert web.get("/runs/no-such-run").status_code == 404
    finally:
        store.close()


def test_retry_cancel_delete_act_on_the_store(filled: Filled) -> None:
    app, store = make_app(filled.url)
    reader = cf.Client(store)
    try:
        web = signed_in(app)
        done = web.post(f"/runs/{filled.failed}/retry", data={"csrftoken": csrf(web)})
        assert done.status_code == 303
        assert 'class="notice" role="status">retried<' in web.get(done.headers["location"]).text
        assert not reader.info(filled.failed).finished
        cancelled = web.post(f"/runs/{filled.failed}/cancel", data={"csrftoken": csrf(web)})
        assert ">cancelled<" in web.get(cancelled.headers["location"]).text
        assert reader.info(filled.failed).status is cf.Status.CANCELLED
        deleted = web.post(f"/runs/{filled.failed}/delete", data={"csrftoken": csrf(web)})
        assert deleted.headers["location"] == "/runs"
        assert f"run {filled.failed} deleted" in web.get("/runs").text
        assert reader.runs(workflow="orders").runs[-1].id != filled.failed
        try:
            reader.info(filled.failed)
        except cf.RunNotFound:
            pass
        else:
            raise AssertionError("the run was not deleted")
        again = web.post(f"/runs/{filled.runs[0]}/retry", data={"csrftoken": csrf(web)})
        assert "not retried" in web.get(again.headers["location"]).text
    finally:
        store.close()


def test_queues_pause_resume(filled: Filled) -> None:
    app, store = make_app(filled.url)
    reader = cf.Client(store)
    try:
        web = signed_in(app)
        page = web.get("/queues")
        assert page.status_code == 200 and 'data-queue="billing"' in page.text
        web.post("/queues/billing/pause", data={"csrftoken": csrf(web)})
        assert [p.name for p in reader.pauses()] == ["billing"]
        assert "Resume" in web.get("/queues").text
        web.post("/queues/billing/resume", data={"csrftoken": csrf(web)})
        assert reader.pauses() == []
    finally:
        store.close()


def test_schedules_pause_resume_trigger(filled: Filled) -> None:
    app, store = make_app(filled.url)
    reader = cf.Client(store)
    try:
        web = signed_in(app)
        page = web.get("/schedules")
        assert 'data-schedule="report/nightly"' in page.text and "0 3 * * *" in page.text
        web.post("/schedules/report/nightly/pause", data={"csrftoken": csrf(web)})
        assert reader.schedules()[0].paused
        web.post("/schedules/report/nightly/resume", data={"csrftoken": csrf(web)})
        assert not reader.schedules()[0].paused
        fired = web.post("/schedules/report/nightly/trigger", data={"csrftoken": csrf(web)})
        assert "triggered: run" in web.get(fired.headers["location"]).text
        assert len(reader.runs(workflow="report").runs) == 1
        assert (
            web.post("/schedules/report/nightly/explode", data={"csrftoken": csrf(web)}).status_code
            == 404
        )
    finally:
        store.close()


def test_servers_and_throughput(filled: Filled) -> None:
    app, store = make_app(filled.url)
    try:
        web = signed_in(app)
        assert "No lifecycle subscription." in web.get("/servers").text
        assert isinstance(store, cf.store.Lifecycle)
        store.subscribe_lifecycle("on_failure", "dash-flow", time.time_ns())
        servers = web.get("/servers")
        assert servers.status_code == 200 and "stopped" in servers.text  # the filler stopped
        assert 'data-subscription="on_failure/dash-flow"' in servers.text
        chart = web.get("/throughput")
        assert chart.status_code == 200 and 'class="chart"' in chart.text
        assert "5 succeeded" in chart.text and "1 failed" in chart.text
        assert web.get("/throughput?window=24h").status_code == 200
    finally:
        store.close()


class _Bare(cf.MemoryStore):
    capabilities = frozenset({cf.Cap.DURABLE})


def test_a_store_without_the_capabilities_says_so() -> None:
    from cairnflow_dashboard import DashboardSettings, create_app
    from conftest import CREDENTIALS

    store = _Bare()
    app = create_app(cf.Client(store), DashboardSettings(credentials=CREDENTIALS))
    web = signed_in(app)
    for path, cap in (
        ("/runs", "RUN_QUERY"),
        ("/queues", "STATS"),
        ("/schedules", "SCHEDULE_LIST"),
        ("/servers", "SERVERS"),
        ("/throughput", "STATS"),
    ):
        page = web.get(path)
        assert page.status_code == 200, (path, page.text)
        assert f"does not declare {cap}" in page.text, path
    client = cf.Client(store)
    client.register(*flows.build())
    ref = client.enqueue("orders", {"id": "o-9", "qty": 1})
    run = web.get(f"/runs/{ref.id}")
    assert run.status_code == 200
    assert 'data-step="validate"' in run.text
    assert "does not declare ERROR_HISTORY" in run.text
