"""W7: finding runs (#17). The newest 50 failed runs with a label prefix among N finished runs.

The runs and their label rows are written by one ``INSERT ... SELECT`` each over a series
of the engine's own (a million enqueues through a client would take most of the bench), in
the layout the SQL layer writes: one run row per run and one ``run_labels`` row per label.
Every tenth run failed; the label ``tenant`` is one of N / 100 (``acme-0000`` to
``acme-9999`` for a million), so the prefix ``acme-012`` holds 10 tenants, 0.1% of a million. The figure is
the median of ``store.list_runs`` over 20 calls (the client adds only decoding), beside a
prefix of every run (walked newest first) and an exact label. The target: under 50 ms with
a million runs on each engine (docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from _engines import Engine
from _workloads import analyze, namespace, numbered, numbered_text, q

import cairnflow as cf
from cairnflow.store import RunQuery

TARGET_MS = 50.0


def _fill(engine: Engine, prefix: str, runs: int) -> None:
    """``runs`` finished runs and their tenant labels, written in two statements.

    One tenant per 100 runs (10,000 for a million), so ``acme-012`` always holds 10 tenants.
    """
    now = time.time_ns()
    tenants = max(runs // 100, 130)
    runs_table, labels_table = q(engine, prefix + "runs"), q(engine, prefix + "run_labels")
    with_series, series = numbered(engine, runs)
    run_id = numbered_text(engine, "run_")
    if engine.name == "postgres":
        tenant = f"'acme-' || lpad((g.n % {tenants})::text, 4, '0')"
        labels = f"""'{{"tenant": "' || {tenant} || '"}}'"""
    elif engine.name == "mariadb":
        tenant = f"CONCAT('acme-', LPAD(g.n % {tenants}, 4, '0'))"
        labels = f"""CONCAT('{{"tenant": "', {tenant}, '"}}')"""
    else:
        tenant = f"'acme-' || substr('0000' || (g.n % {tenants}), -4)"
        labels = f"""'{{"tenant": "' || {tenant} || '"}}'"""
    conn = engine.connect()
    try:
        cur = conn.cursor()
        cur.execute(
            f"INSERT INTO {runs_table} (id, workflow, queue, priority, state, payload, labels, "
            f"steps_left, created_at, run_at, finished_at) {with_series}"
            f"SELECT {run_id}, 'noop', 'default', 0, "
            f"CASE WHEN g.n % 10 = 0 THEN 'failed' ELSE 'succeeded' END, "
            f"{'CAST(x' if engine.name == 'sqlite' else ''}'7b7d'"
            f"{' AS BLOB)' if engine.name == 'sqlite' else ''}, {labels}, 0, "
            f"{now} - {runs} + g.n, {now} - {runs} + g.n, {now} - {runs} + g.n + 1000 "
            f"FROM {series}"
        )
        cur.execute(
            f"INSERT INTO {labels_table} (run_id, name, value, created_at) {with_series}"
            f"SELECT {run_id}, 'tenant', {tenant}, {now} - {runs} + g.n FROM {series}"
        )
        conn.commit()
        analyze(engine, conn, [runs_table, labels_table])
    finally:
        conn.close()


def _median_ms(store: Any, query: RunQuery, samples: int = 20) -> tuple[float, int]:
    times = []
    found = 0
    for _ in range(samples):
        started = time.perf_counter()
        page = store.list_runs(query)
        times.append((time.perf_counter() - started) * 1000)
        found = len(page.runs)
    return statistics.median(times), found


def w7_find(engine: Engine, *, runs: int) -> dict[str, Any]:
    """List the newest 50 failed runs with a label prefix among ``runs`` finished runs."""
    result: dict[str, Any] = {"runs": runs, "target_ms": TARGET_MS}
    failed = frozenset({cf.Status.FAILED})
    with namespace(engine) as (prefix, store):
        started = time.perf_counter()
        _fill(engine, prefix, runs)
        result["fill_s"] = time.perf_counter() - started
        result["prefix_ms"], result["prefix_found"] = _median_ms(
            store, RunQuery(statuses=failed, label_prefix=("tenant", "acme-012"), limit=50)
        )
        result["common_prefix_ms"], _ = _median_ms(
            store, RunQuery(statuses=failed, label_prefix=("tenant", "acme-"), limit=50)
        )
        result["label_ms"], _ = _median_ms(
            store, RunQuery(statuses=failed, labels={"tenant": "acme-0120"}, limit=50)
        )
    if result["prefix_found"] != 50:
        raise RuntimeError(f"{engine.name}: W7 found {result['prefix_found']} runs, not 50")
    return result
