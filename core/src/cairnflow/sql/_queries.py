"""The SQL of the Store SPI, in one place, in portable SQL with ``?`` placeholders.

Rendered once per store for its namespace: table names come from
:class:`Tables` (validated, quoted) and the lock clauses from the dialect.
Values are always bound, never formatted in. Lists (``IN (...)``) get one
placeholder per item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._dialect import ClaimPlan, Dialect, Statement
from ._tables import Tables

__all__ = ["RUN_COLUMNS", "STEP_COLUMNS", "UNFINISHED", "Queries", "marks"]

UNFINISHED = ("blocked", "scheduled", "ready", "running", "sleeping", "waiting")
"""Step statuses that can still change."""

RUN_COLUMNS = (
    "seq, id, workflow, queue, state, payload, idem_key, labels, created_at, run_at, "
    "finished_at, error"
)
STEP_COLUMNS = (
    "name, kind, status, parents, attempt, failures, reclaims, output, error, node, progress, "
    "signal_name, due_at, started_at, finished_at, heartbeat_at"
)
_CLAIMED = "id, run_id, name, kind, attempt, failures, reclaims, parents"


def marks(count: int) -> str:
    """``?, ?, ?`` for ``count`` values (at least one)."""
    return ", ".join(["?"] * max(count, 1))


def held_by(count: int) -> str:
    """``((id = ? AND lease_token = ?) OR ...)`` for ``count`` (step id, lease secret) pairs.

    Spelled out rather than as a row-value ``(id, lease_token) IN ((?, ?), ...)``:
    SQLite and MariaDB plan a row-value IN as a scan of every running step, while
    each ``id = ?`` term is a primary-key lookup on every engine.
    """
    return "(" + " OR ".join(["(id = ? AND lease_token = ?)"] * max(count, 1)) + ")"


class Queries:
    """Every statement of the SQL store for one namespace and dialect."""

    def __init__(self, tables: Tables, dialect: Dialect) -> None:
        self.tables = tables
        t = tables.template()
        lock = dialect.for_update
        self.dialect = dialect

        # -- creating runs ------------------------------------------------------------------
        self.insert_run = f"""
            INSERT INTO {t["runs"]}
                (id, workflow, queue, priority, state, payload, idem_key, active_key, labels,
                 steps_left, created_at, run_at)
            VALUES (?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?)"""
        self.insert_step = f"""
            INSERT INTO {t["steps"]}
                (id, run_id, workflow, queue, priority, name, kind, position, parents, children,
                 parents_left, status, due_at, attempt, failures, reclaims)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0)"""
        self._holder_of_key = f"""
            SELECT id, active_key FROM {t["runs"]}
            WHERE workflow = ? AND active_key IN ({{keys}})"""

        # -- claiming ----------------------------------------------------------------------------
        # Only due steps are 'ready' (steps due later are 'scheduled' until promoted), so the
        # claim has no range condition: it walks the ready index in order and stops at n.
        self._ready = f"""
            SELECT id FROM {t["steps"]}
            WHERE status = 'ready' AND workflow IN ({{workflows}}){{queues}}
            ORDER BY priority DESC, due_at, id
            LIMIT ?"""
        self._claimed_set = """
            status = 'running', attempt = attempt + 1, lease_token = ?, lease_until = ?,
            node = ?, started_at = ?, heartbeat_at = NULL"""
        self._update_returning = f"""
            UPDATE {t["steps"]} SET {self._claimed_set}
            WHERE id IN ({{ready}}{dialect.skip_locked})
            RETURNING {_CLAIMED}"""
        # The same claim returning its runs' payloads too, where UPDATE ... FROM may
        # return the joined table's columns (Postgres): one statement instead of two.
        claimed_s = ", ".join(f"s.{c.strip()}" for c in _CLAIMED.split(","))
        self._update_returning_runs = f"""
            UPDATE {t["steps"]} s SET {self._claimed_set}
            FROM {t["runs"]} r
            WHERE r.id = s.run_id AND s.id IN ({{ready}}{dialect.skip_locked})
            RETURNING {claimed_s}, r.id, r.workflow, r.queue, r.payload, r.labels"""
        self._mark_claimed = f"""
            UPDATE {t["steps"]} SET {self._claimed_set}
            WHERE id IN ({{ids}}) AND status = 'ready'"""
        self._claimed_rows = f"SELECT {_CLAIMED} FROM {t['steps']} WHERE id IN ({{ids}})"
        self._claimed_rows_runs = f"""
            SELECT {claimed_s}, r.id, r.workflow, r.queue, r.payload, r.labels
            FROM {t["steps"]} s JOIN {t["runs"]} r ON r.id = s.run_id
            WHERE s.id IN ({{ids}})"""
        self._claim_runs = f"""
            SELECT id, workflow, queue, payload, labels FROM {t["runs"]} WHERE id IN ({{ids}})"""
        self._claim_inputs = f"""
            SELECT run_id, name, output FROM {t["steps"]}
            WHERE run_id IN ({{ids}}) AND status = 'succeeded' AND name IN ({{names}})"""

        # -- leases ------------------------------------------------------------------------------
        self._renew = f"""
            UPDATE {t["steps"]} SET lease_until = ?
            WHERE status = 'running' AND {{held}}"""
        self._lease_states = f"""
            SELECT id, lease_token, status FROM {t["steps"]} WHERE id IN ({{ids}})"""
        self.heartbeat = f"""
            UPDATE {t["steps"]} SET lease_until = ?, heartbeat_at = ?
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.progress = f"""
            UPDATE {t["steps"]} SET progress = ?, heartbeat_at = ?
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.lease_state = f"SELECT status, lease_token FROM {t['steps']} WHERE id = ?"
        self._hand_back = f"""
            UPDATE {t["steps"]}
            SET status = 'ready', due_at = ?, lease_token = NULL, lease_until = NULL
            WHERE status = 'running' AND {{held}}"""
        self._expired = f"""
            SELECT id, run_id, workflow, name, attempt, failures, reclaims, lease_token
            FROM {t["steps"]}
            WHERE status = 'running' AND lease_until < ? AND workflow IN ({{workflows}})
            ORDER BY lease_until
            LIMIT ?"""
        self.requeue_expired = f"""
            UPDATE {t["steps"]}
            SET status = 'ready', due_at = ?, reclaims = reclaims + 1,
                lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running' AND lease_until < ?"""

        # -- outcomes (the run row is locked first, always: one lock order, no deadlock) ----------
        self.step_of = f"SELECT run_id, children FROM {t['steps']} WHERE id = ?"
        self._steps_of = f"SELECT id, run_id, children FROM {t['steps']} WHERE id IN ({{ids}})"
        joined_lock = dialect.lock_runs_joined or ""
        self._steps_with_runs = f"""
            SELECT s.id, s.run_id, s.children, r.steps_left
            FROM {t["steps"]} s JOIN {t["runs"]} r ON r.id = s.run_id
            WHERE s.id IN ({{ids}})
            ORDER BY r.id{joined_lock}"""
        self.lock_run = f"SELECT state, steps_left FROM {t['runs']} WHERE id = ?{lock}"
        # Through the unique id index, in id order: InnoDB locks the rows as it reads them.
        self._lock_runs = f"""
            SELECT id, steps_left FROM {t["runs"]} WHERE id IN ({{ids}}) ORDER BY id{lock}"""
        self.succeed = f"""
            UPDATE {t["steps"]}
            SET status = 'succeeded', output = ?, finished_at = ?, due_at = NULL,
                lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        # Many successes in one statement (one round trip): each output picked by step id,
        # each row fenced by its own lease. ELSE keeps the column's type for the CASE.
        self._succeed_many = f"""
            UPDATE {t["steps"]}
            SET status = 'succeeded', output = CASE id {{whens}} ELSE output END,
                finished_at = ?, due_at = NULL, lease_token = NULL, lease_until = NULL
            WHERE status = 'running' AND {{held}}"""
        self.retry = f"""
            UPDATE {t["steps"]}
            SET status = ?, due_at = ?, failures = failures + 1, error = ?, reclaims = 0,
                lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.fail = f"""
            UPDATE {t["steps"]}
            SET status = 'failed', failures = failures + 1, error = ?, finished_at = ?,
                due_at = NULL, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.snooze = f"""
            UPDATE {t["steps"]}
            SET status = ?, due_at = ?, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.sleep = f"""
            UPDATE {t["steps"]}
            SET status = 'sleeping', due_at = ?, output = ?, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.wait = f"""
            UPDATE {t["steps"]}
            SET status = 'waiting', due_at = ?, signal_name = ?, lease_token = NULL,
                lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
        self.oldest_signal = f"""
            SELECT seq, payload FROM {t["signals"]}
            WHERE run_id = ? AND name = ?
            ORDER BY seq
            LIMIT 1"""
        self.consume_signal = f"DELETE FROM {t['signals']} WHERE seq = ?"
        self.resolve_wait = f"""
            UPDATE {t["steps"]}
            SET status = 'succeeded', output = ?, finished_at = ?, due_at = NULL
            WHERE id = ? AND status = 'waiting'"""
        self._release_children = f"""
            UPDATE {t["steps"]} SET parents_left = parents_left - 1
            WHERE run_id = ? AND name IN ({{names}})"""
        self._ready_children = f"""
            UPDATE {t["steps"]} SET status = 'ready', due_at = ?
            WHERE run_id = ? AND name IN ({{names}}) AND parents_left = 0 AND status = 'blocked'"""
        self.count_steps_done = f"UPDATE {t['runs']} SET steps_left = steps_left - ? WHERE id = ?"
        self.end_run = f"""
            UPDATE {t["runs"]}
            SET state = ?, finished_at = ?, error = ?, active_key = NULL
            WHERE id = ? AND state = 'active'"""
        unfinished = ", ".join(f"'{s}'" for s in UNFINISHED)
        self.unfinished_steps = f"""
            SELECT id FROM {t["steps"]} WHERE run_id = ? AND status IN ({unfinished})"""
        self._cancel_steps = f"""
            UPDATE {t["steps"]} SET status = 'cancelled', finished_at = ?, due_at = NULL
            WHERE id IN ({{ids}})"""
        self.drop_signals = f"DELETE FROM {t['signals']} WHERE run_id = ?"
        self._drop_signals_of = f"DELETE FROM {t['signals']} WHERE run_id IN ({{ids}})"
        # By id only: these runs are locked and every step of each succeeded, so each is
        # still active. (A state condition here can send a planner down the state index.)
        self._runs_succeeded = f"""
            UPDATE {t["runs"]}
            SET steps_left = 0, state = 'succeeded', finished_at = ?, active_key = NULL
            WHERE id IN ({{ids}})"""

        # -- due work ---------------------------------------------------------------------------
        self._due = f"""
            SELECT id, run_id, status FROM {t["steps"]}
            WHERE status IN ('scheduled', 'sleeping', 'waiting') AND due_at <= ?
                AND workflow IN ({{workflows}})
            ORDER BY due_at
            LIMIT ?"""
        self._promote = f"""
            UPDATE {t["steps"]} SET status = 'ready'
            WHERE id IN ({{ids}}) AND status = 'scheduled'"""
        self.wake_sleeper = f"""
            UPDATE {t["steps"]} SET status = 'succeeded', finished_at = ?, due_at = NULL
            WHERE id = ? AND status = 'sleeping' AND due_at <= ?"""
        self.time_out_wait = f"""
            UPDATE {t["steps"]}
            SET status = 'failed', failures = failures + 1, error = ?, finished_at = ?,
                due_at = NULL
            WHERE id = ? AND status = 'waiting' AND due_at <= ?"""
        self.step_signal = f"SELECT signal_name, attempt, name FROM {t['steps']} WHERE id = ?"

        # -- signals and cancel ------------------------------------------------------------------
        self.waiting_for = f"""
            SELECT id, children FROM {t["steps"]}
            WHERE run_id = ? AND status = 'waiting' AND signal_name = ?
            ORDER BY position
            LIMIT 1"""
        self.insert_signal = f"""
            INSERT INTO {t["signals"]} (run_id, name, payload, created_at) VALUES (?, ?, ?, ?)"""

        # -- reading -------------------------------------------------------------------
        self.get_run = f"SELECT {RUN_COLUMNS} FROM {t['runs']} WHERE id = ?"
        self.get_steps = f"""
            SELECT {STEP_COLUMNS} FROM {t["steps"]} WHERE run_id = ? ORDER BY position"""
        self._list_runs = f"""
            SELECT {RUN_COLUMNS} FROM {t["runs"]}
            WHERE 1 = 1{{filters}}
            ORDER BY seq DESC
            LIMIT ?"""
        self._step_counts = f"""
            SELECT run_id, status, COUNT(*) FROM {t["steps"]}
            WHERE run_id IN ({{ids}})
            GROUP BY run_id, status"""

        # -- schema --------------------------------------------------------------------------------
        self.ledger = f"SELECT version, name, checksum FROM {t['migrations']} ORDER BY version"
        self.record_migration = f"""
            INSERT INTO {t["migrations"]} (version, name, checksum, applied_at)
            VALUES (?, ?, ?, ?)"""
        self.probe = {
            table: f"SELECT 1 FROM {t[table]} WHERE 1 = 0" for table in ("runs", "steps", "signals")
        }

    # -- statements with lists ---------------------------------------------------------
    def claim_plan(
        self,
        *,
        workflows: Sequence[str],
        queues: Sequence[str] | None,
        now: int,
        limit: int,
        claimed: tuple[Any, ...],
    ) -> ClaimPlan:
        """The statements of one claim; ``claimed`` are the values of the claimed SET clause.

        ``now`` is not a condition: a step is only 'ready' once it is due.
        """
        queue_sql = f" AND queue IN ({marks(len(queues))})" if queues is not None else ""
        ready = self._ready.format(workflows=marks(len(workflows)), queues=queue_sql)
        ready_params = (*workflows, *(queues or ()), limit)

        def mark_claimed(ids: Sequence[str]) -> Statement:
            return self._mark_claimed.format(ids=marks(len(ids))), (*claimed, *ids)

        def claimed_rows(ids: Sequence[str]) -> Statement:
            return self._claimed_rows.format(ids=marks(len(ids))), tuple(ids)

        def claimed_rows_runs(ids: Sequence[str]) -> Statement:
            return self._claimed_rows_runs.format(ids=marks(len(ids))), tuple(ids)

        return ClaimPlan(
            update_returning=(
                self._update_returning.format(ready=ready),
                (*claimed, *ready_params),
            ),
            update_returning_runs=(
                self._update_returning_runs.format(ready=ready),
                (*claimed, *ready_params),
            ),
            select_ready=(ready + self.dialect.skip_locked, ready_params),
            mark_claimed=mark_claimed,
            claimed_rows=claimed_rows,
            claimed_rows_runs=claimed_rows_runs,
        )

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
        self,
        *,
        workflow: str | None,
        states: Sequence[str] | None,
        before_seq: int | None,
        limit: int,
    ) -> Statement:
        """Runs newest first, filtered in SQL by workflow, state and cursor."""
        filters = ""
        params: list[Any] = []
        if workflow is not None:
            filters += " AND workflow = ?"
            params.append(workflow)
        if states is not None:
            filters += f" AND state IN ({marks(len(states))})"
            params.extend(states)
        if before_seq is not None:
            filters += " AND seq < ?"
            params.append(before_seq)
        return self._list_runs.format(filters=filters), (*params, limit)

    def step_counts(self, run_ids: Sequence[str]) -> Statement:
        """How many steps of each run have each status."""
        return self._step_counts.format(ids=marks(len(run_ids))), tuple(run_ids)
