"""Reading runs for people and tools: ``get_run``, ``list_runs``, and the server's clock.

None of this is on the engine's hot path, and none of it locks: a run and its
steps are read in one transaction so they agree with each other. Runs are
listed newest first by their insertion sequence (``seq``), which is also the
page cursor; label filters are matched in Python after the SQL read, over
pages of at least 200 rows, so a filter that matches little still ends.
"""

from __future__ import annotations

from collections import Counter

from .._errors import CairnError
from .._models import StepStatus
from ..store import RunPage, RunQuery, StoredRun
from ._dialect import Cursor
from ._parts import Part, chunks
from ._rows import RunRow, StepRow, to_text

__all__ = ["Reads"]


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
        """Newest first by insertion; labels are matched in Python after the SQL read."""
        try:
            before = int(query.cursor) if query.cursor else None
        except ValueError:
            raise CairnError(f"invalid run cursor {query.cursor!r}") from None
        q = self._q
        states = sorted(query.states) if query.states is not None else None
        fetch = query.limit + 1 if not query.labels else max(query.limit + 1, 200)
        matched: list[RunRow] = []
        while len(matched) <= query.limit:
            sql, params = q.list_runs(
                workflow=query.workflow, states=states, before_seq=before, limit=fetch
            )
            batch = self._tx.fetch(sql, params)
            for run in map(RunRow.from_row, batch):
                before = run.seq
                if all(run.labels.get(k) == v for k, v in query.labels.items()):
                    matched.append(run)
                    if len(matched) > query.limit:
                        break
            if len(batch) < fetch:
                break
        page = matched[: query.limit]
        counts: dict[str, Counter[StepStatus]] = {run.id: Counter() for run in page}
        for chunk in chunks(list(counts)):
            for run_id, status, count in self._tx.fetch(*q.step_counts(chunk)):
                counts[to_text(run_id)][StepStatus(to_text(status))] += int(count)
        runs = tuple(run.summary(counts[run.id]) for run in page)
        cursor = str(page[-1].seq) if len(matched) > query.limit and page else None
        return RunPage(runs, cursor)

    def database_now(self) -> int:
        """The server's time in Unix nanoseconds (``Cap.DATABASE_CLOCK``)."""
        if self._dialect.now_sql is None:
            raise CairnError(f"the {self._dialect.name} dialect cannot read the server's clock")
        ((now,),) = self._tx.fetch(self._dialect.now_sql)
        return int(now)
