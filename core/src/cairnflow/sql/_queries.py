"""Every statement of the SQL store, rendered for one namespace and dialect.

The SQL itself lives in :mod:`._statements`, one named template per
statement; :class:`Queries` renders each once, when the store is built, and
its methods fill the per-call parts: lists (``IN (...)``) get one placeholder
per item, and values are always bound, never formatted in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..store import RunQuery
from . import _statements as s
from ._dialect import BatchInsert, ClaimPlan, Dialect, Statement
from ._filters import driving_label, run_filter
from ._statements import RUN_COLUMNS, STEP_COLUMNS, UNFINISHED
from ._tables import TABLES, Tables

__all__ = ["RUN_COLUMNS", "STEP_COLUMNS", "UNFINISHED", "Queries", "marks", "pairs"]


def marks(count: int) -> str:
    """``?, ?, ?`` for ``count`` values (at least one)."""
    return ", ".join(["?"] * max(count, 1))


def pairs(count: int, first: str, second: str) -> str:
    """``((<first> = ? AND <second> = ?) OR ...)`` for ``count`` pairs of values.

    Spelled out rather than as a row-value ``(first, second) IN ((?, ?), ...)``:
    SQLite and MariaDB plan a row-value IN as a scan of the table, while each
    term led by a key column is an index lookup on every engine.
    """
    return "(" + " OR ".join([f"({first} = ? AND {second} = ?)"] * max(count, 1)) + ")"


def held_by(count: int) -> str:
    """``((id = ? AND lease_token = ?) OR ...)`` for ``count`` (step id, lease secret) pairs."""
    return pairs(count, "id", "lease_token")


class Queries:
    """Every statement of the SQL store for one namespace and dialect.

    Attributes without a leading underscore are complete statements; the
    others are templates whose lists the methods below fill.
    """

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        self.tables = tables
        self.dialect = dialect
        values = {
            **tables.template(),
            "for_update": dialect.for_update,
            "skip_locked": dialect.skip_locked,
            "lock_runs_joined": dialect.lock_runs_joined or "",
            "keep_existing": dialect.keep_existing,
            "greatest": dialect.greatest,
            "least": dialect.least,
        }

        def r(template: str) -> str:
            return s.render(template, values)

        values["forced_ready"] = dialect.forced_ready
        values["queue_gate"] = r(s.QUEUE_GATE)
        keyed_by_gate = dialect.gate_in_queue_key
        values["ready_queue"] = r(s.READY_QUEUE_KEYED_BY_GATE if keyed_by_gate else s.READY_QUEUE)

        # -- creating runs
        self.insert_run = r(s.INSERT_RUN)
        self.insert_step = r(s.INSERT_STEP)
        self.insert_runs = BatchInsert(
            tables.runs,
            tuple(column for column, _ in s.NEW_RUN_VALUES),
            tuple(kind for _, kind in s.NEW_RUN_VALUES),
            (("state", "'active'"),),
            self.insert_run,
        )
        self.insert_steps = BatchInsert(
            tables.steps,
            tuple(column for column, _ in s.NEW_STEP_VALUES),
            tuple(kind for _, kind in s.NEW_STEP_VALUES),
            (("attempt", "0"), ("failures", "0"), ("reclaims", "0")),
            self.insert_step,
        )
        self.insert_labels = BatchInsert(
            tables.run_labels,
            tuple(column for column, _ in s.NEW_LABEL_VALUES),
            tuple(kind for _, kind in s.NEW_LABEL_VALUES),
            (),
            r(s.INSERT_LABEL),
        )
        run_keyed = (*s.NEW_RUN_VALUES, *s.RUN_KEY_VALUES)
        self.insert_runs_keyed = BatchInsert(
            tables.runs,
            tuple(column for column, _ in run_keyed),
            tuple(kind for _, kind in run_keyed),
            (("state", "'active'"),),
            r(s.INSERT_RUN_KEYED),
        )
        step_keyed = (*s.NEW_STEP_VALUES, *s.STEP_KEY_VALUES)
        self.insert_steps_keyed = BatchInsert(
            tables.steps,
            tuple(column for column, _ in step_keyed),
            tuple(kind for _, kind in step_keyed),
            (("attempt", "0"), ("failures", "0"), ("reclaims", "0")),
            r(s.INSERT_STEP_KEYED),
        )
        self._holder_of_key = r(s.HOLDER_OF_KEY)
        self._runs_named = r(s.RUNS_NAMED)
        # -- claiming
        self._ready = r(s.READY)
        self._room_limit = r(s.ROOM_LIMIT)
        self._update_returning = r(s.UPDATE_RETURNING)
        self._update_returning_runs = r(s.UPDATE_RETURNING_RUNS)
        self._claims_made: dict[tuple[int, bool], tuple[str, str, str]] = {}
        self._mark_claimed = r(s.MARK_CLAIMED)
        self._mark_claimed_returning_runs = r(s.MARK_CLAIMED_RETURNING_RUNS)
        self._claimed_rows = r(s.CLAIMED_ROWS)
        self._claimed_rows_runs = r(s.CLAIMED_ROWS_RUNS)
        self._claim_runs = r(s.CLAIM_RUNS)
        self._claim_inputs = r(s.CLAIM_INPUTS)
        # -- leases
        self._renew = r(s.RENEW)
        self._lease_states = r(s.LEASE_STATES)
        self.heartbeat = r(s.HEARTBEAT)
        self.progress = r(s.PROGRESS)
        self.lease_state = r(s.LEASE_STATE)
        self._hand_back = r(s.HAND_BACK)
        self._expired = r(s.EXPIRED)
        self.requeue_expired = r(s.REQUEUE_EXPIRED)
        # -- outcomes
        self.step_of = r(s.STEP_OF)
        self._steps_of = r(s.STEPS_OF)
        self._steps_with_runs = r(s.STEPS_WITH_RUNS)
        self.lock_run = r(s.LOCK_RUN)
        self.overdue_runs = r(s.OVERDUE_RUNS)
        self._lock_runs = r(s.LOCK_RUNS)
        self.succeed = r(s.SUCCEED)
        self._succeed_many = r(s.SUCCEED_MANY)
        self.retry = r(s.RETRY)
        self.fail = r(s.FAIL)
        self.snooze = r(s.SNOOZE)
        self.sleep = r(s.SLEEP)
        self.wait = r(s.WAIT)
        self.oldest_signal = r(s.OLDEST_SIGNAL)
        self.consume_signal = r(s.CONSUME_SIGNAL)
        self.resolve_wait = r(s.RESOLVE_WAIT)
        self._release_children = r(s.RELEASE_CHILDREN)
        self._ready_children = r(s.READY_CHILDREN)
        self.count_steps_done = r(s.COUNT_STEPS_DONE)
        self.end_run = r(s.END_RUN)
        self.run_failures = r(s.RUN_FAILURES)
        self.unfinished_steps = r(s.UNFINISHED_STEPS)
        self._cancel_steps = r(s.CANCEL_STEPS)
        self.drop_signals = r(s.DROP_SIGNALS)
        self._drop_signals_of = r(s.DROP_SIGNALS_OF)
        self._runs_succeeded = r(s.RUNS_SUCCEEDED)
        # -- due work
        self._due = r(s.DUE)
        self._promote = r(s.PROMOTE)
        self.wake_sleeper = r(s.WAKE_SLEEPER)
        self.time_out_wait = r(s.TIME_OUT_WAIT)
        self.step_signal = r(s.STEP_SIGNAL)
        # -- signals and cancel
        self.waiting_for = r(s.WAITING_FOR)
        self.insert_signal = r(s.INSERT_SIGNAL)
        # -- reading
        self.get_run = r(s.GET_RUN)
        self.get_steps = r(s.GET_STEPS)
        self._list_runs = r(s.LIST_RUNS)
        self._count_runs = r(s.COUNT_RUNS)
        self._list_runs_by_label = r(s.LIST_RUNS_BY_LABEL)
        self._count_runs_by_label = r(s.COUNT_RUNS_BY_LABEL)
        self._labels_within = r(s.LABELS_WITHIN)
        self._step_counts = r(s.STEP_COUNTS)
        # -- schedules
        self.get_schedule = r(s.GET_SCHEDULE)
        self._list_schedules = r(s.LIST_SCHEDULES)
        self._due_schedules = r(s.DUE_SCHEDULES)
        self.update_schedule = r(s.UPDATE_SCHEDULE)
        self.insert_schedule = r(s.INSERT_SCHEDULE)
        self.delete_schedule = r(s.DELETE_SCHEDULE)
        self.delete_ticks_of = r(s.DELETE_TICKS_OF)
        self.lock_schedule = r(s.LOCK_SCHEDULE)
        self.insert_tick = r(s.INSERT_TICK)
        self.fired = r(s.FIRED)
        self.pause_schedule = r(s.PAUSE_SCHEDULE)
        self.tick_history = r(s.TICK_HISTORY)
        self.prunable_ticks = r(s.PRUNABLE_TICKS)
        self._delete_ticks = r(s.DELETE_TICKS)
        # -- leadership
        self.lock_leader = r(s.LOCK_LEADER)
        self.read_leader = r(s.READ_LEADER)
        self.insert_leader = r(s.INSERT_LEADER)
        self.hold_leader = r(s.HOLD_LEADER)
        self.resign_leader = r(s.RESIGN_LEADER)
        # -- pauses
        self.find_pause = r(s.FIND_PAUSE)
        self.insert_pause = r(s.INSERT_PAUSE)
        self.delete_pause = r(s.DELETE_PAUSE)
        self.list_pauses = r(s.LIST_PAUSES)
        # -- the journal
        self.read_journal = r(s.READ_JOURNAL)
        self.hold_step = r(s.HOLD_STEP)
        self.insert_journal = r(s.INSERT_JOURNAL)
        # -- named locks
        self.lock_named = r(s.LOCK_NAMED)
        self.read_named = r(s.READ_NAMED)
        self.insert_named = r(s.INSERT_NAMED)
        self.take_named = r(s.TAKE_NAMED)
        self.extend_named = r(s.EXTEND_NAMED)
        self.release_named = r(s.RELEASE_NAMED)
        # -- global queue limits
        self.find_limiter = r(s.FIND_LIMITER)
        self.insert_limiter = r(s.INSERT_LIMITER)
        self.lock_limiter = r(s.LOCK_LIMITER)
        self.count_running = r(s.COUNT_RUNNING)
        self.lock_bucket = r(s.LOCK_BUCKET)
        self.set_bucket = r(s.SET_BUCKET)
        # -- concurrency keys and fifo keys
        self._ready_keyed = r(s.READY_KEYED)
        self._ready_keyed_with_keys = r(s.READY_KEYED_WITH_KEYS)
        self._claim_keyed = r(s.CLAIM_KEYED)
        self.insert_key = r(s.INSERT_KEY)
        self.lock_key = r(s.LOCK_KEY)
        self.move_key = r(s.MOVE_KEY)
        self._lock_keys = r(s.LOCK_KEYS)
        self._move_keys = r(s.MOVE_KEYS)
        self.lock_keys_array = r(s.LOCK_KEYS_ARRAY)
        self.move_keys_array = r(s.MOVE_KEYS_ARRAY)
        self.set_head = r(s.SET_HEAD)
        self.head_unfinished = r(s.HEAD_UNFINISHED)
        self.fifo_head = r(s.FIFO_HEAD)
        self._keyed_steps = r(s.KEYED_STEPS)
        self.hand_back_one = r(s.HAND_BACK_ONE)
        self._lock_steps = r(s.LOCK_STEPS)
        # -- schema
        self.ledger_ddl = r(s.LEDGER_DDL)
        self.ledger = r(s.LEDGER)
        self.record_migration = r(s.RECORD_MIGRATION)
        self.probe = {
            table: s.render(s.PROBE, {**values, "table": values[table]})
            for table in TABLES
            if table != "migrations"  # the ledger is read first, with its own error
        }

    # -- statements with lists ---------------------------------------------------------
    def claim_plan(
        self,
        *,
        workflows: Sequence[str],
        queue: str,
        limit: int,
        claimed: tuple[Any, ...],
        global_limit: int | None = None,
    ) -> ClaimPlan:
        """The statements of one queue's claim; ``claimed``: the values of the claimed SET clause.

        There is no time condition: a step is only 'ready' once it is due. With
        ``global_limit`` (only where :attr:`Dialect.limit_expressions`), the claim
        takes at most that limit minus the queue's running steps, counted by the
        claim statement itself (its limiter row locked by an earlier statement).
        """
        if global_limit is None:
            ready_params: tuple[Any, ...] = (*self.ready_params(queue, workflows), limit)
        else:
            room = (queue, limit, global_limit, queue)
            ready_params = (*self.ready_params(queue, workflows), *room)
        ready, update_returning, update_returning_runs = self._claim_texts(
            len(workflows), limited=global_limit is not None
        )

        def mark_claimed(ids: Sequence[str]) -> Statement:
            return self._mark_claimed.format(ids=marks(len(ids))), (*claimed, *ids)

        def mark_claimed_returning_runs(ids: Sequence[str]) -> Statement:
            sql = self._mark_claimed_returning_runs.format(ids=marks(len(ids)))
            return sql, (*claimed, *ids)

        def claimed_rows(ids: Sequence[str]) -> Statement:
            return self._claimed_rows.format(ids=marks(len(ids))), tuple(ids)

        def claimed_rows_runs(ids: Sequence[str]) -> Statement:
            return self._claimed_rows_runs.format(ids=marks(len(ids))), tuple(ids)

        return ClaimPlan(
            update_returning=(update_returning, (*claimed, *ready_params)),
            update_returning_runs=(update_returning_runs, (*claimed, *ready_params)),
            select_ready=(ready + self.dialect.skip_locked, ready_params),
            mark_claimed=mark_claimed,
            mark_claimed_returning_runs=mark_claimed_returning_runs,
            claimed_rows=claimed_rows,
            claimed_rows_runs=claimed_rows_runs,
        )

    def _claim_texts(self, workflows: int, *, limited: bool) -> tuple[str, str, str]:
        """The claim's ready query and its two ``UPDATE``s for ``workflows`` workflows,
        made once (they were formatted at every claim, three texts of about 1,500 characters)."""
        found = self._claims_made.get((workflows, limited))
        if found is None:
            limit = self._room_limit if limited else "?"
            ready = self._ready.format(workflows=marks(workflows), limit=limit)
            found = (
                ready,
                self._update_returning.format(ready=ready),
                self._update_returning_runs.format(ready=ready),
            )
            if len(self._claims_made) >= 64:  # a client's workflows change rarely
                self._claims_made.clear()
            self._claims_made[workflows, limited] = found
        return found

    def ready_keyed(self, *, workflows: Sequence[str], queue: str, limit: int) -> Statement:
        """A keyed claim's candidates in one queue, without a lock clause (the dialect adds it)."""
        sql = self._ready_keyed.format(workflows=marks(len(workflows)))
        return sql, (*self.ready_params(queue, workflows), limit)

    def ready_keyed_with_keys(
        self, *, workflows: Sequence[str], queue: str, limit: int, released: Sequence[str]
    ) -> Statement:
        """READY_KEYED and the keys' locks in one statement (``Dialect.key_arrays``).

        ``released``: the keys whose counts the same transaction moves too (an outcome
        batch's), locked with the candidates' in one name order.
        """
        sql = self._ready_keyed_with_keys.format(workflows=marks(len(workflows)))
        return sql, (*self.ready_params(queue, workflows), limit, list(released))

    def claim_keyed(
        self,
        *,
        workflows: Sequence[str],
        queue: str,
        limit: int,
        released: Mapping[str, int],
        claimed: Sequence[object],
    ) -> Statement:
        """A keyed claim of one queue in one statement (``Dialect.claims_keyed_in_one``).

        ``released``: attempts per key whose leases the same transaction ended (an
        outcome batch's), taken off their keys' counts with the claim's own moves.
        ``claimed``: what the lease sets (:attr:`ClaimPlan`'s ``claimed``).
        """
        sql = self._claim_keyed.format(workflows=marks(len(workflows)))
        names = sorted(name for name, count in released.items() if count)
        counts = [released[name] for name in names]
        return sql, (*self.ready_params(queue, workflows), limit, names, counts, *claimed)

    def ready_params(self, queue: str, workflows: Sequence[str]) -> tuple[Any, ...]:
        """The parameters of the claim's ready predicate (``_READY_UNPAUSED``), in order."""
        gate = (queue, queue)  # QUEUE_GATE: the queue's pause, its forced ready steps
        if self.dialect.gate_in_queue_key:
            return (*gate, queue, *workflows, queue)
        return (queue, *workflows, *gate, queue)

    def still_ready(self, step_ids: Sequence[str]) -> Statement:
        """Lock those of ``step_ids`` still ready, skipping locked ones (a candidate's relock)."""
        sql = self._claimed_rows.format(ids=marks(len(step_ids)))
        return f"{sql} AND status = 'ready'{self.dialect.skip_locked}", tuple(step_ids)

    def lock_keys(self, names: Sequence[str]) -> Statement:
        """Lock the rows of the keys ``names``, in name order (one statement)."""
        return self._lock_keys.format(ids=marks(len(names))), tuple(names)

    def move_keys(self, moves: Sequence[tuple[int, str]]) -> Statement:
        """Add ``count`` to each key's count, for ``(count, name)`` pairs, in one statement."""
        # "? + 0": a driver that sends untyped parameters (pg8000) would have Postgres read a
        # bare THEN ? as text, and refuse "running + text"; a sum makes it a number everywhere.
        cases = " ".join("WHEN ? THEN ? + 0" for _ in moves)
        sql = self._move_keys.format(moves=cases, ids=marks(len(moves)))
        params = [v for count, name in moves for v in (name, count)]
        return sql, (*params, *(name for _, name in moves))

    def keyed_steps(self, step_ids: Sequence[str]) -> Statement:
        """The keys of those of ``step_ids`` that carry one."""
        return self._keyed_steps.format(ids=marks(len(step_ids))), tuple(step_ids)

    def lock_steps(self, step_ids: Sequence[str]) -> Statement:
        """Lock steps by id; read their status and key."""
        return self._lock_steps.format(ids=marks(len(step_ids))), tuple(step_ids)

    def steps_of(self, step_ids: Sequence[str]) -> Statement:
        """Run and children of each step."""
        return self._steps_of.format(ids=marks(len(step_ids))), tuple(step_ids)

    def steps_with_runs(self, step_ids: Sequence[str]) -> Statement:
        """Run, children and the run's steps left of each step, locking the runs in id order."""
        return self._steps_with_runs.format(ids=marks(len(step_ids))), tuple(step_ids)

    def lock_runs(self, run_ids: Sequence[str]) -> Statement:
        """Lock the runs ``run_ids`` in id order; read their steps left."""
        return self._lock_runs.format(ids=marks(len(run_ids))), tuple(run_ids)

    def succeed_many(self, now: int, rows: Sequence[tuple[str, str, bytes | None]]) -> Statement:
        """Mark held steps succeeded in one statement: ``(step id, lease secret, output)`` rows.

        Each row is fenced like :attr:`succeed`; the statement's row count is the
        number of leases that still held.
        """
        whens = " ".join(["WHEN ? THEN ?"] * len(rows))
        sql = self._succeed_many.format(whens=whens, held=held_by(len(rows)))
        picked = tuple(value for step_id, _secret, output in rows for value in (step_id, output))
        held = tuple(value for step_id, secret, _output in rows for value in (step_id, secret))
        return sql, (*picked, now, *held)

    def runs_succeeded(self, now: int, run_ids: Sequence[str]) -> Statement:
        """End the runs ``run_ids``, all of whose steps succeeded."""
        return self._runs_succeeded.format(ids=marks(len(run_ids))), (now, *run_ids)

    def drop_signals_of(self, run_ids: Sequence[str]) -> Statement:
        """Forget the kept signals of finished runs."""
        return self._drop_signals_of.format(ids=marks(len(run_ids))), tuple(run_ids)

    def holder_of_key(self, workflow: str, keys: Sequence[str]) -> Statement:
        """Which run holds which of ``keys``."""
        return self._holder_of_key.format(keys=marks(len(keys))), (workflow, *keys)

    def runs_named(self, run_ids: Sequence[str]) -> Statement:
        """Id and workflow of those of ``run_ids`` that exist."""
        return self._runs_named.format(ids=marks(len(run_ids))), tuple(run_ids)

    def claim_runs(self, run_ids: Sequence[str]) -> Statement:
        """Payload and labels of the runs of claimed steps."""
        return self._claim_runs.format(ids=marks(len(run_ids))), tuple(run_ids)

    def claim_inputs(self, run_ids: Sequence[str], names: Sequence[str]) -> Statement:
        """Outputs of the succeeded steps ``names`` of ``run_ids``."""
        sql = self._claim_inputs.format(ids=marks(len(run_ids)), names=marks(len(names)))
        return sql, (*run_ids, *names)

    def renew(self, lease_until: int, held: Sequence[tuple[str, str]]) -> Statement:
        """Extend the leases ``held`` (``(step id, lease secret)`` pairs)."""
        flat = tuple(value for pair in held for value in pair)
        return self._renew.format(held=held_by(len(held))), (lease_until, *flat)

    def lease_states(self, step_ids: Sequence[str]) -> Statement:
        """Status and lease of each step."""
        return self._lease_states.format(ids=marks(len(step_ids))), tuple(step_ids)

    def hand_back(self, now: int, held: Sequence[tuple[str, str]]) -> Statement:
        """Make the attempts ``held`` ready again at ``now``."""
        flat = tuple(value for pair in held for value in pair)
        return self._hand_back.format(held=held_by(len(held))), (now, *flat)

    def expired(self, lease_now: int, workflows: Sequence[str], limit: int) -> Statement:
        """Running steps whose lease ended before ``lease_now``."""
        sql = self._expired.format(workflows=marks(len(workflows)))
        return sql, (lease_now, *workflows, limit)

    def due(self, now: int, workflows: Sequence[str], limit: int) -> Statement:
        """Sleeping and waiting steps due at ``now``."""
        return self._due.format(workflows=marks(len(workflows))), (now, *workflows, limit)

    def promote(self, step_ids: Sequence[str]) -> Statement:
        """Make the scheduled steps ``step_ids`` ready (they are due)."""
        return self._promote.format(ids=marks(len(step_ids))), tuple(step_ids)

    def release_children(self, run_id: str, names: Sequence[str]) -> Statement:
        """Count one more succeeded parent for each of ``names``."""
        return self._release_children.format(names=marks(len(names))), (run_id, *names)

    def ready_children(self, now: int, run_id: str, names: Sequence[str]) -> Statement:
        """Make the children in ``names`` whose parents all succeeded ready."""
        return self._ready_children.format(names=marks(len(names))), (now, run_id, *names)

    def cancel_steps(self, now: int, step_ids: Sequence[str]) -> Statement:
        """Cancel the steps ``step_ids``."""
        return self._cancel_steps.format(ids=marks(len(step_ids))), (now, *step_ids)

    def list_runs(
        self, query: RunQuery, *, before_seq: int | None, limit: int, by_label: bool = False
    ) -> Statement:
        """Runs matching ``query`` newest first, after the cursor ``before_seq``.

        ``by_label``: driven from the label index's rows of the query's
        :func:`driving_label` (see :meth:`labels_within`) rather than from the runs
        newest first.
        """
        driver = driving_label(query) if by_label else None
        if driver is None:
            filters, params = run_filter(query, self.tables, before_seq=before_seq)
            return self._list_runs.format(filters=filters), (*params, limit)
        joined, driving, bounds = driver
        filters, params = run_filter(query, self.tables, before_seq=before_seq, joined=joined)
        sql = self._list_runs_by_label.format(driving=driving, filters=filters)
        return sql, (*bounds, *params, limit)

    def count_runs(self, query: RunQuery, *, by_label: bool = False) -> Statement:
        """How many runs match ``query`` (its cursor aside); ``by_label`` as in list_runs."""
        driver = driving_label(query) if by_label else None
        if driver is None:
            filters, params = run_filter(query, self.tables)
            return self._count_runs.format(filters=filters), params
        joined, driving, bounds = driver
        filters, params = run_filter(query, self.tables, joined=joined)
        sql = self._count_runs_by_label.format(driving=driving, filters=filters)
        return sql, (*bounds, *params)

    def labels_within(self, query: RunQuery, bound: int) -> Statement | None:
        """How many label rows the query's driving label has, counting no further than
        ``bound``; None when the query has no label."""
        driver = driving_label(query)
        if driver is None:
            return None
        _joined, driving, bounds = driver
        return self._labels_within.format(driving=driving), (*bounds, bound)

    def step_counts(self, run_ids: Sequence[str]) -> Statement:
        """How many steps of each run have each status."""
        return self._step_counts.format(ids=marks(len(run_ids))), tuple(run_ids)

    def list_schedules(self, workflows: Sequence[str] | None) -> Statement:
        """Every schedule (of ``workflows``, if given), by workflow and name."""
        if workflows is None:
            return self._list_schedules.format(filters=""), ()
        filters = f" AND s.workflow IN ({marks(len(workflows))})"
        return self._list_schedules.format(filters=filters), tuple(workflows)

    def due_schedules(self, now: int, workflows: Sequence[str], limit: int) -> Statement:
        """Schedules of ``workflows`` due at ``now``, earliest first."""
        sql = self._due_schedules.format(workflows=marks(len(workflows)))
        return sql, (*workflows, now, limit)

    def delete_ticks(self, keys: Sequence[tuple[str, int]]) -> Statement:
        """Delete the ticks ``keys`` (``(schedule id, tick time)`` pairs) by primary key."""
        flat = tuple(value for key in keys for value in key)
        return self._delete_ticks.format(tick_keys=pairs(len(keys), "schedule_id", "at")), flat
