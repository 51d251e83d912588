"""The ``RunAdmin`` facet in SQL: retrying, deleting and cancelling runs that exist.

None of it is on the engine's hot path; all of it takes the run rows' locks
first, then writes steps, as every transition does (:mod:`._outcomes`), so it
serialises with the outcomes of the runs it touches and deadlocks with none.
A retry (``reopen_run``) clears the lease token of every step it makes ready
again, so the late outcome of an attempt of the run before the retry matches
no lease and is refused (lost). A cancel that ends a running attempt's lease releases
its concurrency key in its own transaction (:mod:`._keys`). ``cancel_runs`` and
``delete_runs`` get a page
of run ids from the client, which pages through ``list_runs`` with the
operator's filter: a filter is built in one place (``list_runs``), and no
transaction locks more than a page of runs (:data:`CHUNK`), never a table.

Rows are deleted by primary key, read first by their run (``steps`` by the
``(run_id, name)`` index, ``signals`` by ``(run_id, name, seq)``), never by a
secondary range: on InnoDB a DELETE over a secondary range takes gap locks that
deadlock with the inserts of enqueues. The statements are here rather than in
:mod:`._statements` because nothing else runs them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from .._errors import DuplicateRun, RunNotFound, StepNotFound
from .._models import StepStatus
from ..store._records import ACTIVE, RETRYABLE, Reopened, cancelled_step_error
from ._dialect import Cursor
from ._keys import Keys
from ._parts import CHUNK, Context, Part, chunks
from ._queries import marks
from ._rows import to_json, to_text
from ._statements import render
from ._transactions import UniqueViolation

__all__ = ["Admin"]

_LOCK_RUN = "SELECT state, workflow, idem_key, steps_left FROM {runs} WHERE id = ?{for_update}"
_LOCK_RUNS = "SELECT id, state FROM {runs} WHERE id IN ({ids}) ORDER BY id{for_update}"
_HOLDER = "SELECT id FROM {runs} WHERE workflow = ? AND active_key = ?"
_STEP_STATUS = "SELECT status FROM {steps} WHERE run_id = ? AND name = ?"
_RUN_STEPS = "SELECT id, name, status, children, kind, parents FROM {steps} WHERE run_id = ?"
# The run takes its key again: the unique (workflow, active_key) index refuses it while
# another unfinished run holds it (a race the read of _HOLDER lost). MySQL assigns the
# SET list left to right; no assignment here reads a column another one wrote.
_REOPEN_RUN = """
            UPDATE {runs}
            SET state = 'active', finished_at = NULL, error = NULL, active_key = idem_key,
                steps_left = ?
            WHERE id = ? AND state = ?"""
# What a retry keeps: succeeded steps, and those a wait's branch settled (skipped, timed out;
# Cap.WAIT_BRANCH); a compensation is skipped until its run fails (Cap.COMPENSATION).
_UNSUCCEEDED = """
            SELECT COUNT(*) FROM {steps}
            WHERE run_id = ? AND status NOT IN ('succeeded', 'skipped', 'timed_out')"""
# A run whose compensations ran is not retried: the steps they undid would be kept.
_COMPENSATED = """
            SELECT COUNT(*) FROM {steps}
            WHERE run_id = ? AND kind = 'compensation' AND status <> 'skipped'"""
# Every step that did not succeed: no lease (a late outcome is lost), a fresh retry budget,
# ready now when its parents all succeeded, blocked otherwise (two statements: a bound value
# inside a CASE has no type for a driver that sends values untyped, as pg8000 does). Outputs
# of a sleep cut short, progress and the awaited signal are forgotten; the last error stays.
_RESET = """
                lease_token = NULL, lease_until = NULL, finished_at = NULL, heartbeat_at = NULL,
                failures = 0, reclaims = 0, output = NULL, progress = NULL, signal_name = NULL
            WHERE run_id = ? AND status IN ('failed', 'cancelled')"""
_REOPEN_READY = (
    """
            UPDATE {steps} SET status = 'ready', due_at = ?,"""
    + _RESET
    + " AND parents_left = 0"
)
_REOPEN_BLOCKED = (
    """
            UPDATE {steps} SET status = 'blocked', due_at = NULL,"""
    + _RESET
    + " AND parents_left > 0"
)
_CANCEL_RUNS = """
            UPDATE {runs} SET state = 'cancelled', finished_at = ?, active_key = NULL,
                fifo_key = NULL
            WHERE id IN ({ids}) AND state = 'active'"""
_UNFINISHED_OF = "SELECT id FROM {steps} WHERE run_id IN ({ids}) AND status IN ({unfinished})"
_CANCEL_STEPS = """
            UPDATE {steps} SET status = 'cancelled', finished_at = ?, due_at = NULL
            WHERE id IN ({ids})"""
_STEP_CANCELLED = "UPDATE {runs} SET steps_left = steps_left - ?, error = ? WHERE id = ?"
_END_CANCELLED = """
            UPDATE {runs} SET state = 'cancelled', finished_at = ?, active_key = NULL,
                fifo_key = NULL
            WHERE id = ? AND state = 'active'"""
_STEPS_OF_RUNS = "SELECT id FROM {steps} WHERE run_id IN ({ids})"
_SIGNALS_OF_RUNS = "SELECT seq FROM {signals} WHERE run_id IN ({ids})"
_DELETE_STEPS = "DELETE FROM {steps} WHERE id IN ({ids})"
_DELETE_SIGNALS = "DELETE FROM {signals} WHERE seq IN ({ids})"
_DROP_SIGNALS = "DELETE FROM {signals} WHERE run_id IN ({ids})"
_DELETE_RUNS = "DELETE FROM {runs} WHERE id IN ({ids}) AND state <> 'active'"
# Tables keyed by the run first (their primary key led by it): a range of the primary key
# per run, never of a secondary index. A run's journal is its memos (scope = the run's id).
_DELETE_RUN_ROWS = (
    "DELETE FROM {errors} WHERE run_id IN ({ids})",
    "DELETE FROM {step_history} WHERE run_id IN ({ids})",
    "DELETE FROM {run_labels} WHERE run_id IN ({ids})",
    "DELETE FROM {journal} WHERE scope IN ({ids})",
)


class _LockedRun(NamedTuple):
    """A run locked by an operator's act: its state, key and steps left."""

    state: str
    workflow: str
    key: str | None
    steps_left: int


class _StepStatus(NamedTuple):
    """The status of the step a retry names."""

    status: Any


class _RunStep(NamedTuple):
    """A step of a run whose step an operator cancels."""

    id: str
    name: str
    status: str
    children: tuple[str, ...]
    kind: str
    parents: tuple[str, ...]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> _RunStep:
        """Convert a ``_RUN_STEPS`` row."""
        step_id, name, status, children, kind, parents = row
        return cls(
            to_text(step_id),
            to_text(name),
            to_text(status),
            tuple(to_json(children)),
            to_text(kind),
            tuple(to_json(parents)),
        )


class Admin(Part):
    """``reopen_run``, ``delete_runs``, ``cancel_runs``, ``cancel_step``."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._keys = Keys(context)
        values = {
            **context.tables.template(),
            "for_update": context.dialect.for_update,
        }
        self._run_rows = tuple(render(template, values) for template in _DELETE_RUN_ROWS)
        self._sql = {
            name: render(template, values)
            for name, template in globals().items()
            if name.startswith("_") and name.isupper() and isinstance(template, str)
        }

    def _run(self, cur: Cursor, name: str, *params: Any) -> Any:
        return self._execute(cur, self._sql[name], params)

    def _listed(self, cur: Cursor, name: str, ids: Sequence[Any], *before: Any) -> Any:
        sql = self._sql[name].replace("{ids}", marks(len(ids)))
        return self._execute(cur, sql, (*before, *ids))

    def _running_keys(self, cur: Cursor, step_ids: Sequence[str]) -> Counter[str]:
        """Lock ``step_ids`` (after their runs) and count the keys of those running.

        A cancel that moves a running step to ``cancelled`` ends its lease: its
        concurrency key is released in the same transaction, once (:mod:`._keys`);
        the attempt's late outcome is then refused, so it releases nothing again.
        """
        released: Counter[str] = Counter()
        for part in chunks(step_ids):
            for _id, status, key in self._execute(cur, *self._q.lock_steps(part)).fetchall():
                if key is not None and to_text(status) == "running":
                    released[to_text(key)] += 1
        return released

    def _lock(self, cur: Cursor, run_id: str) -> _LockedRun:
        row = self._run(cur, "_LOCK_RUN", run_id).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        state, workflow, key, steps_left = row
        key_text = None if key is None else to_text(key)
        return _LockedRun(to_text(state), to_text(workflow), key_text, int(steps_left))

    # -- retrying ------------------------------------------------------------------------
    def reopen_run(self, run_id: str, step: str | None, now: int) -> Reopened:
        """Make a failed, cancelled or discarded run active again (run row locked)."""
        held: list[tuple[str, str]] = []

        def work(cur: Cursor) -> Reopened:
            locked = self._lock(cur, run_id)
            if step is not None:
                row = self._run(cur, "_STEP_STATUS", run_id, step).fetchone()
                if row is None:
                    raise StepNotFound(run_id, step)
                found = _StepStatus(*row)
            if locked.state == ACTIVE:
                return Reopened.UNFINISHED
            if locked.state not in RETRYABLE:
                return Reopened.NOT_RETRYABLE
            if step is not None and to_text(found.status) != "failed":
                return Reopened.STEP_NOT_FAILED
            ((compensated,),) = self._run(cur, "_COMPENSATED", run_id).fetchall()
            if int(compensated):
                return Reopened.NOT_RETRYABLE
            if locked.key is not None:
                held[:] = [(locked.workflow, locked.key)]
                holder = self._run(cur, "_HOLDER", locked.workflow, locked.key).fetchone()
                if holder is not None:
                    (holder_id,) = holder
                    raise DuplicateRun(locked.workflow, locked.key, to_text(holder_id))
            ((left,),) = self._run(cur, "_UNSUCCEEDED", run_id).fetchall()
            self._run(cur, "_REOPEN_RUN", int(left), run_id, locked.state)
            self._run(cur, "_REOPEN_BLOCKED", run_id)
            self._run(cur, "_REOPEN_READY", now, run_id)
            return Reopened.REOPENED

        try:
            return self._tx.run(work)
        except UniqueViolation:
            # Another run took the key between the read and the write: nothing was written.
            workflow, key = held[0]
            rows = self._tx.fetch(self._sql["_HOLDER"], (workflow, key))
            raise DuplicateRun(workflow, key, to_text(rows[0][0]) if rows else None) from None

    # -- cancelling ----------------------------------------------------------------------
    def cancel_runs(self, run_ids: Collection[str], now: int) -> list[str]:
        """Cancel the unfinished runs among ``run_ids``, a page per transaction."""
        cancelled: list[str] = []
        for chunk in chunks(sorted(set(run_ids)), CHUNK):

            def work(cur: Cursor, chunk: Sequence[str] = chunk) -> list[str]:
                rows = self._listed(cur, "_LOCK_RUNS", chunk).fetchall()
                active = [to_text(run_id) for run_id, state in rows if to_text(state) == ACTIVE]
                if not active:
                    return []
                self._listed(cur, "_CANCEL_RUNS", active, now)
                rows = self._listed(cur, "_UNFINISHED_OF", active).fetchall()
                steps = [to_text(step_id) for (step_id,) in rows]
                released = self._running_keys(cur, steps)
                for part in chunks(steps):
                    self._listed(cur, "_CANCEL_STEPS", part, now)
                self._listed(cur, "_DROP_SIGNALS", active)
                self._keys.release(cur, released)  # key rows: the last locks taken
                return active

            cancelled.extend(self._tx.run(work))
        return cancelled

    def cancel_step(self, run_id: str, step: str, now: int) -> bool:
        """Cancel one unfinished step and its descendants (run row locked)."""

        def work(cur: Cursor) -> bool:
            locked = self._lock(cur, run_id)
            rows = self._run(cur, "_RUN_STEPS", run_id).fetchall()
            steps = {row.name: row for row in map(_RunStep.from_row, rows)}
            # A wait's branch depends on it too (Cap.WAIT_BRANCH), though it is not its child.
            branches = {row.parents[0]: row.name for row in steps.values() if row.kind == "branch"}
            target = steps.get(step)
            if target is None:
                raise StepNotFound(run_id, step)
            if locked.state != ACTIVE or target.status in _FINISHED:
                return False
            if target.kind == "compensation":
                return False  # a compensating run is undone whole or cancelled whole
            doomed = [target]
            seen = {target.name}
            for current in doomed:  # grows as it goes: every unfinished descendant, once
                branch = branches.get(current.name)
                for name in (*current.children, *((branch,) if branch else ())):
                    child = steps[name]
                    if name not in seen and child.status not in _FINISHED:
                        seen.add(name)
                        doomed.append(child)
            # Running attempts keep their lease token: their renewal reports them cancelled.
            released = self._running_keys(cur, [gone.id for gone in doomed])
            for part in chunks([gone.id for gone in doomed]):
                self._listed(cur, "_CANCEL_STEPS", part, now)
            error = cancelled_step_error(step).to_json()
            self._run(cur, "_STEP_CANCELLED", len(doomed), error, run_id)
            if locked.steps_left - len(doomed) <= 0:
                self._run(cur, "_END_CANCELLED", now, run_id)
                self._listed(cur, "_DROP_SIGNALS", [run_id])
            self._keys.release(cur, released)  # key rows: the last locks taken
            return True

        return self._tx.run(work)

    # -- deleting ------------------------------------------------------------------------
    def delete_runs(self, run_ids: Collection[str]) -> list[str]:
        """Delete the finished runs among ``run_ids`` and all their rows, a page at a time."""
        deleted: list[str] = []
        for chunk in chunks(sorted(set(run_ids)), CHUNK):

            def work(cur: Cursor, chunk: Sequence[str] = chunk) -> list[str]:
                return self.delete_finished(cur, chunk, before=None)

            deleted.extend(self._tx.run(work))
        return deleted

    def delete_finished(
        self, cur: Cursor, run_ids: Sequence[str], *, before: Callable[[Sequence[str]], None] | None
    ) -> list[str]:
        """Lock ``run_ids`` (at most :data:`CHUNK`) and delete the finished ones, every row.

        In the caller's transaction; ``before`` is called with the ids about to
        go, their rows locked and still there (retention archives them then).
        """
        rows = self._listed(cur, "_LOCK_RUNS", run_ids).fetchall()
        done = [to_text(run_id) for run_id, state in rows if to_text(state) != ACTIVE]
        if not done:
            return []
        if before is not None:
            before(done)
        for select, delete in (
            ("_STEPS_OF_RUNS", "_DELETE_STEPS"),
            ("_SIGNALS_OF_RUNS", "_DELETE_SIGNALS"),
        ):
            keys = [key for (key,) in self._listed(cur, select, done).fetchall()]
            for part in chunks(keys):
                self._listed(cur, delete, part)
        for template in self._run_rows:
            self._execute(cur, template.replace("{ids}", marks(len(done))), tuple(done))
        self._listed(cur, "_DELETE_RUNS", done)
        return done


_FINISHED = frozenset(status.value for status in StepStatus if status.finished)
"""Step statuses that no longer change (the step vocabulary's final ones)."""
