"""The ``RunTiming`` facet in SQL: reschedule and force a run, and when work falls due.

Rescheduling and forcing are transitions of a run, so each locks the run row
first (``LOCK_RUN``) and then writes its steps by id, one transaction, one lock
order, as every transition of a run does. A claim does not lock the run: it
leases a ready step by its own row. So a reschedule reads the run's steps,
then moves the ready and scheduled ones by id, each update still requiring the
step unattempted and ready or scheduled; a claim that took one of them first
(committed, or waited for: READ COMMITTED re-reads the row) leaves the update
short of its count, and the whole reschedule is rolled back and reported
False. A claim that comes after the update finds the step locked (skipped) or
moved. No run is ever half moved.

``next_due`` reads three indexed ranges, each stopped at its first row: the
queues' ranges of the ready index (is anything claimable now?), the due index
(delayed starts, retries, sleeps, wait deadlines) and the running index
(leases), each in its order. It never reads the finished history.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from .._errors import RunNotFound
from .._models import StepStatus
from ..store import ACTIVE
from ._dialect import Cursor, Statement
from ._parts import Context, Part
from ._queries import marks
from ._rows import LockedRun, to_text
from ._statements import UNFINISHED, render
from ._transactions import Rollback

__all__ = ["Timing", "TimingQueries"]

# The steps of a locked run, with what says whether it has started (by run_id: the
# (run_id, name) key). A plain read: the updates below are fenced by their own conditions.
RUN_STEPS = "SELECT id, status, attempt FROM {steps} WHERE run_id = ?"

# Ready now (due_at now, status 'ready') or later ('scheduled'), by id; only while the step
# is still unattempted and ready or scheduled: a step a claim took is left alone, and the
# short row count rolls the reschedule back.
MOVE_START = """
            UPDATE {steps} SET status = ?, due_at = ?
            WHERE id IN ({ids}) AND status IN ('ready', 'scheduled') AND attempt = 0"""

RUN_AT = "UPDATE {runs} SET run_at = ? WHERE id = ?"

# A forced run's scheduled steps become ready now (a delayed start, a retry's backoff).
FORCE_READY = """
            UPDATE {steps} SET status = 'ready', due_at = ?
            WHERE id IN ({ids}) AND status = 'scheduled'"""

# Every step of the run that can still run passes the pauses from now on: the unfinished
# ones, and the skipped (a compensation is stored skipped until its run fails, then started).
# The layer keeps a run's force as this flag on each of its steps.
FORCE_THROUGH_PAUSES = """
            UPDATE {steps} SET forced = 1
            WHERE id IN ({ids}) AND forced = 0 AND status IN ({unfinished}, 'skipped')"""

# Anything claimable now on these queues: the claim's predicate, for every queue at once,
# stopped at the first row of the ready index. The pauses are counted by primary-key probes
# (a scalar subquery per row visited): as NOT EXISTS, outside the claim's settings, Postgres
# hashes every pause into an anti join (a scan of the pauses) for a LIMIT 1.
DUE_READY = """
            SELECT 1 FROM {steps} s
            WHERE status = 'ready' AND queue IN ({queues}) AND workflow IN ({workflows})
                AND (
                    s.forced = 1
                    OR (SELECT count(*) FROM {pauses} q WHERE q.kind = 'queue' AND q.name = s.queue)
                    + (
                        SELECT count(*) FROM {pauses} p
                        WHERE p.kind = 'workflow' AND p.name = s.workflow
                    ) = 0
                )
            LIMIT 1"""

# The due index in order (the DUE statement's range), stopped at the first of the workflows:
# a sleep's end or a wait's deadline (the housekeeping of any client of the workflow), or a
# scheduled step's start on one of the queues (what the client would then claim).
NEXT_TIMED = """
            SELECT due_at FROM {steps}
            WHERE status IN ('scheduled', 'sleeping', 'waiting') AND due_at IS NOT NULL
                AND workflow IN ({workflows})
                AND (status <> 'scheduled' OR queue IN ({queues}))
            ORDER BY due_at
            LIMIT 1"""

# The running index in order (the reclaimer's range), stopped at the first of the workflows.
NEXT_EXPIRY = """
            SELECT lease_until FROM {steps}
            WHERE status = 'running' AND workflow IN ({workflows})
            ORDER BY lease_until
            LIMIT 1"""


class TimingQueries:
    """The statements of :class:`Timing`, rendered once for a store's namespace and dialect."""

    def __init__(self, context: Context) -> None:
        values = {**context.tables.template(), "for_update": context.dialect.for_update}
        self.run_steps = render(RUN_STEPS, values)
        self._move_start = render(MOVE_START, values)
        self.run_at = render(RUN_AT, values)
        self._force_ready = render(FORCE_READY, values)
        self._force_pass = render(FORCE_THROUGH_PAUSES, values)
        self._due_ready = render(DUE_READY, values)
        self._next_timed = render(NEXT_TIMED, values)
        self._next_expiry = render(NEXT_EXPIRY, values)

    def move_start(self, status: str, due_at: int, step_ids: Sequence[str]) -> Statement:
        """Move the ready or scheduled, unattempted steps ``step_ids`` to ``due_at``."""
        return self._move_start.format(ids=marks(len(step_ids))), (status, due_at, *step_ids)

    def force_ready(self, now: int, step_ids: Sequence[str]) -> Statement:
        """Make the scheduled steps of ``step_ids`` ready at ``now``."""
        return self._force_ready.format(ids=marks(len(step_ids))), (now, *step_ids)

    def force_pass(self, step_ids: Sequence[str]) -> Statement:
        """Let the unfinished and skipped steps of ``step_ids`` pass every pause."""
        return self._force_pass.format(ids=marks(len(step_ids))), tuple(step_ids)

    def due_ready(self, workflows: Sequence[str], queues: Sequence[str]) -> Statement:
        """One row if a step of ``workflows`` on ``queues`` is claimable now."""
        sql = self._due_ready.format(queues=marks(len(queues)), workflows=marks(len(workflows)))
        return sql, (*queues, *workflows)

    def next_timed(self, workflows: Sequence[str], queues: Sequence[str]) -> Statement:
        """The earliest end of a sleep or wait of ``workflows``, or start of a scheduled step
        of theirs on ``queues``."""
        sql = self._next_timed.format(workflows=marks(len(workflows)), queues=marks(len(queues)))
        return sql, (*workflows, *queues)

    def next_expiry(self, workflows: Sequence[str]) -> Statement:
        """The earliest lease end of a running step of ``workflows``."""
        return self._next_expiry.format(workflows=marks(len(workflows))), tuple(workflows)


class _Started(Rollback):
    """A claim took a step of the run between the read and the move: roll back, report False."""


# A compensation is skipped until its run fails (Cap.COMPENSATION): not started either.
_NOT_STARTED = {
    StepStatus.BLOCKED.value,
    StepStatus.READY.value,
    StepStatus.SCHEDULED.value,
    StepStatus.SKIPPED.value,
}
_STARTS = {StepStatus.READY.value, StepStatus.SCHEDULED.value}
"""The steps a reschedule moves: those due at the run's start (not blocked, nor skipped)."""
_MAY_RUN = frozenset((*UNFINISHED, StepStatus.SKIPPED.value))
"""The steps a forced run lets pass the pauses: any that may still run (the unfinished, and
a compensation, skipped until its run fails): ``FORCE_THROUGH_PAUSES``'s statuses."""


class Timing(Part):
    """``reschedule_run``, ``force_run``, ``next_due``."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.queries = TimingQueries(context)

    def _steps(self, cur: Cursor, run_id: str) -> list[tuple[str, str, int]] | None:
        """Lock the run; its steps' (id, status, attempt); None when it finished."""
        row = self._execute(cur, self._q.lock_run, (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        if LockedRun.from_row(row).state != ACTIVE:
            return None
        rows = self._execute(cur, self.queries.run_steps, (run_id,)).fetchall()
        return [(to_text(i), to_text(status), int(attempt)) for i, status, attempt in rows]

    def reschedule_run(self, run_id: str, at: int, now: int) -> bool:
        """Move a run that has not started to ``at``; False if it started or finished."""
        q = self.queries
        start = max(at, now)
        status = StepStatus.SCHEDULED.value if start > now else StepStatus.READY.value

        def work(cur: Cursor) -> bool:
            steps = self._steps(cur, run_id)
            if steps is None or any(a > 0 or s not in _NOT_STARTED for _, s, a in steps):
                return False
            movable = [i for i, s, _ in steps if s in _STARTS]
            if movable:
                moved = self._execute(cur, *q.move_start(status, start, movable)).rowcount
                if moved != len(movable):
                    raise _Started
            self._execute(cur, q.run_at, (start, run_id))
            return True

        try:
            return self._tx.run(work)
        except _Started:
            return False

    def force_run(self, run_id: str, now: int) -> bool:
        """Ready the run's scheduled steps now and let it pass pauses; False if nothing changed."""
        q = self.queries

        def work(cur: Cursor) -> bool:
            steps = self._steps(cur, run_id)
            if steps is None:
                return False
            scheduled = [i for i, s, _ in steps if s == StepStatus.SCHEDULED.value]
            may_run = [i for i, s, _ in steps if s in _MAY_RUN]
            changed = 0
            if scheduled:
                changed += self._execute(cur, *q.force_ready(now, scheduled)).rowcount
            if may_run:
                changed += self._execute(cur, *q.force_pass(may_run)).rowcount
            return changed > 0

        return self._tx.run(work)

    def next_due(
        self, *, workflows: Collection[str], queues: Collection[str], now: int
    ) -> int | None:
        """Now if something is claimable, else the earliest due time or lease end, or None."""
        names, served = sorted(workflows), sorted(queues)
        if not names:
            return None
        q = self.queries

        def work(cur: Cursor) -> int | None:
            if served and self._execute(cur, *q.due_ready(names, served)).fetchone() is not None:
                return now
            times: list[Any] = []
            # No queue: no scheduled step counts ("" names no queue; an IN list is never empty).
            row = self._execute(cur, *q.next_timed(names, served or [""])).fetchone()
            if row is not None:
                times.append(int(row[0]))
            row = self._execute(cur, *q.next_expiry(names)).fetchone()
            if row is not None and row[0] is not None:
                times.append(int(row[0]) + 1)
            return max(min(times), now) if times else None

        return self._tx.read(work)
