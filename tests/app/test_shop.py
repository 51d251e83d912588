"""An application, its worker, the dashboard and the metrics, together, on SQLite and Postgres.

The shop's web application (uvicorn) takes orders and enqueues their fulfilment in the
order's own transaction (cairnflow-sqlalchemy); a worker process runs them and serves
its Prometheus metrics (cairnflow-prometheus); ``cairn dashboard`` (cairnflow-dashboard)
shows them. Each is a real process talking to the others only through the database,
as in production. The test asserts on what the engine recorded (the runs in the store,
the dashboard's page of a run, the worker's counters), never on how long anything took.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TypeVar

import httpx
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families
from shop_deploy import DEADLINE, TOKEN, Deployment

import cairnflow as cf

T = TypeVar("T")
ORDERS = [
    {"id": "A-1", "item": "book", "qty": 2},
    {"id": "C-3", "item": "mug", "qty": 10},
]
REFUSED = [
    {"id": "B-2", "item": "lamp", "qty": 99},  # more than the shop's stock of 10
    {"id": "E-5", "item": "desk", "qty": 11},
]


def poll(read: Callable[[], T], done: Callable[[T], bool], what: str) -> T:
    """``read()`` until ``done`` holds for it, within the deadline; its last value."""
    ends = time.monotonic() + DEADLINE
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > ends:
            raise AssertionError(f"{what}: not within {DEADLINE:g}s; last read {value!r}")
        time.sleep(0.2)


def counters(url: str) -> dict[tuple[str, str, str], float]:
    """The worker's ``cairnflow_attempts_*_total`` counters: (name, workflow, step) -> value."""
    found = {}
    for family in text_string_to_metric_families(httpx.get(url, timeout=10.0).text):
        for sample in family.samples:
            named = sample.name.startswith("cairnflow_attempts_") and "step" in sample.labels
            if named and sample.name.endswith("_total"):
                key = (sample.name, sample.labels["workflow"], sample.labels["step"])
                found[key] = sample.value
    return found


def test_an_order_runs_on_the_worker_and_shows_on_the_dashboard_and_in_metrics(
    deployment: Deployment,
) -> None:
    web = httpx.Client(base_url=deployment.web, timeout=30.0)
    # The second order of each kind through the event loop's own transaction where the
    # engine has an async connection (Postgres: AsyncClient.enqueue_tx), else as the first.
    postgres = deployment.database.engine == "postgres"
    paths = ["/orders", "/orders/async" if postgres else "/orders"]
    if not postgres:
        assert web.post("/orders/async", json=ORDERS[0]).status_code == 404
    runs = {}
    for order, path in zip(ORDERS, paths, strict=True):
        placed = web.post(path, json=order)
        assert placed.status_code == 201, placed.text
        runs[order["id"]] = placed.json()["run"]
    rolled_back = []
    for order, path in zip(REFUSED, paths, strict=True):
        refused = web.post(path, json=order)
        assert refused.status_code == 409, refused.text
        rolled_back.append(refused.json()["rolled_back_run"])

    # The worker process ran both runs: the store says so, for every step.
    store = cf.open_store(deployment.database.store_url)
    try:
        reader = cf.Client(store)  # never started: it only reads
        for order in ORDERS:
            info = reader.wait(runs[order["id"]], timeout=DEADLINE)
            assert info.status is cf.Status.SUCCEEDED, info
            assert info.result == f"packed {order['qty']} x {order['item']} for {order['id']}"
            assert info.key == f"order-{order['id']}"
            assert info.steps["reserve"].attempts == 1
            assert info.steps["pack"].attempts == 2  # the jammed printer, then the retry
            assert info.steps["pack"].failures == 1
            assert info.steps["pack"].node == info.steps["reserve"].node != reader.node_id
        # The refused orders' transactions took their runs with them, and their rows.
        assert all(store.get_run(run_id) is None for run_id in rolled_back)
        assert reader.runs(workflow="shop-fulfil", count=True).total == len(ORDERS)
    finally:
        store.close()
    engine = sa.create_engine(deployment.database.sqlalchemy_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT id, run_id FROM shop_orders ORDER BY id")).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in rows] == [(o["id"], runs[o["id"]]) for o in ORDERS]

    # The dashboard (its own process, over the same database) shows them, to credentials only.
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    dashboard = httpx.Client(base_url=deployment.dashboard, timeout=30.0)
    for order in ORDERS:
        run_id = runs[order["id"]]
        assert dashboard.get(f"/runs/{run_id}").status_code in (303, 401)  # no credentials
        page = dashboard.get(f"/runs/{run_id}", headers=bearer)
        assert page.status_code == 200, page.text
        status = re.search(r'id="run-status"><span class="badge"[^>]*>(\w+)<', page.text)
        assert status is not None and status[1] == "succeeded", page.text
        assert 'data-step="pack" data-status="succeeded"' in page.text
    listed = dashboard.get("/runs", params={"workflow": "shop-fulfil"}, headers=bearer)
    assert listed.status_code == 200
    assert all(run_id in listed.text for run_id in runs.values())
    for run_id in rolled_back:
        assert dashboard.get(f"/runs/{run_id}", headers=bearer).status_code == 404

    # The worker's metrics count every attempt: two per run of pack, one of them retried.
    n = float(len(ORDERS))
    key = "cairnflow_attempts_{}_total", "shop-fulfil"
    done = poll(
        lambda: counters(deployment.metrics),
        lambda c: c.get((key[0].format("succeeded"), key[1], "pack")) == n,
        "the worker's metrics counting both runs' packing",
    )
    assert done[(key[0].format("started"), key[1], "reserve")] == n
    assert done[(key[0].format("succeeded"), key[1], "reserve")] == n
    assert done[(key[0].format("started"), key[1], "pack")] == 2 * n
    assert done[(key[0].format("failed"), key[1], "pack")] == n
    assert done[(key[0].format("retried"), key[1], "pack")] == n

    # SIGTERM drains the worker, which exits 0.
    assert deployment.worker.stop() == 0, deployment.worker.output()
