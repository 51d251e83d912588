"""Failure paths of ``memory://``: wait branches and compensations (a saga).

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module, under
the store's one lock, and the specification the SQL layer
(:mod:`cairnflow.sql._branches`) is checked against:

- ``Cap.WAIT_BRANCH``: a wait whose deadline passed and that has a branch step
  (a step of kind ``branch`` whose one stored parent is the wait) ends
  ``timed_out``; every step after it is ``skipped`` and the branch becomes
  ready. A wait resolved by its signal skips its branch (and every step after
  the branch) instead. Skipped steps count as done: the run ends succeeded
  once the rest of it did.
- ``Cap.COMPENSATION``: compensation steps are created ``skipped`` (their one
  stored parent is the step they compensate). When a step fails for good and
  the run would end ``failed``, the compensations of its succeeded steps run
  instead, one after the other, the step that finished last first; the run
  keeps the original error and stays active (its unfinished steps cancelled).
  Once the last compensation succeeded the run ends ``failed`` with that error;
  a compensation that fails for good ends it ``failed`` at once, the rest of
  the compensations cancelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._models import ErrorInfo, Status, StepKind, StepStatus
from ._records import AttemptState, FinishResult

if TYPE_CHECKING:
    from ._memory import _Run, _Step

__all__ = ["MemoryBranches"]


class MemoryBranches:
    """Skipping, taking a branch, and running compensations (mixed into the store)."""

    _ready: dict[str, _Step]
    _running: dict[str, _Step]
    _timed: dict[str, _Step]

    def _make_ready(self, step: _Step, due_at: int, now: int | None = None) -> None:
        raise NotImplementedError  # the store's

    def _end_run(self, run: _Run, state: str, now: int, error: ErrorInfo | None) -> None:
        raise NotImplementedError  # the store's

    def _transition(self, step: _Step, event: str, now: int) -> None:
        raise NotImplementedError  # the store's

    def _cancel_unfinished(self, run: _Run, now: int) -> None:
        raise NotImplementedError  # the store's

    # -- Cap.WAIT_BRANCH ----------------------------------------------------------------------
    @staticmethod
    def _branch_of(wait: _Step) -> _Step | None:
        """The branch step of ``wait``, if it has one."""
        if wait.kind is not StepKind.WAIT:
            return None
        for step in wait.run.steps.values():
            if step.kind is StepKind.BRANCH and step.parents == (wait.name,):
                return step
        return None

    def _skip(self, run: _Run, roots: tuple[str, ...], now: int) -> None:
        """Skip the blocked steps ``roots`` and every blocked step after them (done: counted)."""
        todo = list(roots)
        while todo:
            step = run.steps[todo.pop()]
            if step.status is not StepStatus.BLOCKED:
                continue
            step.status = StepStatus.SKIPPED
            step.finished_at = now
            step.due_at = None
            run.steps_left -= 1
            self._transition(step, "skipped", now)
            todo.extend(step.children)

    def _skip_branch(self, wait: _Step, now: int) -> None:
        """``wait`` got its signal: its branch, if any, is not taken."""
        branch = self._branch_of(wait)
        if branch is not None:
            self._skip(wait.run, (branch.name,), now)

    def _take_branch(self, wait: _Step, error: ErrorInfo, now: int) -> bool:
        """``wait`` timed out: continue down its branch; False when it has none."""
        branch = self._branch_of(wait)
        if branch is None:
            return False
        run = wait.run
        wait.status = StepStatus.TIMED_OUT
        wait.error = error
        wait.finished_at = now
        wait.due_at = None
        run.steps_left -= 1
        self._transition(wait, "timed_out", now)
        self._skip(run, wait.children, now)
        branch.parents_left = 0
        self._make_ready(branch, now)
        return True

    # -- Cap.COMPENSATION ---------------------------------------------------------------------
    @staticmethod
    def _compensations(run: _Run) -> list[_Step]:
        """The run's compensations whose step succeeded, the latest to finish first."""
        found = [
            step
            for step in run.steps.values()
            if step.kind is StepKind.COMPENSATION
            and run.steps[step.parents[0]].status is StepStatus.SUCCEEDED
        ]
        found.sort(
            key=lambda c: (run.steps[c.parents[0]].finished_at or 0, run.steps[c.parents[0]].seq),
            reverse=True,
        )
        return found

    def _run_failed(self, step: _Step, final: Status, error: ErrorInfo, now: int) -> bool:
        """``step`` failed for good: compensate, or end the run. True when it ended."""
        run = step.run
        if step.kind is StepKind.COMPENSATION:
            # A compensation out of retries: the run ends failed with its original error.
            self._end_run(run, Status.FAILED.value, now, error=run.error)
            return True
        due = self._compensations(run) if final is Status.FAILED else []
        due = [c for c in due if c.status is StepStatus.SKIPPED]
        if not due:
            self._end_run(run, final.value, now, error=error)
            return True
        run.error = error
        run.signals.clear()
        self._cancel_unfinished(run, now)  # the compensations are skipped: finished, kept
        first, *rest = due
        for later in rest:
            later.status = StepStatus.BLOCKED
            later.finished_at = None
        first.parents_left = 0
        first.finished_at = None
        self._make_ready(first, now)
        return False

    def _compensated(self, step: _Step, now: int) -> FinishResult:
        """A compensation succeeded: start the next one, or end the run failed."""
        run = step.run
        for later in self._compensations(run):
            if later.status is StepStatus.BLOCKED:
                later.parents_left = 0
                self._make_ready(later, now)
                return FinishResult(AttemptState.HELD, ready=1)
        self._end_run(run, Status.FAILED.value, now, error=run.error)
        return FinishResult(AttemptState.HELD, run_status=Status.FAILED)
