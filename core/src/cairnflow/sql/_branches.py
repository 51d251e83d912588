"""Failure paths in SQL: wait branches (``Cap.WAIT_BRANCH``), compensations (``Cap.COMPENSATION``).

The rules are the memory store's (:mod:`cairnflow.store._memory_branches`),
written here for a locked run: :class:`~cairnflow.sql._outcomes.Outcomes`
calls these inside the transaction that holds the run's row, so they are
serialised with every other transition of the run. Nothing here runs on the
common path: a wait resolved, a step failed for good or a compensation
succeeded reads the run's steps once (``RUN_GRAPH``, by the ``(run_id, name)``
key) and writes the few rows that change, by id.

- A branch step is stored ``blocked`` with the wait as its one parent, and is
  not among the wait's children, so a signal never releases it. A wait that
  timed out and has one ends ``timed_out``, the blocked steps after it are
  ``skipped`` and the branch is made ready; a wait resolved in time skips its
  branch and the steps after it. Skipped and timed-out steps count as done in
  the run's ``steps_left``, so the run ends succeeded by the usual count.
- A compensation step is stored ``skipped`` with the step it compensates as
  its one parent (its input is that step's output), and is not counted in
  ``steps_left``. When a step fails for good and the run would end failed, the
  compensations whose step succeeded are started instead, one at a time, the
  step that finished last first; the run keeps its error and stays active.
  The last one to succeed ends the run failed with that error; one that fails
  for good ends it at once (the rest are cancelled with the run's other
  unfinished steps).

The statements are here rather than in :mod:`._statements` because nothing
else runs them.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._models import StepKind, StepStatus
from ._dialect import Cursor
from ._parts import Context, Part, chunks
from ._queries import marks
from ._rows import GraphStep, to_text
from ._statements import render

__all__ = ["FailurePaths"]

RUN_GRAPH = """
            SELECT id, name, kind, status, parents, children, finished_at, position
            FROM {steps} WHERE run_id = ?"""
"""Every step of a locked run, as a failure path reads the DAG."""

SKIP_STEPS = """
            UPDATE {steps} SET status = 'skipped', finished_at = ?, due_at = NULL
            WHERE id IN ({ids}) AND status = 'blocked'"""
"""Steps that will never run: a branch not taken, or the path after a wait that timed out."""

TIME_OUT_TO_BRANCH = """
            UPDATE {steps} SET status = 'timed_out', error = ?, finished_at = ?, due_at = NULL
            WHERE id = ? AND status = 'waiting' AND due_at <= ?"""
"""A wait reached its deadline and has a branch: it ends timed out, not failed."""

START_STEP = """
            UPDATE {steps} SET status = 'ready', parents_left = 0, due_at = ?, finished_at = NULL
            WHERE id = ? AND status IN ('blocked', 'skipped')"""
"""A branch (blocked) or a compensation (skipped, or blocked behind another) becomes ready."""

HOLD_COMPENSATIONS = """
            UPDATE {steps} SET status = 'blocked'
            WHERE id IN ({ids}) AND status = 'skipped'"""
"""The compensations that run after the first: blocked until the one before succeeds."""

KEEP_RUN_ERROR = "UPDATE {runs} SET error = ? WHERE id = ?"
"""A run that compensates keeps the error that failed it (and stays active)."""

RUN_ERROR = "SELECT error FROM {runs} WHERE id = ?"
"""The error a compensating run kept: its error once its compensations are done."""


class FailurePaths(Part):
    """Skip, take a branch, start and chain compensations (inside a run's transaction)."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        values = context.tables.template()
        self._graph_sql = render(RUN_GRAPH, values)
        self._skip_sql = render(SKIP_STEPS, values)
        self._time_out_sql = render(TIME_OUT_TO_BRANCH, values)
        self._start_sql = render(START_STEP, values)
        self._hold_sql = render(HOLD_COMPENSATIONS, values)
        self._keep_error_sql = render(KEEP_RUN_ERROR, values)
        self._error_sql = render(RUN_ERROR, values)

    def _graph(self, cur: Cursor, run_id: str) -> dict[str, GraphStep]:
        rows = self._execute(cur, self._graph_sql, (run_id,)).fetchall()
        return {step.name: step for step in map(GraphStep.from_row, rows)}

    def _skip(
        self, cur: Cursor, graph: dict[str, GraphStep], roots: Sequence[str], now: int
    ) -> int:
        """Skip the blocked steps ``roots`` and every blocked step after them; how many."""
        found: list[str] = []
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            step = graph[todo.pop()]
            if step.name in seen or step.status != StepStatus.BLOCKED.value:
                continue
            seen.add(step.name)
            found.append(step.id)
            todo.extend(step.children)
        skipped = 0
        for chunk in chunks(found):
            sql = self._skip_sql.format(ids=marks(len(chunk)))
            skipped += int(self._execute(cur, sql, (now, *chunk)).rowcount)
        return skipped

    @staticmethod
    def _branch_of(graph: dict[str, GraphStep], wait: str) -> GraphStep | None:
        for step in graph.values():
            if step.kind == StepKind.BRANCH.value and step.parents == [wait]:
                return step
        return None

    # -- Cap.WAIT_BRANCH ----------------------------------------------------------------------
    def skip_branch(self, cur: Cursor, run_id: str, wait_id: str, now: int) -> int:
        """The wait ``wait_id`` got its signal: skip its branch, if any. Steps skipped."""
        graph = self._graph(cur, run_id)
        wait = next((s for s in graph.values() if s.id == wait_id), None)
        branch = None if wait is None else self._branch_of(graph, wait.name)
        return 0 if branch is None else self._skip(cur, graph, [branch.name], now)

    def take_branch(
        self, cur: Cursor, run_id: str, wait_id: str, error: str, now: int
    ) -> int | None:
        """The wait ``wait_id`` is past its deadline: end it timed out and start its branch.

        None when it has no branch (it fails, as before); otherwise how many steps
        are done by it (the wait and the steps skipped after it).
        """
        graph = self._graph(cur, run_id)
        wait = next((s for s in graph.values() if s.id == wait_id), None)
        branch = None if wait is None else self._branch_of(graph, wait.name)
        if wait is None or branch is None:
            return None
        if self._execute(cur, self._time_out_sql, (error, now, wait_id, now)).rowcount != 1:
            return 0
        skipped = self._skip(cur, graph, wait.children, now)
        self._execute(cur, self._start_sql, (now, branch.id))
        return 1 + skipped

    # -- Cap.COMPENSATION ---------------------------------------------------------------------
    @staticmethod
    def _due(graph: dict[str, GraphStep]) -> list[GraphStep]:
        """The compensations whose step succeeded, the step that finished last first."""
        succeeded = StepStatus.SUCCEEDED.value
        found = [
            step
            for step in graph.values()
            if step.kind == StepKind.COMPENSATION.value
            and graph[step.parents[0]].status == succeeded
        ]
        found.sort(
            key=lambda c: (graph[c.parents[0]].finished_at or 0, graph[c.parents[0]].position),
            reverse=True,
        )
        return found

    def compensations_due(self, cur: Cursor, run_id: str) -> list[str]:
        """The ids of the compensations a run failing now must run, in their order."""
        skipped = StepStatus.SKIPPED.value
        return [step.id for step in self._due(self._graph(cur, run_id)) if step.status == skipped]

    def start_compensations(
        self, cur: Cursor, run_id: str, due: Sequence[str], error: str, now: int
    ) -> None:
        """Keep the run's error and start the first of ``due`` (its other unfinished steps
        were cancelled first); the rest wait behind it, blocked."""
        self._execute(cur, self._keep_error_sql, (error, run_id))
        first, *rest = due
        for chunk in chunks(rest):
            self._execute(cur, self._hold_sql.format(ids=marks(len(chunk))), tuple(chunk))
        self._execute(cur, self._start_sql, (now, first))

    def start_next_compensation(self, cur: Cursor, run_id: str, now: int) -> bool:
        """A compensation succeeded: start the next one; False when none is left."""
        blocked = StepStatus.BLOCKED.value
        for step in self._due(self._graph(cur, run_id)):
            if step.status == blocked:
                self._execute(cur, self._start_sql, (now, step.id))
                return True
        return False

    def kept_error(self, cur: Cursor, run_id: str) -> str | None:
        """The error a compensating run kept."""
        row = self._execute(cur, self._error_sql, (run_id,)).fetchone()
        return None if row is None or row[0] is None else to_text(row[0])
