"""cairnflow-prometheus on a real SQLite file: real workflows run, the registry and the
HTTP endpoint on 127.0.0.1 scraped, counters asserted by what the engine recorded."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cairnflow_prometheus import Metrics
from prometheus_client import CollectorRegistry

import cairnflow as cf
from cairnflow.store import ClaimRequest
from cairnflow_sqlite import SQLiteStore

TIMEOUT = 30.0
_QUICK = cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01, factor=1.0, max=0.01))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "metrics.db")
    store.migrate()
    yield store
    store.close()


def _orders() -> cf.Workflow:
    wf = cf.Workflow("orders")

    @wf.step(retry=_QUICK)
    def charge(ctx: cf.StepContext, n: int) -> int:
        if n < 0:
            raise ValueError("always")
        if n == 1 and ctx.attempt == 1:
            raise ValueError("once")
        return n

    @wf.step(after=[charge])
    def ship(ctx: cf.StepContext, n: int) -> int:
        return n

    return wf


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_attempts_are_counted_by_what_ran(store: SQLiteStore) -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    client = cf.Client(store, workers=2, poll_interval=0.05)
    metrics.install(client)
    client.register(_orders())
    with client:
        runs = [client.wait(client.enqueue("orders", n), timeout=TIMEOUT) for n in (0, 1, -1)]
    assert [r.status for r in runs] == [cf.Status.SUCCEEDED, cf.Status.SUCCEEDED, cf.Status.FAILED]
    charges = sum(r.steps["charge"].attempts for r in runs)  # 1 + 2 + 2
    failures = sum(r.steps["charge"].failures for r in runs)  # 0 + 1 + 2
    charge = {"workflow": "orders", "step": "charge"}
    ship = {"workflow": "orders", "step": "ship"}
    assert _value(registry, "cairnflow_attempts_started_total", **charge) == charges == 5
    assert _value(registry, "cairnflow_attempts_failed_total", **charge) == failures == 3
    assert _value(registry, "cairnflow_attempts_succeeded_total", **charge) == 2
    assert _value(registry, "cairnflow_attempts_retried_total", **charge) == 2  # n=1 and n=-1
    assert _value(registry, "cairnflow_attempts_started_total", **ship) == 2
    assert _value(registry, "cairnflow_attempts_succeeded_total", **ship) == 2
    assert _value(registry, "cairnflow_attempts_failed_total", **ship) == 0
    durations = [
        _value(registry, "cairnflow_attempt_duration_seconds_count", **charge, result=result)
        for result in ("returned", "raised")
    ]
    assert durations == [2, 3]
    claims = sum(
        _value(registry, "cairnflow_claim_duration_seconds_count", joined=joined)
        for joined in ("true", "false")
    )
    assert claims >= 1  # every attempt came from a claim that was timed
    claimed_attempts = sum(r.steps[s].attempts for r in runs for s in r.steps)
    assert claimed_attempts == 7


def test_queue_depth_is_read_at_scrape_time_and_served_on_loopback(store: SQLiteStore) -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    idle = cf.Client(store)  # never started: its queue is only filled
    metrics.install(idle)
    idle.register(_orders())
    for n in range(3):
        idle.enqueue("orders", n)
    assert _value(registry, "cairnflow_queue_ready", queue="default") == 3
    assert _value(registry, "cairnflow_queue_running", queue="default") == 0
    assert _value(registry, "cairnflow_queue_oldest_ready_seconds", queue="default") >= 0
    exporter = metrics.serve(0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        exporter.stop()
    assert 'cairnflow_queue_ready{queue="default"} 3.0' in text
    # The same store, drained by a worker: the next scrape reads an empty queue.
    with cf.Client(store, poll_interval=0.05) as worker:
        worker.register(_orders())
        for run in worker.runs().runs:
            assert worker.wait(run.id, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
    assert _value(registry, "cairnflow_queue_ready", queue="default") == 0


def test_a_lease_taken_over_is_counted(store: SQLiteStore) -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    client = cf.Client(store, poll_interval=0.05)
    metrics.install(client, queue_depth=False)
    client.register(_orders())
    ref = client.enqueue("orders", 0)
    # A worker that claims the step and dies: its lease is never renewed, and has ended.
    now = time.time_ns()
    request = ClaimRequest(
        workflows=frozenset({"orders"}), limit=1, now=now, lease_until=now + 1, node_id="dead"
    )
    assert len(store.claim(request)) == 1
    with client:
        info = client.wait(ref, timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED
    assert info.steps["charge"].reclaims == 1  # the store recorded the takeover
    assert _value(registry, "cairnflow_lease_takeovers_total") == 1
    assert _value(registry, "cairnflow_attempts_abandoned_total") == 0
    assert registry.get_sample_value("cairnflow_queue_ready", {"queue": "default"}) is None


def test_the_memory_store_is_measured_alike() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    store = cf.MemoryStore()
    client = cf.Client(store, poll_interval=0.05)
    metrics.install(client)
    client.register(_orders())
    with client:
        client.wait(client.enqueue("orders", 0), timeout=TIMEOUT)
    charge = {"workflow": "orders", "step": "charge"}
    assert _value(registry, "cairnflow_attempts_succeeded_total", **charge) == 1
    assert _value(registry, "cairnflow_queue_ready", queue="default") == 0
