"""The ``StepHistory`` facet in SQL: the transitions of a run's steps, read back.

Nothing here writes. The rows are written by the database itself: each
driver's migration puts a trigger on the steps' ``status`` that records the
transition in the transaction of the ``UPDATE`` that makes it. Measured
choice: the claim is the hot path, and recording its transitions from Python
would add a statement to every claim (the pipelined claim reads its rows only
after COMMIT, so the ids are not known in time; an ``INSERT ... SELECT`` keyed
on the lease would be one more statement per claim and per outcome batch). A
trigger adds none (measured: docs/history.md), records every writer's transitions
alike (outcomes, reclaims, hand backs, cancels, an operator's reopening),
and is fenced by construction: a fenced write that changes no row fires
nothing. The same trigger bounds the history (see the migrations).

The read is one range of the primary key (SQLite: of ``step_history_run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .._models import StepEvent
from . import _statements as s
from ._parts import Context, Part
from ._rows import to_text

__all__ = ["StepLog"]

RUN_STEP_HISTORY = """
            SELECT seq, step, attempt, event, node, at FROM {step_history}
            WHERE run_id = ? ORDER BY seq"""
"""A run's recorded transitions, oldest first."""


class StepEventRow(NamedTuple):
    """One row of ``RUN_STEP_HISTORY``."""

    seq: int
    step: str
    attempt: int
    event: str
    node: str | None
    at: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StepEventRow:
        """Convert a ``RUN_STEP_HISTORY`` row."""
        seq, step, attempt, event, node, at = row
        node = None if node is None else to_text(node)
        return cls(int(seq), to_text(step), int(attempt), to_text(event), node, int(at))

    def record(self) -> StepEvent:
        """The transition as the facet returns it."""
        return StepEvent(self.seq, self.step, self.attempt, self.event, self.node, self.at)


class StepLog(Part):
    """``step_history``; its statement is an attribute, rendered for the store's namespace."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.run_step_history = s.render(RUN_STEP_HISTORY, context.tables.template())

    def step_history(self, run_id: str) -> list[StepEvent]:
        """The recorded transitions of ``run_id``, oldest first."""
        rows = self._tx.fetch(self.run_step_history, (run_id,))
        return [StepEventRow.from_row(row).record() for row in rows]
