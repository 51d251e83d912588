"""The ``RunAdmin`` facet of ``memory://``: retrying, deleting and cancelling runs that exist.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module, under
the store's one lock: each call is atomic like a transaction of a SQL store
(:mod:`cairnflow.sql._admin`), and this is the specification it is checked
against. Retrying forgets the old leases (their tokens stop holding anything),
so a late outcome of an attempt of the run before the retry is refused as lost.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._errors import DuplicateRun, RunNotFound, StepNotFound
from .._models import ErrorInfo, RunError, Status, StepEvent, StepKind, StepStatus
from ._records import ACTIVE, RETRYABLE, Reopened, cancelled_step_error

if TYPE_CHECKING:
    from ._memory import _Run, _Step

__all__ = ["MemoryAdmin"]

_DONE = frozenset({StepStatus.SUCCEEDED, StepStatus.SKIPPED, StepStatus.TIMED_OUT})
"""What a retry keeps: steps that succeeded, and those a wait's branch settled (WAIT_BRANCH;
a compensation is skipped until its run fails, and a run whose compensations ran is not
retried)."""


class MemoryAdmin:
    """``reopen_run``, ``delete_runs``, ``cancel_runs``, ``cancel_step`` (mixed into the store)."""

    _lock: threading.RLock
    _runs: dict[str, _Run]
    _ready: dict[str, _Step]
    _running: dict[str, _Step]
    _timed: dict[str, _Step]
    _tokens: dict[str, _Step]
    _active_keys: dict[tuple[str, str], str]
    _errors: dict[str, list[RunError]]
    _error_seq: dict[str, int]
    _journal: dict[tuple[str, str, str], bytes]
    _history: dict[str, list[StepEvent]]

    def _record_step(
        self, run_id: str, step: str, attempt: int, node: str | None, event: str, now: int
    ) -> None:
        raise NotImplementedError  # the store's (MemoryStepHistory)

    def _make_ready(self, step: _Step, due_at: int, now: int | None = None) -> None:
        raise NotImplementedError  # the store's

    def _end_run(self, run: _Run, state: str, now: int, error: ErrorInfo | None) -> None:
        raise NotImplementedError  # the store's

    def cancel_run(self, run_id: str, now: int) -> bool:
        raise NotImplementedError  # the store's

    def _admin_run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def reopen_run(self, run_id: str, step: str | None, now: int) -> Reopened:
        """Make a failed, cancelled or discarded run active again from what did not succeed."""
        with self._lock:
            run = self._admin_run(run_id)
            if step is not None and step not in run.steps:
                raise StepNotFound(run_id, step)
            if run.state == ACTIVE:
                return Reopened.UNFINISHED
            if run.state not in RETRYABLE:
                return Reopened.NOT_RETRYABLE
            if step is not None and run.steps[step].status is not StepStatus.FAILED:
                return Reopened.STEP_NOT_FAILED
            if any(
                s.kind is StepKind.COMPENSATION and s.status is not StepStatus.SKIPPED
                for s in run.steps.values()
            ):
                return Reopened.NOT_RETRYABLE  # its succeeded steps were undone (COMPENSATION)
            if run.key is not None:
                holder = self._active_keys.get((run.workflow, run.key))
                if holder is not None:
                    raise DuplicateRun(run.workflow, run.key, holder)
                self._active_keys[(run.workflow, run.key)] = run.id
            run.state = ACTIVE
            run.finished_at = None
            run.error = None
            run.steps_left = 0
            for again in run.steps.values():
                if again.status in _DONE:
                    continue
                run.steps_left += 1
                if again.token is not None:
                    self._tokens.pop(again.token, None)  # a late outcome of it is lost
                again.token = again.lease_until = again.finished_at = None
                again.failures = again.reclaims = 0
                again.output = again.progress = again.signal = again.heartbeat_at = None
                if again.parents_left == 0:
                    self._make_ready(again, now)
                else:
                    again.status = StepStatus.BLOCKED
                    again.due_at = None
                self._record_step(run.id, again.name, again.attempt, again.node, "reopened", now)
            return Reopened.REOPENED

    def delete_runs(self, run_ids: Collection[str]) -> list[str]:
        """Delete the finished runs among ``run_ids``; return those deleted."""
        deleted: list[str] = []
        with self._lock:
            for run_id in sorted(set(run_ids)):
                run = self._runs.get(run_id)
                if run is None or run.state == ACTIVE:
                    continue
                for step in run.steps.values():
                    if step.token is not None:
                        self._tokens.pop(step.token, None)
                del self._runs[run_id]
                # Every row of the run goes with it: its error history and its memos.
                self._errors.pop(run_id, None)
                self._error_seq.pop(run_id, None)
                self._history.pop(run_id, None)
                for memo in [key for key in self._journal if key[0] == run_id]:
                    del self._journal[memo]
                deleted.append(run_id)
        return deleted

    def cancel_runs(self, run_ids: Collection[str], now: int) -> list[str]:
        """Cancel the unfinished runs among ``run_ids``; return those cancelled."""
        with self._lock:
            return [
                run_id
                for run_id in sorted(set(run_ids))
                if run_id in self._runs and self.cancel_run(run_id, now)
            ]

    def cancel_step(self, run_id: str, step: str, now: int) -> bool:
        """Cancel one unfinished step of an unfinished run, and its descendants."""
        with self._lock:
            run = self._admin_run(run_id)
            target = run.steps.get(step)
            if target is None:
                raise StepNotFound(run_id, step)
            if run.state != ACTIVE or target.status.finished:
                return False
            if target.kind is StepKind.COMPENSATION:
                return False  # a compensating run is undone whole or cancelled whole
            # A wait's branch depends on it too (Cap.WAIT_BRANCH), though it is not its child.
            branches = {
                s.parents[0]: s.name for s in run.steps.values() if s.kind is StepKind.BRANCH
            }
            doomed = [target]
            seen = {target.name}
            for current in doomed:  # grows as it goes: every descendant, once
                branch = branches.get(current.name)
                for name in (*current.children, *((branch,) if branch else ())):
                    child = run.steps[name]
                    if name not in seen and not child.status.finished:
                        seen.add(name)
                        doomed.append(child)
            for gone in doomed:
                # A running attempt keeps its token: its renewal reports it cancelled.
                self._running.pop(gone.id, None)
                self._ready.pop(gone.id, None)
                self._timed.pop(gone.id, None)
                gone.status = StepStatus.CANCELLED
                gone.finished_at = now
                gone.due_at = None
                self._record_step(run.id, gone.name, gone.attempt, gone.node, "cancelled", now)
            run.error = cancelled_step_error(step)
            run.steps_left -= len(doomed)
            if run.steps_left == 0:
                self._end_run(run, Status.CANCELLED.value, now, run.error)
            return True
