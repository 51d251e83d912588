"""Reading runs for people and tools: ``get_run``, ``list_runs``, and the server's clock.

None of this is on the engine's hot path, and none of it locks: a run and its
steps are read in one transaction so they agree with each other. Runs are
listed newest first by their insertion sequence (``seq``), which the opaque
page cursor holds: a run created between two pages has a higher ``seq`` and
never shifts the pages after the cursor. Every condition of the filter is in
the SQL (:func:`~cairnflow.sql._filters.run_filter`), labels through the label
index, so a page is one statement however little the filter matches (and a
label first counts its rows, bounded, to choose where that statement
starts: :data:`RARE_LABEL`).
"""

from __future__ import annotations

from collections import Counter

from .._errors import CairnError
from .._models import StepStatus
from ..store import RunPage, RunQuery, StoredRun, cursor_position, run_cursor
from ._dialect import Cursor
from ._parts import Part, chunks
from ._rows import RunRow, StepRow, to_text

__all__ = ["RARE_LABEL", "Reads"]

RARE_LABEL = 2000
"""A label (the prefix, else the first exact label) with at most this many label rows is
listed from the label index: its rows give the runs (each read by id), sorted newest first.
A commoner one is listed from
the runs newest first, each probed in the label index's primary key, which stops once a page
is full. The first is bound by the prefix's rows, the second by how far the page's runs lie
back, and a filter that matches little makes that far: on SQLite with 1,000,000 runs, a
prefix of 1,000 rows took 1,088 ms walking the runs and under 30 ms from the labels, and
one of every run 0.3 ms walking the runs (2026-12-01); an exact label of 100 failed runs
took 1,040 ms walking (bench W7). Deciding costs a count of at most
this many entries of the value index (an index-only read)."""


class Reads(Part):
    """``get_run``, ``list_runs``, ``database_now``."""

    def get_run(self, run_id: str) -> StoredRun | None:
        """The run and its steps, read in one transaction."""
        q = self._q

        def work(cur: Cursor) -> StoredRun | None:
            row = self._execute(cur, q.get_run, (run_id,)).fetchone()
            if row is None:
                return None
            steps = self._execute(cur, q.get_steps, (run_id,)).fetchall()
            return RunRow.from_row(row).stored(tuple(StepRow.from_row(s).stored() for s in steps))

        return self._tx.read(work)

    def list_runs(self, query: RunQuery) -> RunPage:
        """One statement for the page (every condition in SQL), one for its step counts, and
        one for the total when asked; read in one transaction, so they agree."""
        q = self._q
        before = cursor_position(query.cursor) if query.cursor is not None else None

        def work(cur: Cursor) -> RunPage:
            by_label = False
            within = q.labels_within(query, RARE_LABEL + 1)
            if within is not None:
                ((found,),) = self._execute(cur, *within).fetchall()
                by_label = int(found) <= RARE_LABEL
            sql, params = q.list_runs(
                query, before_seq=before, limit=query.limit + 1, by_label=by_label
            )
            matched = [RunRow.from_row(row) for row in self._execute(cur, sql, params).fetchall()]
            page = matched[: query.limit]
            counts: dict[str, Counter[StepStatus]] = {run.id: Counter() for run in page}
            for chunk in chunks(list(counts)):
                for run_id, status, count in self._execute(cur, *q.step_counts(chunk)).fetchall():
                    counts[to_text(run_id)][StepStatus(to_text(status))] += int(count)
            total = None
            if query.count:
                sql, params = q.count_runs(query, by_label=by_label)
                ((total,),) = self._execute(cur, sql, params).fetchall()
            runs = tuple(run.summary(counts[run.id]) for run in page)
            more = len(matched) > query.limit and page
            cursor = run_cursor(page[-1].seq) if more else None
            return RunPage(runs, cursor, None if total is None else int(total))

        return self._tx.read(work)

    def database_now(self) -> int:
        """The server's time in Unix nanoseconds (``Cap.DATABASE_CLOCK``)."""
        if self._dialect.now_sql is None:
            raise CairnError(f"the {self._dialect.name} dialect cannot read the server's clock")
        ((now,),) = self._tx.fetch(self._dialect.now_sql)
        return int(now)
