"""The ``Schedules`` facet in SQL: schedules and their ticks as rows, each tick fired once.

One fire per tick across every node rests on two guards written in the one
transaction of :meth:`Schedules.fire_ticks`: the schedule's row, locked first
(``SELECT ... FOR UPDATE``; SQLite has one writer) and compared with the next
fire the caller planned from, and one tick row per (schedule, tick time), whose
primary key refuses a tick recorded already. Either refusal rolls the whole
call back and answers None: another node handled the tick. The fired runs are
written by the enqueue's own inserts on the same cursor, so a tick and its run
commit together or not at all.

Saving is an UPDATE, then an INSERT when no row matched: portable, and one
statement in the common case (every client that starts saves every schedule it
declares). Two nodes saving a new schedule at once both insert; the loser's
unique violation runs its save again, as the update it now is.

Pruning picks the keys of old ticks with a plain read and deletes them by
primary key: on InnoDB a DELETE over a range of a secondary index takes gap
locks, which deadlock with the tick inserts of a fire.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..store import NewRun, ScheduleRecord, TickOutcome, TickRecord
from ._dialect import Cursor
from ._enqueue import Enqueue
from ._parts import Context, Part, chunks
from ._rows import LockedSchedule, ScheduleRow, TickKey, TickRow
from ._transactions import Rollback, UniqueViolation

__all__ = ["Schedules"]


class Schedules(Part):
    """``save_schedule``, ``remove_schedule``, ``list_schedules``, ``due_schedules``,
    ``fire_ticks``, ``set_schedule_paused``, ``schedule_history``, ``prune_ticks``."""

    def __init__(self, context: Context, *, enqueue: Enqueue) -> None:
        super().__init__(context)
        self._enqueue = enqueue

    def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """Insert, or update keeping the next fire of an unchanged fingerprint; read it back."""
        q = self._q

        def work(cur: Cursor) -> ScheduleRecord:
            updated = self._execute(
                cur,
                q.update_schedule,
                (
                    record.fingerprint,
                    record.next_fire,
                    record.spec,
                    record.fingerprint,
                    record.updated_at,
                    record.id,
                ),
            ).rowcount
            if not updated:
                self._execute(
                    cur,
                    q.insert_schedule,
                    (
                        record.id,
                        record.workflow,
                        record.name,
                        record.spec,
                        record.fingerprint,
                        record.next_fire,
                        record.paused,
                        record.resumed_at,
                        record.last_fire,
                        record.last_run_id,
                        record.created_at,
                        record.updated_at,
                    ),
                )
            return ScheduleRow.from_row(
                self._execute(cur, q.get_schedule, (record.id,)).fetchone()
            ).record()

        try:
            return self._tx.run(work)
        except UniqueViolation:
            # Another node inserted it between this save's UPDATE and INSERT: now it updates.
            return self._tx.run(work)

    def remove_schedule(self, schedule_id: str) -> bool:
        """Delete the schedule's row (the lock a fire takes), then its ticks."""
        q = self._q

        def work(cur: Cursor) -> bool:
            removed = self._execute(cur, q.delete_schedule, (schedule_id,)).rowcount
            self._execute(cur, q.delete_ticks_of, (schedule_id,))
            return bool(removed)

        return self._tx.run(work)

    def list_schedules(self, workflows: Collection[str] | None = None) -> list[ScheduleRecord]:
        """Every schedule (of ``workflows``), by workflow and name."""
        if workflows is not None and not workflows:
            return []
        names = sorted(workflows) if workflows is not None else None
        rows = self._tx.fetch(*self._q.list_schedules(names))
        return [ScheduleRow.from_row(row).record() for row in rows]

    def due_schedules(
        self, *, now: int, workflows: Collection[str], limit: int
    ) -> list[ScheduleRecord]:
        """Schedules of ``workflows`` due at ``now``, earliest first."""
        if not workflows or limit < 1:
            return []
        rows = self._tx.fetch(*self._q.due_schedules(now, sorted(workflows), limit))
        return [ScheduleRow.from_row(row).record() for row in rows]

    def fire_ticks(
        self,
        schedule_id: str,
        *,
        expected_next: int | None,
        next_fire: int,
        ticks: Sequence[TickRecord],
        runs: Sequence[NewRun],
    ) -> list[str] | None:
        """Compare and swap the next fire, record the ticks, create the runs: one transaction.

        None, with nothing written, when the schedule is gone, its next fire moved
        on from ``expected_next``, or a tick of ``ticks`` is recorded already.
        """
        fired = sum(1 for tick in ticks if tick.outcome is TickOutcome.FIRED)
        if fired != len(runs):
            raise ValueError(f"{fired} fired tick(s) for {len(runs)} run(s): one run each")
        enqueue, q = self._enqueue, self._q
        rows = enqueue.prepare(runs)  # the run ids are made here, before the transaction
        run_ids = rows[0]
        run_of_tick = iter(run_ids)  # the fired ticks take the runs in order
        latest: tuple[int, str] | None = None  # the latest fired tick and its run
        tick_rows = []
        for tick in ticks:
            run_id = next(run_of_tick) if tick.outcome is TickOutcome.FIRED else None
            if run_id is not None and (latest is None or tick.at >= latest[0]):
                latest = (tick.at, run_id)
            # A TickReason is a StrEnum: str() gives its value (a driver might send its name).
            tick_rows.append(
                (
                    schedule_id,
                    tick.at,
                    str(tick.outcome),
                    str(tick.reason),
                    tick.node,
                    tick.recorded_at,
                    run_id,
                )
            )

        def work(cur: Cursor) -> list[str] | None:
            row = self._execute(cur, q.lock_schedule, (schedule_id,)).fetchone()
            if row is None:
                return None  # removed
            stored = LockedSchedule.from_row(row)
            if expected_next is not None and stored.next_fire != expected_next:
                return None  # planned from a next fire another node moved on
            try:
                self._tx.execute_many(cur, q.insert_tick, tick_rows)
            except Exception as error:
                if self._tx.classify(error).unique_violation:
                    raise Rollback from error  # a tick of the plan is recorded already
                raise
            if run_ids:
                enqueue.insert(cur, rows)
            last_fire, last_run = stored.last_fire, stored.last_run_id
            if latest is not None and (last_fire is None or latest[0] >= last_fire):
                last_fire, last_run = latest
            moved = stored.next_fire if expected_next is None else next_fire
            self._execute(cur, q.fired, (moved, last_fire, last_run, schedule_id))
            return run_ids

        try:
            return self._tx.run(work)
        except Rollback:
            return None
        except UniqueViolation:
            raise enqueue.duplicate(runs) from None

    def set_schedule_paused(self, schedule_id: str, paused: bool, now: int) -> bool:
        """Pause, or resume from ``now``; False if there is no such schedule."""
        resumed_at = None if paused else now
        params = (paused, resumed_at, now, schedule_id)
        return bool(self._tx.change(self._q.pause_schedule, params))

    def schedule_history(self, schedule_id: str, limit: int) -> list[TickRecord]:
        """The last ``limit`` recorded ticks, newest first."""
        if limit < 1:
            return []
        rows = self._tx.fetch(self._q.tick_history, (schedule_id, limit))
        return [TickRow.from_row(row).record() for row in rows]

    def prune_ticks(self, *, before: int, limit: int) -> int:
        """Delete up to ``limit`` ticks recorded before ``before``, each schedule's newest kept."""
        if limit < 1:
            return 0
        q = self._q

        def work(cur: Cursor) -> int:
            found = self._execute(cur, q.prunable_ticks, (before, limit)).fetchall()
            keys = [TickKey.from_row(row) for row in found]
            return sum(
                int(self._execute(cur, *q.delete_ticks(chunk)).rowcount) for chunk in chunks(keys)
            )

        return self._tx.run(work)
