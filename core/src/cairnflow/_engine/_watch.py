"""The stop watch: the thread that drains a client when it is idle or due for a recycle.

A client given ``Recycle`` limits or told to ``stop_when_idle`` gets one more
thread. It drains the client (through the ``halt`` callback, from this thread:
never from a worker, the dispatcher or the committer, which the drain joins)
when:

* ``Recycle.jobs`` attempts were claimed (the claim plan takes no more than
  that: ``EngineState.max_claims``), so they finish and nothing new starts;
* the client ran ``Recycle.seconds``;
* the process's resident memory reached ``Recycle.memory_mb`` (``/proc/self/statm``
  where there is one, else the peak from ``resource.getrusage``);
* no unfinished run of the client's workflows on its queues existed for the
  idle grace. That is judged from the store, not from this client's attempts:
  a run sleeping, waiting for a signal, delayed, or running on another client
  keeps it busy. Each look asks the store, for each of its workflows on each of
  its queues, for one unfinished run (``list_runs`` of the unfinished statuses,
  with the queue filter) and, while idle, for one run created since the grace
  began, so a run enqueued and finished between two looks still restarts it.
  At most one look a second.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

from .._fleet import StopCause
from .._models import Status
from ..store import RunQuery
from ._attempt import monotonic
from ._state import CLOSURE_WORKFLOW, EngineState

__all__ = ["StopWatch", "resident_mib"]

_MIB = 1024 * 1024
_UNFINISHED = frozenset(status for status in Status if not status.finished)
"""Runs read per page of a look for unfinished runs."""


def resident_mib() -> float:
    """This process's resident memory in MiB (its peak where the current one is not readable)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / _MIB
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # ru_maxrss is in KiB on Linux and the BSDs, in bytes on macOS.
        return peak / _MIB if sys.platform == "darwin" else peak / 1024


class StopWatch:
    """Watches one client's recycle limits and idleness; see the module docstring."""

    def __init__(self, state: EngineState, halt: Callable[[StopCause, float], object]) -> None:
        self._state = state
        self._halt = halt
        self._poke = threading.Event()
        self._stop = threading.Event()
        self._idle_grace: float | None = None
        self._idle_drain = 30.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started_at = monotonic()

    def start(self) -> None:
        """Start watching (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self._started_at = monotonic()
            self._thread = threading.Thread(
                target=self._loop,
                name=f"cairnflow-stopwatch-{self._state.settings.node_id}",
                daemon=True,
            )
            self._thread.start()

    def when_idle(self, grace: float, drain_timeout: float) -> None:
        """Drain once no unfinished run of the client's was seen for ``grace`` seconds."""
        with self._lock:
            self._idle_grace = grace
            self._idle_drain = drain_timeout
        self._poke.set()
        self.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop watching; wait for the thread unless called from it (it is halting)."""
        self._stop.set()
        self._poke.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and thread.is_alive():
            thread.join(timeout)

    # -- the thread ----------------------------------------------------------------------
    def _loop(self) -> None:
        state = self._state
        recycle = state.settings.recycle
        idle_since: float | None = None
        idle_since_ns = 0
        while not self._stop.is_set():
            with self._lock:
                grace, idle_drain = self._idle_grace, self._idle_drain
            tick = 1.0 if grace is None else min(1.0, max(0.05, grace / 4))
            cause = self._recycle_cause()
            if cause is not None:
                assert recycle is not None
                self._halt(cause, recycle.drain_timeout)
                return
            if grace is not None:
                try:
                    busy = self._busy(idle_since_ns if idle_since is not None else None)
                except Exception:  # a look that failed proves nothing: start the grace again
                    state.log.warning("could not tell whether the client is idle", exc_info=True)
                    busy = True
                if busy:
                    idle_since = None
                elif idle_since is None:
                    idle_since, idle_since_ns = monotonic(), state.now()
                elif monotonic() - idle_since >= grace:
                    self._halt(StopCause.IDLE, idle_drain)
                    return
            if recycle is not None and recycle.jobs is not None:
                tick = min(tick, 0.1)  # the last job's claim is noticed soon
            if recycle is not None and recycle.seconds is not None:
                left = self._started_at + recycle.seconds - monotonic()
                tick = min(tick, max(0.01, left))
            self._poke.wait(tick)
            self._poke.clear()

    def _recycle_cause(self) -> StopCause | None:
        recycle = self._state.settings.recycle
        if recycle is None:
            return None
        if self._state.claims_spent.is_set():
            return StopCause.RECYCLE_JOBS
        if recycle.seconds is not None and monotonic() - self._started_at >= recycle.seconds:
            return StopCause.RECYCLE_TIME
        if recycle.memory_mb is not None and resident_mib() >= recycle.memory_mb:
            return StopCause.RECYCLE_MEMORY
        return None

    def _busy(self, idle_since_ns: int | None) -> bool:
        """True while the client holds an attempt or the store has a run of its to finish.

        ``idle_since_ns``: while idle, a served run created since then (even one
        already finished) counts as busy: it was enqueued during the grace.
        """
        state = self._state
        if state.held_attempts():
            return True
        store = state.store
        for workflow in sorted(state.workflow_names - {CLOSURE_WORKFLOW}):
            for queue in sorted(state.queues):
                # One run is enough: the filter (workflow, queue, unfinished) is the store's.
                unfinished = RunQuery(workflow=workflow, queue=queue, statuses=_UNFINISHED, limit=1)
                if store.list_runs(unfinished).runs:
                    return True
                if idle_since_ns is not None:
                    since = RunQuery(
                        workflow=workflow, queue=queue, created_since=idle_since_ns, limit=1
                    )
                    if store.list_runs(since).runs:
                        return True
        return False
