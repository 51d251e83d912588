"""The ``ErrorHistory`` facet in SQL: a run's recent errors, one row per failed attempt.

A failure is recorded by :class:`~cairnflow.sql._outcomes.Outcomes` inside the
transaction that writes it, the run row already locked: the row takes the
run's next number (``MAX(seq) + 1``, read under that lock, so two failures of
one run on two clients never take one number), and the same transaction drops
the run's rows older than its newest ``keep_errors``. A run therefore holds at
most that many rows, whoever wrote them, and nothing trims them later.

Every statement reads one run's range of the primary key ``(run_id, seq)``.
The cost falls on failures only (three statements each; none on a success
or a claim).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .._models import RunError
from ..store import Failed
from . import _statements as s
from ._dialect import Cursor
from ._parts import Context, Part
from ._rows import to_error, to_text

__all__ = ["ErrorLog"]

LAST_ERROR = "SELECT MAX(seq) FROM {errors} WHERE run_id = ?"
"""The number of a run's newest recorded error (NULL: none)."""

INSERT_ERROR = """
            INSERT INTO {errors} (run_id, seq, step, attempt, node, at, error)
            VALUES (?, ?, ?, ?, ?, ?, ?)"""
"""One failed attempt."""

TRIM_ERRORS = "DELETE FROM {errors} WHERE run_id = ? AND seq <= ?"
"""Drop a run's errors older than the newest N (one, once the run holds N)."""

RUN_ERRORS = """
            SELECT seq, step, attempt, node, at, error FROM {errors}
            WHERE run_id = ? ORDER BY seq DESC"""
"""A run's recorded errors, newest first."""


class ErrorRow(NamedTuple):
    """One row of ``RUN_ERRORS``."""

    seq: int
    step: str
    attempt: int
    node: str | None
    at: int
    error: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ErrorRow:
        """Convert a ``RUN_ERRORS`` row."""
        seq, step, attempt, node, at, error = row
        node = None if node is None else to_text(node)
        return cls(int(seq), to_text(step), int(attempt), node, int(at), to_text(error))

    def record(self) -> RunError:
        """The error as the facet returns it."""
        info = to_error(self.error)
        assert info is not None  # the column is NOT NULL
        return RunError(self.seq, self.step, self.attempt, self.node, self.at, info)


class ErrorLog(Part):
    """``run_errors``, and the recording of a failure inside its transaction.

    Its statements are attributes, rendered for the store's namespace (the
    drivers' plan tests read them)."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        values = context.tables.template()
        self.last_error = s.render(LAST_ERROR, values)
        self.insert_error = s.render(INSERT_ERROR, values)
        self.trim_errors = s.render(TRIM_ERRORS, values)
        self.run_errors_of = s.render(RUN_ERRORS, values)

    def record(self, cur: Cursor, run_id: str, outcome: Failed, error: str, now: int) -> None:
        """Record ``outcome`` (its error as JSON ``error``) for ``run_id`` (run row locked)."""
        keep = outcome.keep_errors
        if keep <= 0:
            return
        (last,) = self._execute(cur, self.last_error, (run_id,)).fetchone()
        seq = (0 if last is None else int(last)) + 1
        info = outcome.error
        row = (run_id, seq, info.step or "", info.attempt or 0, outcome.node, now, error)
        self._execute(cur, self.insert_error, row)
        if seq > keep:
            self._execute(cur, self.trim_errors, (run_id, seq - keep))

    def run_errors(self, run_id: str) -> list[RunError]:
        """The recorded errors of ``run_id``, newest first."""
        rows = self._tx.fetch(self.run_errors_of, (run_id,))
        return [ErrorRow.from_row(row).record() for row in rows]
