"""The ``RunStats`` facet of ``memory://``: the dashboard's counts, from a walk of its runs.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module; it reads
under the store's lock, so the numbers agree. An in-process store holds few
runs, so a walk costs less than keeping counters.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from .._models import StepStatus
from ._records import ACTIVE
from ._stats import RunStatistics, assemble

__all__ = ["MemoryStats"]

_COUNTED = frozenset(
    {
        StepStatus.READY,
        StepStatus.RUNNING,
        StepStatus.SCHEDULED,
        StepStatus.SLEEPING,
        StepStatus.WAITING,
    }
)


class MemoryStats:
    """``run_statistics`` of a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock
    _runs: dict[str, Any]

    def run_statistics(self, *, since: int, now: int, width: int) -> RunStatistics:
        """Counts by queue and status, per-queue figures, and throughput since ``since``."""
        active: Counter[str] = Counter()
        finished: Counter[tuple[str, str]] = Counter()
        steps: Counter[tuple[str, str]] = Counter()
        oldest: dict[str, int] = {}
        ended: Counter[tuple[int, str]] = Counter()
        with self._lock:
            for run in self._runs.values():
                if run.state == ACTIVE:
                    active[run.queue] += 1
                    for step in run.steps.values():
                        if step.status in _COUNTED:
                            steps[(run.queue, step.status.value)] += 1
                        if step.status is StepStatus.READY and step.due_at is not None:
                            oldest[run.queue] = min(oldest.get(run.queue, step.due_at), step.due_at)
                elif run.finished_at is not None and run.finished_at >= since:
                    finished[(run.queue, run.state)] += 1
                    ended[((run.finished_at - since) // width, run.state)] += 1
        return assemble(
            since=since,
            now=now,
            width=width,
            active_runs=dict(active),
            finished_runs=dict(finished),
            steps=dict(steps),
            oldest=oldest,
            ended=dict(ended),
        )
