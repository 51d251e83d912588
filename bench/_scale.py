"""Scale (#20): the drain rate beside a deep queue, and worker processes added to one queue.

``w8_depth``: the rate at which one worker process drains ``drain`` runs from a queue that
holds only those, then from one that holds ``queued`` (1,000,000): the claim reads the ready
index in its order and stops after n rows, so the depth of the queue should not show.

``w8_processes``: the same ``runs`` drained by one worker process, then by ``processes`` (4):
claims from several processes skip each other's locked rows, so they should add up.

The queued runs are written by SQL, as ready runs of ``noop`` with their step (what an
enqueue writes, without its cost: a million enqueues would take minutes and measure the
enqueue). Completions are counted from the store, from the first claim to the last
completion, as W2 counts them, and every run that was counted succeeded.
"""

from __future__ import annotations

import time
from typing import Any

from _engines import Engine
from _workloads import (
    Failed,
    analyze,
    client_processes,
    namespace,
    null_payload,
    numbered,
    numbered_text,
    q,
    raw_one,
    step_window,
)

_SECOND_NS = 10**9


def fill_queued(engine: Engine, prefix: str, runs: int) -> None:
    """``runs`` ready runs of ``noop``, each with its one ready step, due a minute ago."""
    due = time.time_ns() - 60 * _SECOND_NS
    runs_table, steps_table = q(engine, prefix + "runs"), q(engine, prefix + "steps")
    with_series, series = numbered(engine, runs)
    run_id, step_id = numbered_text(engine, "queued_"), numbered_text(engine, "qstep_")
    conn = engine.connect()
    try:
        cur = conn.cursor()
        cur.execute(
            f"INSERT INTO {runs_table} (id, workflow, queue, priority, state, payload, labels, "
            f"steps_left, created_at, run_at) {with_series}"
            f"SELECT {run_id}, 'noop', 'default', 0, 'active', {null_payload(engine)}, '{{}}', "
            f"1, {due} + g.n, {due} + g.n FROM {series}"
        )
        cur.execute(
            f"INSERT INTO {steps_table} (id, run_id, workflow, queue, priority, name, kind, "
            f"position, parents, children, parents_left, status, due_at, attempt, failures, "
            f"reclaims) {with_series}"
            f"SELECT {step_id}, {run_id}, 'noop', 'default', 0, 'only', 'task', 0, '[]', '[]', "
            f"0, 'ready', {due} + g.n, 0, 0, 0 FROM {series}"
        )
        conn.commit()
        analyze(engine, conn, [runs_table, steps_table])
    finally:
        conn.close()


def _finished(engine: Engine, prefix: str) -> int:
    # The finished_at index: a range of the finished runs, never the million waiting.
    table = q(engine, prefix + "runs")
    (count,) = raw_one(engine, f"SELECT COUNT(*) FROM {table} WHERE finished_at > 0")
    return int(count)


def _drain(
    engine: Engine, prefix: str, runs: int, processes: int, workers: int = 8
) -> dict[str, Any]:
    """``processes`` worker processes drain at least ``runs`` runs; the rate, from the store."""
    with client_processes(engine, prefix, processes, workers=workers, poll=0.5, workflows=["noop"]):
        deadline = time.monotonic() + 600
        while _finished(engine, prefix) < runs:
            if time.monotonic() > deadline:
                raise Failed(f"{engine.name}: {runs} runs did not finish within 600 s")
            time.sleep(0.2)
    failed = raw_one(
        engine,
        f"SELECT COUNT(*) FROM {q(engine, prefix + 'runs')} "
        f"WHERE finished_at > 0 AND state <> 'succeeded'",
    )[0]
    if int(failed):
        raise Failed(f"{engine.name}: {failed} runs finished other than succeeded")
    steps, seconds = step_window(engine, prefix)
    return {"completed": steps, "seconds": seconds, "runs_per_s": steps / seconds}


def w8_depth(engine: Engine, *, queued: int, drain: int) -> dict[str, Any]:
    """One worker process draining ``drain`` runs: from a queue of ``drain``, then of ``queued``."""
    with namespace(engine) as (prefix, _store):
        fill_queued(engine, prefix, drain)
        shallow = _drain(engine, prefix, drain, processes=1)
    with namespace(engine) as (prefix, _store):
        started = time.monotonic()
        fill_queued(engine, prefix, queued)
        filled = time.monotonic() - started
        deep = _drain(engine, prefix, drain, processes=1)
    return {
        "queued": queued,
        "drained": drain,
        "fill_seconds": filled,
        "runs_per_s_shallow": shallow["runs_per_s"],
        "runs_per_s_deep": deep["runs_per_s"],
        "ratio_deep_to_shallow": deep["runs_per_s"] / shallow["runs_per_s"],
    }


def w8_processes(engine: Engine, *, runs: int, processes: int = 4) -> dict[str, Any]:
    """``runs`` queued runs drained by one worker process, then by ``processes`` of them."""
    rates = {}
    for count in (1, processes):
        with namespace(engine) as (prefix, _store):
            fill_queued(engine, prefix, runs)
            rates[count] = _drain(engine, prefix, runs, processes=count)["runs_per_s"]
    return {
        "runs": runs,
        "processes": processes,
        "workers_per_process": 8,
        "runs_per_s_one": rates[1],
        "runs_per_s_many": rates[processes],
        "ratio_many_to_one": rates[processes] / rates[1],
    }
