"""The pruner: finished runs older than ``prune_after`` leave the hot tables (``Cap.RETENTION``).

One thread per client that prunes, so pruning never delays a claim or an
outcome of this client. Every ``prune_interval`` it tries the prune lock (a
named lock, ``Cap.LOCKS``, :data:`~cairnflow.store.PRUNE_LOCK`) for one lease:
the node that gets it prunes, the others try again at their next pass, so
one node prunes at a time. Holding it, it prunes a chunk (``prune_chunk``
runs, one short transaction of the store that checks the lock again, so a
pruner whose lock expired writes nothing), extends the lock, and goes on until
no run is old enough, then releases it. Between two chunks it rests
:data:`REST` times as long as the last chunk took: pruning takes at most a
sixth of the database's time for writes, and claims (on SQLite, one writer)
get the rest however large the backlog. A pruner killed in the middle leaves the lock to expire
after a lease; the next pass of any node takes it and goes on where it
stopped (the oldest finished runs are always pruned first). With ``archive``
each chunk moves its runs to the archive instead (``Cap.ARCHIVE``).
"""

from __future__ import annotations

import threading

from ..state import Locks
from ..store import PRUNE_LOCK, PruneChunk, Retention
from ._attempt import monotonic
from ._state import EngineState

__all__ = ["REST", "Pruner"]

REST = 5.0
"""A pruner rests this many times as long as its last chunk took before the next one.

Pruning then holds at most 1 / (1 + REST) of the writer's time: a sixth, inside the 20% of
W2's throughput that #16 allows it to cost. Measured with bench/run.py (20,000 W2 runs beside
1,000,000 finished ones, three adjacent pairs, 2026-12-02): on SQLite, where the writer is one
and W2 is bound by it, resting 3x (a quarter) kept W2 at 0.78x, 0.71x, 0.76x of not pruning;
resting 1x had kept it at 0.67x with the claim's p95 at 5.2x in quick mode. Postgres and MariaDB
(0.93x, 0.97x at 3x) have room either way. The price is the backlog's pace: about 2,500 runs a
second on SQLite, 1,000,000 runs in some seven minutes, in the background."""


class Pruner:
    """Prunes (or archives) old finished runs, one chunk per transaction (module docstring)."""

    def __init__(self, state: EngineState, retention: Retention, locks: Locks) -> None:
        self._state = state
        self._retention = retention
        self._locks = locks
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the pruning thread (its first pass at once)."""
        self._thread = threading.Thread(
            target=self._loop, name=f"cairnflow-pruner-{self._state.settings.node_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the chunk in flight (its lock released) and wait for the thread."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        every = self._state.settings.prune_interval
        while not self._stop.is_set():
            try:
                self.prune(self._state.settings.prune_after_ns)
            except Exception:
                self._state.log.warning("pruning failed; retrying at the next pass", exc_info=True)
            self._stop.wait(every)

    def prune(self, after_ns: int | None) -> int | None:
        """One pass: prune every finished run older than ``after_ns``; how many went.

        None when another node holds the prune lock (it prunes meanwhile).
        """
        if after_ns is None:
            return 0
        state = self._state
        settings = state.settings
        ttl = settings.lease
        token = self._locks.lock(PRUNE_LOCK, ttl)
        if token is None:
            return None
        pruned = 0
        try:
            while True:
                now = state.now()
                started = monotonic()
                done = self._retention.prune_runs(
                    PruneChunk(
                        before=now - after_ns,
                        limit=settings.prune_chunk,
                        lock=PRUNE_LOCK,
                        token=token,
                        lock_now=self._locks.now(),
                        now=now,
                        archive=settings.archive,
                    )
                )
                if done is None:
                    state.log.warning("the prune lock expired while pruning; another node goes on")
                    return pruned
                pruned += len(done)
                if not done:
                    break
                # Rest: at most a sixth of the writes are pruning's.
                if self._stop.wait(REST * (monotonic() - started)):
                    break
                if not self._locks.extend_lock(PRUNE_LOCK, token, ttl):
                    break
        finally:
            self._locks.unlock(PRUNE_LOCK, token)
        if pruned:
            state.log.info(
                "%s %d finished run(s)", "archived" if settings.archive else "pruned", pruned
            )
        return pruned
