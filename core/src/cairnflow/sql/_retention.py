"""The ``Retention`` facet in SQL (``Cap.RETENTION``, ``Cap.ARCHIVE``): old runs leave.

One chunk is one short transaction, so pruning never holds what a claim needs
for long: it locks the prune lock's row and checks that the caller's token
holds it unexpired (a pruner that lost its lock writes nothing), reads at most
``limit`` ids of runs finished before the cut from the ``runs_finished`` index
(oldest finish first; the claim's indexes hold no finished run, so a claim
never waits behind this read), then deletes them as ``delete_runs`` does
(:meth:`~cairnflow.sql._admin.Admin.delete_finished`: the runs locked by id,
then every row of theirs by primary key, never by a secondary range, which on
InnoDB would take gap locks that deadlock with enqueues). Archiving copies
each run and its steps to the cold tables with ``INSERT ... SELECT`` between
the lock and the deletes, in that same transaction: a run is in exactly one
place at every moment, and its payload and outputs never travel through the
client. Two cold tables (``runs_archive``, ``steps_archive``) rather than one
row of JSON per run: the copy is a server-side ``INSERT ... SELECT`` of the
same columns (bytes stay bytes, no base64), and the archive is read back with
the row readers of ``get_run``. No claim, outcome or reclaim names them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..store import ArchivePage, PruneChunk, archive_cursor, archive_position
from ._admin import Admin
from ._dialect import Cursor
from ._parts import CHUNK, Context, Part
from ._queries import RUN_COLUMNS, STEP_COLUMNS, marks
from ._rows import LockRow, RunRow, StepRow, to_text
from ._statements import render

__all__ = ["Retention"]

# The oldest finished runs: a range of the runs_finished index from its low end (unfinished
# runs, finished_at NULL, are outside "finished_at < ?"), stopped after the chunk.
PRUNABLE_RUNS = "SELECT id FROM {runs} WHERE finished_at < ? ORDER BY finished_at LIMIT ?"
ARCHIVE_RUNS = f"""
            INSERT INTO {{runs_archive}} ({RUN_COLUMNS})
            SELECT {RUN_COLUMNS} FROM {{runs}} WHERE id IN ({{ids}})"""
# archived_at is set by its own UPDATE (by primary key) rather than bound in the SELECT list:
# a bound value there has no type for a driver that sends values untyped (pg8000).
STAMP_ARCHIVED = "UPDATE {runs_archive} SET archived_at = ? WHERE id IN ({ids})"
ARCHIVE_STEPS = f"""
            INSERT INTO {{steps_archive}} (run_id, position, {STEP_COLUMNS})
            SELECT run_id, position, {STEP_COLUMNS} FROM {{steps}} WHERE run_id IN ({{ids}})"""
# Newest finish first, a range of the (finished_at, id) index read backwards; after a cursor
# the first condition bounds the range, the second drops the ties already shown.
ARCHIVED_FIRST = f"""
            SELECT {RUN_COLUMNS} FROM {{runs_archive}}
            ORDER BY finished_at DESC, id DESC LIMIT ?"""
ARCHIVED_AFTER = f"""
            SELECT {RUN_COLUMNS} FROM {{runs_archive}}
            WHERE finished_at <= ? AND (finished_at < ? OR id < ?)
            ORDER BY finished_at DESC, id DESC LIMIT ?"""
ARCHIVED_STEPS = f"""
            SELECT run_id, {STEP_COLUMNS} FROM {{steps_archive}}
            WHERE run_id IN ({{ids}}) ORDER BY run_id, position"""


class Retention(Part):
    """``prune_runs``, ``archived_runs``."""

    def __init__(self, context: Context, *, admin: Admin) -> None:
        super().__init__(context)
        self._admin = admin
        values = context.tables.template()
        self._prunable = render(PRUNABLE_RUNS, values)
        self._archive_runs = render(ARCHIVE_RUNS, values)
        self._stamp = render(STAMP_ARCHIVED, values)
        self._archive_steps = render(ARCHIVE_STEPS, values)
        self._first = render(ARCHIVED_FIRST, values)
        self._after = render(ARCHIVED_AFTER, values)
        self._steps = render(ARCHIVED_STEPS, values)

    def prune_runs(self, chunk: PruneChunk) -> list[str] | None:
        """One chunk in one transaction, fenced by the prune lock (see the module docstring)."""
        limit = min(chunk.limit, CHUNK)  # one IN list of run ids per statement

        def work(cur: Cursor) -> list[str] | None:
            row = self._execute(cur, self._q.lock_named, (chunk.lock,)).fetchone()
            held = None if row is None else LockRow.from_row(row)
            if held is None or held.token != chunk.token or held.expires_at <= chunk.lock_now:
                return None
            rows = self._execute(cur, self._prunable, (chunk.before, limit)).fetchall()
            ids = [to_text(run_id) for (run_id,) in rows]
            if not ids:
                return []

            def archive(done: Sequence[str]) -> None:
                listed = marks(len(done))
                for sql in (self._archive_runs, self._archive_steps):
                    self._execute(cur, sql.replace("{ids}", listed), tuple(done))
                self._execute(cur, self._stamp.replace("{ids}", listed), (chunk.now, *done))

            done = self._admin.delete_finished(
                cur, sorted(ids), before=archive if chunk.archive else None
            )
            gone = set(done)
            return [run_id for run_id in ids if run_id in gone]

        return self._tx.run(work)

    def archived_runs(self, *, limit: int, cursor: str | None = None) -> ArchivePage:
        """A page of archived runs and their steps, in one read transaction."""
        after = archive_position(cursor) if cursor is not None else None

        def work(cur: Cursor) -> ArchivePage:
            if after is None:
                rows = self._execute(cur, self._first, (limit + 1,)).fetchall()
            else:
                finished, run_id = after
                params = (finished, finished, run_id, limit + 1)
                rows = self._execute(cur, self._after, params).fetchall()
            runs = [RunRow.from_row(row) for row in rows]
            page = runs[:limit]
            steps: dict[str, list[StepRow]] = {run.id: [] for run in page}
            if page:
                ids = [run.id for run in page]
                sql = self._steps.replace("{ids}", marks(len(ids)))
                for row in self._execute(cur, sql, tuple(ids)).fetchall():
                    steps[to_text(row[0])].append(StepRow.from_row(row[1:]))
            last = page[-1] if page else None
            return ArchivePage(
                runs=tuple(
                    run.stored(tuple(step.stored() for step in steps[run.id])) for run in page
                ),
                cursor=(
                    archive_cursor(last.finished_at or 0, last.id)
                    if len(runs) > limit and last is not None
                    else None
                ),
            )

        return self._tx.read(work)
