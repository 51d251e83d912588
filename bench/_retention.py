"""Tables that stay small (#16): W2 beside a history of finished runs, and W2 while pruning it.

``w2_history`` drains W2's runs on a namespace that already holds ``history`` finished runs
(each with its one step, finished ten days ago, written in two statements), and on an empty
one, in the same run: the claim's indexes hold no finished row, so the ratio should stay near
1. ``w2_pruning`` drains W2 on such a history without pruning and while a second client
prunes it (``prune_after`` one day, chunks of 200, the prune lock), and compares the
throughput and the p95 of the claim calls the draining client made (timed around the store).

Both measure in ``rounds`` adjacent pairs over one history (filled once: a fill of 1,000,000
runs takes longer than the drains) and report the median of the pairs' ratios. One pair is
not enough on a 2-vCPU machine: plain W2 alone swings by 10-15% between two drains minutes
apart, which is the whole margin the targets allow (docs/benchmarks.md). A pruning round
deletes a few thousand of the history's runs, so the later rounds see a history that much
smaller: under 1% of it at the full size.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import _apps
from _engines import Engine
from _workloads import (
    Failed,
    analyze,
    enqueue_all,
    namespace,
    null_payload,
    numbered,
    numbered_text,
    q,
    raw_one,
    settle,
)

import cairnflow as cf

_DAY_NS = 86_400 * 10**9


class TimedClaims:
    """Wraps a store and times every ``claim`` (milliseconds), passing everything else on."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.claims_ms: list[float] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def claim(self, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._inner.claim(request)
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            with self._lock:
                self.claims_ms.append(elapsed)


def fill_history(engine: Engine, prefix: str, runs: int) -> float:
    """``runs`` succeeded runs of ``noop``, each with its step, finished ten days ago.

    Analysed and settled (``_workloads.settle``): what a history of days looks like, not a
    burst written a moment ago. Returns the seconds the settling took.
    """
    old = time.time_ns() - 10 * _DAY_NS
    runs_table, steps_table = q(engine, prefix + "runs"), q(engine, prefix + "steps")
    with_series, series = numbered(engine, runs)
    run_id, step_id = numbered_text(engine, "hist_"), numbered_text(engine, "hstep_")
    payload = null_payload(engine)
    conn = engine.connect()
    try:
        cur = conn.cursor()
        cur.execute(
            f"INSERT INTO {runs_table} (id, workflow, queue, priority, state, payload, labels, "
            f"steps_left, created_at, run_at, finished_at) {with_series}"
            f"SELECT {run_id}, 'noop', 'default', 0, 'succeeded', {payload}, '{{}}', 0, "
            f"{old} + g.n, {old} + g.n, {old} + g.n + 1000 FROM {series}"
        )
        cur.execute(
            f"INSERT INTO {steps_table} (id, run_id, workflow, queue, priority, name, kind, "
            f"position, parents, children, parents_left, status, attempt, failures, reclaims, "
            f"output, started_at, finished_at) {with_series}"
            f"SELECT {step_id}, {run_id}, 'noop', 'default', 0, 'only', 'task', 0, '[]', '[]', "
            f"0, 'succeeded', 1, 0, 0, {payload}, {old} + g.n, {old} + g.n + 1000 FROM {series}"
        )
        conn.commit()
        analyze(engine, conn, [runs_table, steps_table])
        return settle(engine, conn)
    finally:
        conn.close()


def _drain(
    engine: Engine, prefix: str, store: Any, runs: int, *, prune: bool, workers: int = 8
) -> dict[str, Any]:
    """Enqueue ``runs`` of ``noop``, drain them with one client (and a pruner); the figures."""
    workflow = _apps.noop()
    enqueue_all(store, workflow, runs)
    runs_table, steps_table = q(engine, prefix + "runs"), q(engine, prefix + "steps")
    started_ns = time.time_ns()
    timed = TimedClaims(store)
    pruner = None
    if prune:
        pruner = cf.Client(
            engine.make_store(prefix), prune_after=86_400, prune_interval=0.1, lease=30
        )
        pruner.start()
    try:
        with cf.Client(timed, workers=workers, poll_interval=0.5, lease=30) as client:
            client.register(workflow)
            deadline = time.monotonic() + 600
            while True:
                (left,) = raw_one(
                    engine, f"SELECT COUNT(*) FROM {runs_table} WHERE state = 'active'"
                )
                if int(left) == 0:
                    break
                if time.monotonic() > deadline:
                    raise Failed(f"{engine.name}: W2 runs did not finish within 600s")
                time.sleep(0.2)
    finally:
        if pruner is not None:
            pruner.stop()
            pruner.store.close()
    done, first, last = raw_one(
        engine,
        f"SELECT COUNT(*), MIN(started_at), MAX(finished_at) FROM {steps_table} "
        f"WHERE status = 'succeeded' AND started_at >= {started_ns}",
    )
    if int(done) != runs:
        raise Failed(f"{engine.name}: {done} of {runs} W2 runs succeeded")
    claims = sorted(timed.claims_ms)
    return {
        "runs_per_s": int(done) / ((int(last) - int(first)) / 1e9),
        "claim_p95_ms": claims[int(len(claims) * 0.95)] if claims else 0.0,
        "claim_p50_ms": statistics.median(claims) if claims else 0.0,
        "claims": len(claims),
    }


def _history_left(engine: Engine, prefix: str) -> int:
    (left,) = raw_one(
        engine, f"SELECT COUNT(*) FROM {q(engine, prefix + 'runs')} WHERE id LIKE 'hist%'"
    )
    return int(left)


def _ratios(pairs: list[tuple[float, float]]) -> list[float]:
    """Each pair's second figure over its first (a p95 of 0 ms counts as a microsecond)."""
    return [b / max(a, 1e-3) for a, b in pairs]


def w2_history(engine: Engine, *, runs: int, history: int, rounds: int = 1) -> dict[str, Any]:
    """W2 on empty tables, then beside ``history`` finished runs, ``rounds`` times in turn."""
    throughput: list[tuple[float, float]] = []
    p95: list[tuple[float, float]] = []
    with namespace(engine) as (full_prefix, full_store):
        started = time.perf_counter()
        settle_s = fill_history(engine, full_prefix, history)
        fill_s = time.perf_counter() - started
        for _ in range(rounds):
            with namespace(engine) as (prefix, store):
                empty = _drain(engine, prefix, store, runs, prune=False)
            full = _drain(engine, full_prefix, full_store, runs, prune=False)
            throughput.append((empty["runs_per_s"], full["runs_per_s"]))
            p95.append((empty["claim_p95_ms"], full["claim_p95_ms"]))
    return {
        "runs": runs,
        "history": history,
        "rounds": rounds,
        "fill_s": fill_s,
        "settle_s": settle_s,
        "runs_per_s_empty": statistics.median(e for e, _ in throughput),
        "runs_per_s_history": statistics.median(h for _, h in throughput),
        "pair_ratios": _ratios(throughput),
        "ratio_to_empty": statistics.median(_ratios(throughput)),
        "claim_p95_ms_empty": statistics.median(e for e, _ in p95),
        "claim_p95_ms_history": statistics.median(h for _, h in p95),
    }


def w2_pruning(engine: Engine, *, runs: int, history: int, rounds: int = 1) -> dict[str, Any]:
    """W2 beside ``history`` finished runs, without and with a client pruning them, in turn."""
    throughput: list[tuple[float, float]] = []
    p95: list[tuple[float, float]] = []
    pruned: list[int] = []
    with namespace(engine) as (prefix, store):
        fill_history(engine, prefix, history)
        for _ in range(rounds):
            still = _drain(engine, prefix, store, runs, prune=False)
            before = _history_left(engine, prefix)
            pruning = _drain(engine, prefix, store, runs, prune=True)
            pruned.append(before - _history_left(engine, prefix))
            throughput.append((still["runs_per_s"], pruning["runs_per_s"]))
            p95.append((still["claim_p95_ms"], pruning["claim_p95_ms"]))
    return {
        "runs": runs,
        "history": history,
        "rounds": rounds,
        "pruned_during_w2": pruned,
        "runs_per_s_still": statistics.median(s for s, _ in throughput),
        "runs_per_s_pruning": statistics.median(p for _, p in throughput),
        "pair_ratios": _ratios(throughput),
        "ratio_to_still": statistics.median(_ratios(throughput)),
        "claim_p95_ms_still": statistics.median(s for s, _ in p95),
        "claim_p95_ms_pruning": statistics.median(p for _, p in p95),
        "p95_pair_ratios": _ratios(p95),
        "p95_ratio": statistics.median(_ratios(p95)),
    }
