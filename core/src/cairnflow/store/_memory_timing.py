"""The ``RunTiming`` facet of ``memory://``: rescheduling, forcing, and when work falls due.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. It
shares the store's lock, so a reschedule and a claim never interleave: the
run is moved whole, or (a step of it claimed first) not at all, as in a SQL
store's transaction. A forced run is a flag on the run that the store's claim
reads beside the pauses (:meth:`MemoryStore._claim_queue`).
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._errors import RunNotFound
from .._models import StepStatus
from ._records import ACTIVE, PauseKind

if TYPE_CHECKING:
    from ._memory import _Run, _Step

__all__ = ["MemoryTiming"]

# A compensation is skipped until its run fails (Cap.COMPENSATION): not started either.
_NOT_STARTED = (StepStatus.BLOCKED, StepStatus.READY, StepStatus.SCHEDULED, StepStatus.SKIPPED)


class MemoryTiming:
    """Reschedule, force and the next due time, over a memory store's runs (mixed in)."""

    _lock: threading.RLock
    _runs: dict[str, _Run]
    _ready: dict[str, _Step]
    _timed: dict[str, _Step]
    _running: dict[str, _Step]

    def _make_ready(self, step: _Step, due_at: int, now: int | None = None) -> None:  # the store's
        raise NotImplementedError

    def _paused(self, kind: PauseKind, name: str) -> bool:  # MemoryPauses'
        raise NotImplementedError

    def _active_run(self, run_id: str) -> _Run | None:
        """The run, None when it finished (lock held); RunNotFound when there is none."""
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run if run.state == ACTIVE else None

    def _move(self, step: _Step, due_at: int, now: int) -> None:
        """Take a ready or scheduled step out of its set and put it back for ``due_at``."""
        self._ready.pop(step.id, None)
        self._timed.pop(step.id, None)
        self._make_ready(step, due_at, now)

    def reschedule_run(self, run_id: str, at: int, now: int) -> bool:
        """Move a run that has not started to ``at`` (now, if ``at`` is past)."""
        with self._lock:
            run = self._active_run(run_id)
            if run is None:
                return False
            steps = list(run.steps.values())
            if any(s.attempt > 0 or s.status not in _NOT_STARTED for s in steps):
                return False
            start = max(at, now)
            for step in steps:
                if step.status in (StepStatus.READY, StepStatus.SCHEDULED):
                    self._move(step, start, now)
            run.run_at = start
            return True

    def force_run(self, run_id: str, now: int) -> bool:
        """Make the run's scheduled steps ready now, and let pauses pass the run."""
        with self._lock:
            run = self._active_run(run_id)
            if run is None:
                return False
            changed = not run.forced
            run.forced = True
            for step in list(run.steps.values()):
                if step.status is StepStatus.SCHEDULED:
                    self._move(step, now, now)
                    changed = True
            return changed

    def next_due(
        self, *, workflows: Collection[str], queues: Collection[str], now: int
    ) -> int | None:
        """Now if a step is ready for these queues, else the earliest timed step or lease end."""
        with self._lock:
            times: list[int] = []
            for step in self._ready.values():
                run = step.run
                if run.workflow not in workflows or run.queue not in queues:
                    continue
                held = self._paused(PauseKind.QUEUE, run.queue) or self._paused(
                    PauseKind.WORKFLOW, run.workflow
                )
                if run.forced or not held:
                    times.append(step.due_at if step.due_at is not None else now)
            for step in self._timed.values():
                run = step.run
                if step.due_at is None or run.workflow not in workflows:
                    continue
                if step.status is not StepStatus.SCHEDULED or run.queue in queues:
                    times.append(step.due_at)
            for step in self._running.values():
                if step.lease_until is not None and step.run.workflow in workflows:
                    times.append(step.lease_until + 1)
            return max(min(times), now) if times else None
