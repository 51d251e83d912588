"""Every statement of the SQL store, by name, in portable SQL with ``?`` placeholders.

Templates, grouped by the transition that runs them, so a statement is found by its name
and read as SQL. :class:`~cairnflow.sql.Queries` renders them once per store
(:func:`render`): ``{runs}``, ``{steps}``, ``{signals}``, ``{schedules}``, ``{ticks}``,
``{leaders}``, ``{pauses}``, ``{limits}``, ``{journal}``, ``{locks}`` and
``{migrations}`` become the namespace's quoted tables, ``{for_update}``,
``{skip_locked}`` and ``{lock_runs_joined}`` the dialect's lock clauses,
``{keep_existing}`` its clause that makes an insert of an existing key do nothing, and
the column lists below are filled in. What only a call knows is left in braces
for the call to fill: ``{ids}``, ``{names}``, ``{workflows}``, ``{keys}`` get
one ``?`` per item (:func:`~cairnflow.sql._queries.marks`), ``{held}`` one
fenced pair per lease (:func:`~cairnflow.sql._queries.held_by`), ``{tick_keys}``
one primary key per tick, ``{ready}`` the claim's ready subquery, ``{whens}``
and ``{filters}`` optional clauses. Values are always bound, never formatted in.

Every write of an attempt is fenced by its lease: ``WHERE id = ? AND
lease_token = ? AND status = 'running'``. Every transition of a run locks the
run row first (``LOCK_RUN``, ``LOCK_RUNS``, ``STEPS_WITH_RUNS``), then writes
its steps: one lock order, so no two transitions of a run deadlock.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "LEADER_COLUMNS",
    "LOCK_COLUMNS",
    "NEW_LABEL_VALUES",
    "NEW_RUN_VALUES",
    "NEW_STEP_VALUES",
    "PAUSE_COLUMNS",
    "RUN_COLUMNS",
    "SCHEDULE_COLUMNS",
    "STEP_COLUMNS",
    "TICK_COLUMNS",
    "UNFINISHED",
    "render",
]

UNFINISHED = ("blocked", "scheduled", "ready", "running", "sleeping", "waiting")
"""Step statuses that can still change."""

# -- column lists (each is the fields of a row type of ._rows, in order) ----------------------
RUN_COLUMNS = (
    "seq, id, workflow, queue, state, payload, idem_key, labels, created_at, run_at, "
    "finished_at, error, headers, tenant"
)
"""A run as reading reads it (:class:`~cairnflow.sql._rows.RunRow`)."""
STEP_COLUMNS = (
    "name, kind, status, parents, attempt, failures, reclaims, output, error, node, progress, "
    "signal_name, due_at, started_at, finished_at, heartbeat_at"
)
"""A step as reading reads it (:class:`~cairnflow.sql._rows.StepRow`)."""
CLAIMED_COLUMNS = "id, run_id, name, kind, attempt, failures, reclaims, parents"
"""A claimed step (:class:`~cairnflow.sql._rows.ClaimedStep`)."""
CLAIM_RUN_COLUMNS = "id, workflow, queue, payload, labels, headers, tenant"
"""What an attempt needs of its run (:class:`~cairnflow.sql._rows.ClaimedRun`)."""
SCHEDULE_COLUMNS = (
    "id, workflow, name, spec, fingerprint, next_fire, paused, resumed_at, last_fire, "
    "last_run_id, created_at, updated_at"
)
"""A schedule as stored (:class:`~cairnflow.sql._rows.ScheduleRow`, which reads one more:
whether the run of its last fire is finished)."""
TICK_COLUMNS = "schedule_id, at, outcome, reason, node, recorded_at, run_id"
"""A recorded tick (:class:`~cairnflow.sql._rows.TickRow`)."""
LEADER_COLUMNS = "role, node, term, lease_until"
"""A role's leadership lease (:class:`~cairnflow.sql._rows.LeaderRow`)."""
PAUSE_COLUMNS = "kind, name, paused_at"
"""A paused queue or workflow (:class:`~cairnflow.sql._rows.PauseRow`)."""
LOCK_COLUMNS = "name, token, taken_at, expires_at"
"""A named lock (:class:`~cairnflow.sql._rows.LockRow`)."""


def _aliased(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in columns.split(","))


_FRAGMENTS = {
    "run_columns": RUN_COLUMNS,
    "step_columns": STEP_COLUMNS,
    "claimed_columns": CLAIMED_COLUMNS,
    "claimed_columns_s": _aliased("s", CLAIMED_COLUMNS),
    "claim_run_columns": CLAIM_RUN_COLUMNS,
    "claim_run_columns_r": _aliased("r", CLAIM_RUN_COLUMNS),
    "run_columns_r": _aliased("r", RUN_COLUMNS),
    "schedule_columns": SCHEDULE_COLUMNS,
    "schedule_columns_s": _aliased("s", SCHEDULE_COLUMNS),
    "tick_columns": TICK_COLUMNS,
    "leader_columns": LEADER_COLUMNS,
    "pause_columns": PAUSE_COLUMNS,
    "lock_columns": LOCK_COLUMNS,
    "unfinished": ", ".join(f"'{status}'" for status in UNFINISHED),
    # What a claim sets on each step it leases.
    "claimed_set": """
            status = 'running', attempt = attempt + 1, lease_token = ?, lease_until = ?,
            node = ?, started_at = ?, heartbeat_at = NULL""",
}


class _LaterPlaceholders(dict[str, Any]):
    """Fills what it knows; leaves ``{ids}`` and the other per-call placeholders as they are."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(template: str, values: dict[str, Any]) -> str:
    """``template`` for one namespace and dialect (``values``: tables and lock clauses)."""
    return template.format_map(_LaterPlaceholders(_FRAGMENTS, **values))


# -- creating runs --------------------------------------------------------------------------
INSERT_RUN = """
            INSERT INTO {runs}
                (id, workflow, queue, priority, state, payload, idem_key, active_key, labels,
                 steps_left, created_at, run_at, headers, tenant)
            VALUES (?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
"""One new run (``executemany``: every run of an enqueue in one statement)."""

NEW_RUN_VALUES: tuple[tuple[str, Literal["text", "int", "bytes"]], ...] = (
    ("id", "text"),
    ("workflow", "text"),
    ("queue", "text"),
    ("priority", "int"),
    ("payload", "bytes"),
    ("idem_key", "text"),
    ("active_key", "text"),
    ("labels", "text"),
    ("steps_left", "int"),
    ("created_at", "int"),
    ("run_at", "int"),
    ("headers", "text"),
    ("tenant", "text"),
)
"""The values of a run row, in the order :data:`INSERT_RUN` takes them, and their kinds
(:class:`~cairnflow.sql.BatchInsert`); ``state`` is ``'active'`` in every new run."""

INSERT_LABEL = """
            INSERT INTO {run_labels} (run_id, name, value, created_at) VALUES (?, ?, ?, ?)"""
"""One label of a new run, in the label index (``executemany``, in the enqueue's transaction)."""

NEW_LABEL_VALUES: tuple[tuple[str, Literal["text", "int", "bytes"]], ...] = (
    ("run_id", "text"),
    ("name", "text"),
    ("value", "text"),
    ("created_at", "int"),
)
"""The values of a label row, in the order :data:`INSERT_LABEL` takes them."""

INSERT_STEP = """
            INSERT INTO {steps}
                (id, run_id, workflow, queue, priority, name, kind, position, parents, children,
                 parents_left, status, due_at, attempt, failures, reclaims)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0)"""
"""One new step (``executemany``, like the runs)."""

NEW_STEP_VALUES: tuple[tuple[str, Literal["text", "int", "bytes"]], ...] = (
    ("id", "text"),
    ("run_id", "text"),
    ("workflow", "text"),
    ("queue", "text"),
    ("priority", "int"),
    ("name", "text"),
    ("kind", "text"),
    ("position", "int"),
    ("parents", "text"),
    ("children", "text"),
    ("parents_left", "int"),
    ("status", "text"),
    ("due_at", "int"),
)
"""The values of a step row, in the order :data:`INSERT_STEP` takes them; ``attempt``,
``failures`` and ``reclaims`` are 0 in every new step."""

# An enqueue with concurrency keys (#16) writes the same rows and these columns after them;
# one without writes none of them (INSERT_RUN, INSERT_STEP as they were).
INSERT_RUN_KEYED = """
            INSERT INTO {runs}
                (id, workflow, queue, priority, state, payload, idem_key, active_key, labels,
                 steps_left, created_at, run_at, headers, tenant, fifo_key)
            VALUES (?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
"""A new run of an enqueue with keys: and its fifo key (``Cap.KEY_FIFO``), or NULL."""

RUN_KEY_VALUES: tuple[tuple[str, Literal["text", "int", "bytes"]], ...] = (("fifo_key", "text"),)
"""What :data:`INSERT_RUN_KEYED` takes after :data:`NEW_RUN_VALUES`."""

INSERT_STEP_KEYED = """
            INSERT INTO {steps}
                (id, run_id, workflow, queue, priority, name, kind, position, parents, children,
                 parents_left, status, due_at, concurrency_key, key_limit, attempt, failures,
                 reclaims)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0)"""
"""A new step of an enqueue with keys: and its concurrency key and the key's limit, or NULL."""

STEP_KEY_VALUES: tuple[tuple[str, Literal["text", "int", "bytes"]], ...] = (
    ("concurrency_key", "text"),
    ("key_limit", "int"),
)
"""What :data:`INSERT_STEP_KEYED` takes after :data:`NEW_STEP_VALUES`."""

HOLDER_OF_KEY = """
            SELECT id, active_key FROM {runs}
            WHERE workflow = ? AND active_key IN ({keys})"""
"""Which run holds which idempotency key: who won, after a unique index refused an enqueue."""

RUNS_NAMED = """
            SELECT id, workflow FROM {runs}
            WHERE id IN ({ids})"""
"""Which of an enqueue's run ids exist, and under which workflow: after a unique index refused
the enqueue, whether an earlier attempt of it landed (:func:`cairnflow.store.landed`)."""

# -- claiming ---------------------------------------------------------------------------------
# Only due steps are 'ready' (steps due later are 'scheduled' until promoted), so the
# claim has no range condition: it walks the ready index, led by the queue, in order and
# stops at n. A claim of several queues runs this once per queue (docs/claim.md, 2).
# Pauses are read here, by every claim, in its transaction; nothing caches them past the
# statement. The queue's is one probe of the pauses' primary key, uncorrelated, so evaluated
# once (Postgres: an InitPlan); a workflow's is one probe per row the claim visits. A forced
# run's steps (force_run, Cap.FORCE_RUN: forced = 1) pass both: the queue's check becomes
# "no pause OR forced", a column test per row beside the once-evaluated probe; the workflow's
# names the row's flag inside the NOT EXISTS, which stays an anti join probing the primary key
# (an OR around it would let Postgres hash every pause for each claim). With no pause, plain
# W2 claims as before. A paused queue would still walk its ready rows looking for forced
# ones (10,000 ready rows on PostgreSQL 15, on a busy machine: 16-33 ms a claim instead of
# 0.6-3 ms, and 28 ms on MariaDB), so a gate that names no row of the scan comes first:
# QUEUE_GATE, "the queue is not paused, or a forced step of it is ready", two probes (the
# pauses' primary key, and an index holding the forced ready steps alone: steps_forced_ready),
# evaluated once. Postgres runs it as a one-time filter and MariaDB as a constant condition
# before reading the steps: a paused queue without a forced run is not read at all. SQLite
# evaluates such a condition for every row it visits, so there the gate is folded into the
# index key instead (Dialect.gate_in_queue_key: "queue = CASE WHEN <gate> THEN ? END", a
# key computed once; NULL seeks nothing). Measured on 10,000 ready rows of a paused queue:
# SQLite 33 ms -> 0.01 ms (100,000 rows), MariaDB 28 ms -> 0.25 ms, Postgres 0.03 ms.
QUEUE_GATE = """(NOT EXISTS (SELECT 1 FROM {pauses} WHERE kind = 'queue' AND name = ?)
                    OR EXISTS (SELECT 1 FROM {steps} f WHERE {forced_ready}))"""
"""The queue is not paused, or one of its forced steps is ready (parameters: queue, queue)."""

_READY_UNPAUSED = """
            WHERE status = 'ready' AND {ready_queue}
                AND (NOT EXISTS (SELECT 1 FROM {pauses} WHERE kind = 'queue' AND name = ?)
                    OR s.forced = 1)
                AND NOT EXISTS (
                    SELECT 1 FROM {pauses} p
                    WHERE p.kind = 'workflow' AND p.name = s.workflow AND s.forced = 0
                )"""
"""The one predicate of every claim's candidates (READY, READY_KEYED): ready steps of one queue
and its workflows, held by no pause unless their run was forced. ``{ready_queue}`` is the
queue, its workflows and QUEUE_GATE, as the dialect spells them (READY_QUEUE or
READY_QUEUE_KEYED_BY_GATE); :meth:`Queries.ready_params` orders its parameters."""

READY_QUEUE = """queue = ? AND workflow IN ({workflows})
                AND {queue_gate}"""
"""The queue, its workflows and QUEUE_GATE, where the engine evaluates the gate once."""

READY_QUEUE_KEYED_BY_GATE = """queue = CASE WHEN {queue_gate} THEN ? END
                AND workflow IN ({workflows})"""
"""The same, the gate folded into the index key (``Dialect.gate_in_queue_key``, SQLite)."""

READY = (
    """
            SELECT id FROM {steps} s"""
    + _READY_UNPAUSED
    + """
            ORDER BY priority DESC, due_at, id
            LIMIT {limit}"""
)
"""One queue's most urgent ready steps of workflows not paused, unless the queue is paused,
and those of forced runs: the subquery (or first statement) of every claim. ``{limit}`` is
``?``, or ROOM_LIMIT for a globally limited queue where the engine takes an expression there."""

UPDATE_RETURNING = """
            UPDATE {steps} SET {claimed_set}
            WHERE id IN ({ready}{skip_locked})
            RETURNING {claimed_columns}"""
"""A claim in one statement (SQLite)."""

# The same claim returning its runs' payloads too, where UPDATE ... FROM may
# return the joined table's columns (Postgres): one statement instead of two.
UPDATE_RETURNING_RUNS = """
            UPDATE {steps} s SET {claimed_set}
            FROM {runs} r
            WHERE r.id = s.run_id AND s.id IN ({ready}{skip_locked})
            RETURNING {claimed_columns_s}, {claim_run_columns_r}"""
"""A claim in one statement, with what the attempts need of their runs (Postgres)."""

MARK_CLAIMED = """
            UPDATE {steps} SET {claimed_set}
            WHERE id IN ({ids}) AND status = 'ready'"""
"""Lease steps a locking read chose (an engine without ``UPDATE ... RETURNING``)."""

MARK_CLAIMED_RETURNING_RUNS = """
            UPDATE {steps} s SET {claimed_set}
            FROM {runs} r
            WHERE r.id = s.run_id AND s.id IN ({ids}) AND s.status = 'ready'
            RETURNING {claimed_columns_s}, {claim_run_columns_r}"""
"""MARK_CLAIMED returning what CLAIMED_ROWS_RUNS reads, where ``UPDATE ... FROM`` may return the
joined table's columns (Postgres): a keyed claim's lease in one statement, not two."""

CLAIMED_ROWS = "SELECT {claimed_columns} FROM {steps} WHERE id IN ({ids})"
"""The claimed steps (MySQL and MariaDB also lock candidates through it)."""

CLAIMED_ROWS_RUNS = """
            SELECT {claimed_columns_s}, {claim_run_columns_r}
            FROM {steps} s JOIN {runs} r ON r.id = s.run_id
            WHERE s.id IN ({ids})"""
"""The claimed steps with what their attempts need of their runs."""

CLAIM_RUNS = """
            SELECT {claim_run_columns} FROM {runs} WHERE id IN ({ids})"""
"""What the attempts need of their runs, when the claim did not return it."""

CLAIM_INPUTS = """
            SELECT run_id, name, output FROM {steps}
            WHERE run_id IN ({ids}) AND status = 'succeeded' AND name IN ({names})"""
"""The outputs of the claimed steps' parents: their inputs."""

# -- leases -----------------------------------------------------------------------------------
RENEW = """
            UPDATE {steps} SET lease_until = ?
            WHERE status = 'running' AND {held}"""
"""Extend the leases still held, all in one statement."""

LEASE_STATES = """
            SELECT id, lease_token, status FROM {steps} WHERE id IN ({ids})"""
"""Why some leases of a renewal did not hold: lost, or the step was cancelled."""

HEARTBEAT = """
            UPDATE {steps} SET lease_until = ?, heartbeat_at = ?
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""Extend one lease and record the heartbeat (fenced)."""

PROGRESS = """
            UPDATE {steps} SET progress = ?, heartbeat_at = ?
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""Store an attempt's progress (fenced)."""

LEASE_STATE = "SELECT status, lease_token FROM {steps} WHERE id = ?"
"""Why a fenced write changed nothing: the lease was lost, or the step cancelled."""

HAND_BACK = """
            UPDATE {steps}
            SET status = 'ready', due_at = ?, lease_token = NULL, lease_until = NULL
            WHERE status = 'running' AND {held}"""
"""Make held attempts ready again at once (a client stopping hands back what it claimed)."""

EXPIRED = """
            SELECT id, run_id, workflow, name, attempt, failures, reclaims, lease_token,
                concurrency_key
            FROM {steps}
            WHERE status = 'running' AND lease_until < ? AND workflow IN ({workflows})
            ORDER BY lease_until
            LIMIT ?"""
"""Running steps whose lease ran out, oldest first."""

REQUEUE_EXPIRED = """
            UPDATE {steps}
            SET status = 'ready', due_at = ?, reclaims = reclaims + 1,
                lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running' AND lease_until < ?"""
"""Requeue one expired attempt, fenced by the lease it had (and that lease still expired)."""

# -- outcomes (the run row is locked first, always: one lock order, no deadlock) ---------------
STEP_OF = "SELECT run_id, children FROM {steps} WHERE id = ?"
"""The run and children of one step (a sleep woken, a wait timed out)."""

STEPS_OF = "SELECT id, run_id, children, kind, concurrency_key FROM {steps} WHERE id IN ({ids})"
"""The runs and children of a batch's steps (their runs are then locked by ``LOCK_RUNS``)."""

STEPS_WITH_RUNS = """
            SELECT s.id, s.run_id, s.children, s.kind, r.steps_left, s.concurrency_key
            FROM {steps} s JOIN {runs} r ON r.id = s.run_id
            WHERE s.id IN ({ids})
            ORDER BY r.id{lock_runs_joined}"""
"""A batch's steps with their runs' steps left, locking the runs in id order (one statement)."""

LOCK_RUN = "SELECT state, steps_left FROM {runs} WHERE id = ?{for_update}"
"""Lock one run; read its state and its steps left."""

# The drivers' runs_overdue index holds the unfinished runs only (Postgres, SQLite: partial;
# MySQL: led by state), by workflow then run_at: this reads the overdue ones, never a
# finished run (Cap.RUN_TIMEOUT).
OVERDUE_RUNS = """
            SELECT id FROM {runs}
            WHERE state = 'active' AND workflow = ? AND run_at <= ?
            ORDER BY run_at
            LIMIT ?"""
"""The unfinished runs of a workflow due at or before a time, oldest first."""

# Through the unique id index, in id order: InnoDB locks the rows as it reads them.
LOCK_RUNS = """
            SELECT id, steps_left FROM {runs} WHERE id IN ({ids}) ORDER BY id{for_update}"""
"""Lock several runs, in id order; read their steps left."""

SUCCEED = """
            UPDATE {steps}
            SET status = 'succeeded', output = ?, finished_at = ?, due_at = NULL,
                lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""One attempt succeeded (fenced)."""

# Many successes in one statement (one round trip): each output picked by step id,
# each row fenced by its own lease. ELSE keeps the column's type for the CASE.
SUCCEED_MANY = """
            UPDATE {steps}
            SET status = 'succeeded', output = CASE id {whens} ELSE output END,
                finished_at = ?, due_at = NULL, lease_token = NULL, lease_until = NULL
            WHERE status = 'running' AND {held}"""
"""A batch's attempts succeeded; the row count is how many leases held."""

RETRY = """
            UPDATE {steps}
            SET status = ?, due_at = ?, failures = failures + 1, error = ?, reclaims = 0,
                lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""An attempt failed and will be retried (ready, or scheduled for later) (fenced)."""

FAIL = """
            UPDATE {steps}
            SET status = 'failed', failures = failures + 1, error = ?, finished_at = ?,
                due_at = NULL, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""An attempt failed for good (fenced); its run fails with it."""

SNOOZE = """
            UPDATE {steps}
            SET status = ?, due_at = ?, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""An attempt asked to run again later, not counted as a failure (fenced)."""

SLEEP = """
            UPDATE {steps}
            SET status = 'sleeping', due_at = ?, output = ?, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""A sleep step sleeps until ``due_at`` (fenced)."""

WAIT = """
            UPDATE {steps}
            SET status = 'waiting', due_at = ?, signal_name = ?, lease_token = NULL,
                lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""A wait step waits for a signal until its deadline (fenced)."""

OLDEST_SIGNAL = """
            SELECT seq, payload FROM {signals}
            WHERE run_id = ? AND name = ?
            ORDER BY seq
            LIMIT 1"""
"""The oldest kept signal a wait step asks for: delivered at once if there is one."""

CONSUME_SIGNAL = "DELETE FROM {signals} WHERE seq = ?"
"""A kept signal was delivered."""

RESOLVE_WAIT = """
            UPDATE {steps}
            SET status = 'succeeded', output = ?, finished_at = ?, due_at = NULL
            WHERE id = ? AND status = 'waiting'"""
"""A waiting step got its signal (run row locked)."""

RELEASE_CHILDREN = """
            UPDATE {steps} SET parents_left = parents_left - 1
            WHERE run_id = ? AND name IN ({names})"""
"""Count one more succeeded parent for each child of a step."""

READY_CHILDREN = """
            UPDATE {steps} SET status = 'ready', due_at = ?
            WHERE run_id = ? AND name IN ({names}) AND parents_left = 0 AND status = 'blocked'"""
"""Make the children whose parents all succeeded ready (fan-in, under the run's lock)."""

COUNT_STEPS_DONE = "UPDATE {runs} SET steps_left = steps_left - ? WHERE id = ?"
"""Count a run's steps that succeeded in a transaction (once per run, not per step)."""

RUN_FAILURES = """
            SELECT r.run_at, (SELECT COALESCE(SUM(s.failures), 0) FROM {steps} s
                              WHERE s.run_id = r.id)
            FROM {runs} r WHERE r.id = ?"""
"""A locked run's ``run_at`` and its steps' failed attempts so far: what a failure policy
(``Failed.retry_stands``) judges a retry by. Failures only, off the hot path; the steps are
read through their ``(run_id, name)`` key."""

END_RUN = """
            UPDATE {runs}
            SET state = ?, finished_at = ?, error = ?, active_key = NULL, fifo_key = NULL
            WHERE id = ? AND state = 'active'"""
"""Finish a run (failed or cancelled) and release its idempotency key (and its fifo key's
turn: the next run of the key becomes its head)."""

UNFINISHED_STEPS = """
            SELECT id, concurrency_key FROM {steps} WHERE run_id = ? AND status IN ({unfinished})"""
"""The steps of a run that can still change: cancelled when the run ends."""

CANCEL_STEPS = """
            UPDATE {steps} SET status = 'cancelled', finished_at = ?, due_at = NULL
            WHERE id IN ({ids})"""
"""Cancel the unfinished steps of a run that ended."""

DROP_SIGNALS = "DELETE FROM {signals} WHERE run_id = ?"
"""Forget the kept signals of a run that ended."""

DROP_SIGNALS_OF = "DELETE FROM {signals} WHERE run_id IN ({ids})"
"""Forget the kept signals of the runs that succeeded in a transaction."""

# By id only: these runs are locked and every step of each succeeded, so each is
# still active. (A state condition here can send a planner down the state index.)
# An active run keeps an error only once one of its steps was cancelled (Cap.CANCEL_STEP,
# sql/_admin.py): it ends cancelled when the rest of it is done, not succeeded.
RUNS_SUCCEEDED = """
            UPDATE {runs}
            SET steps_left = 0,
                state = CASE WHEN error IS NULL THEN 'succeeded' ELSE 'cancelled' END,
                finished_at = ?, active_key = NULL, fifo_key = NULL
            WHERE id IN ({ids})"""
"""End the runs none of whose steps is left (succeeded, or cancelled by an operator), and
release their idempotency keys."""

# -- due work ---------------------------------------------------------------------------------
DUE = """
            SELECT id, run_id, status FROM {steps}
            WHERE status IN ('scheduled', 'sleeping', 'waiting') AND due_at <= ?
                AND workflow IN ({workflows})
            ORDER BY due_at
            LIMIT ?"""
"""Scheduled, sleeping and waiting steps whose time came, oldest first."""

PROMOTE = """
            UPDATE {steps} SET status = 'ready'
            WHERE id IN ({ids}) AND status = 'scheduled'"""
"""Scheduled steps that fell due become ready (no run state changes: no run lock)."""

WAKE_SLEEPER = """
            UPDATE {steps} SET status = 'succeeded', finished_at = ?, due_at = NULL
            WHERE id = ? AND status = 'sleeping' AND due_at <= ?"""
"""A sleep ended (run row locked)."""

TIME_OUT_WAIT = """
            UPDATE {steps}
            SET status = 'failed', failures = failures + 1, error = ?, finished_at = ?,
                due_at = NULL
            WHERE id = ? AND status = 'waiting' AND due_at <= ?"""
"""A wait reached its deadline without its signal (run row locked); its run fails."""

STEP_SIGNAL = "SELECT signal_name, attempt, name FROM {steps} WHERE id = ?"
"""What a timed-out wait waited for, for its error."""

# -- signals and cancel ------------------------------------------------------------------------
WAITING_FOR = """
            SELECT id, children FROM {steps}
            WHERE run_id = ? AND status = 'waiting' AND signal_name = ?
            ORDER BY position
            LIMIT 1"""
"""The first step of a run waiting for a signal (run row locked)."""

INSERT_SIGNAL = """
            INSERT INTO {signals} (run_id, name, payload, created_at) VALUES (?, ?, ?, ?)"""
"""Keep a signal no step waits for yet."""

# -- reading ----------------------------------------------------------------------------------
GET_RUN = "SELECT {run_columns} FROM {runs} WHERE id = ?"
"""One run."""

GET_STEPS = """
            SELECT {step_columns} FROM {steps} WHERE run_id = ? ORDER BY position"""
"""The steps of one run, in the workflow's order."""

LIST_RUNS = """
            SELECT {run_columns_r} FROM {runs} r
            WHERE 1 = 1{filters}
            ORDER BY r.seq DESC
            LIMIT ?"""
"""Runs newest first, filtered by :func:`~cairnflow.sql._filters.run_filter` (and the cursor)."""

LIST_RUNS_BY_LABEL = """
            SELECT {run_columns_r} FROM {run_labels} lp CROSS JOIN {runs} r
            WHERE {driving} AND r.id = lp.run_id{filters}
            ORDER BY r.seq DESC
            LIMIT ?"""
"""Runs with a rare label (prefix or exact), driven from the label index: its rows give the
few runs, each read by id, then sorted (``CROSS JOIN`` keeps SQLite's loops in that order; the other
engines plan joins by cost anyway)."""

COUNT_RUNS_BY_LABEL = """
            SELECT COUNT(*) FROM {run_labels} lp CROSS JOIN {runs} r
            WHERE {driving} AND r.id = lp.run_id{filters}"""
"""How many runs with a rare label a filter matches."""

LABELS_WITHIN = """
            SELECT COUNT(*) FROM (
                SELECT 1 FROM {run_labels} lp WHERE {driving} LIMIT ?
            ) x"""
"""How many label rows a label (prefix or exact) has, up to a bound (the value index alone)."""

COUNT_RUNS = """
            SELECT COUNT(*) FROM {runs} r
            WHERE 1 = 1{filters}"""
"""How many runs a filter matches (``RunQuery.count``)."""

STEP_COUNTS = """
            SELECT run_id, status, COUNT(*) FROM {steps}
            WHERE run_id IN ({ids})
            GROUP BY run_id, status"""
"""How many steps of each run have each status."""

# -- schedules (the fire of a tick locks its schedule row first, then writes ticks and runs) ----
# A schedule is read with whether the run of its last fire is finished (overlap: skip): a run
# that is not there (never fired, or deleted since) counts as finished, as does every state but
# 'active'. One join by the runs' unique id, instead of a second statement per schedule.
_SCHEDULES_READ = """
            SELECT {schedule_columns_s}, CASE WHEN r.state = 'active' THEN 0 ELSE 1 END
            FROM {schedules} s LEFT JOIN {runs} r ON r.id = s.last_run_id"""

GET_SCHEDULE = (
    _SCHEDULES_READ
    + """
            WHERE s.id = ?"""
)
"""One schedule, as saving returns it."""

LIST_SCHEDULES = (
    _SCHEDULES_READ
    + """
            WHERE 1 = 1{filters}
            ORDER BY s.workflow, s.name"""
)
"""Every schedule (of some workflows), by workflow and name."""

# Through the (workflow, next_fire) index: a client reads its own workflows' due rows only,
# and sorts no more than those.
DUE_SCHEDULES = (
    _SCHEDULES_READ
    + """
            WHERE s.workflow IN ({workflows}) AND s.next_fire <= ?
            ORDER BY s.next_fire, s.id
            LIMIT ?"""
)
"""Schedules whose next fire came, earliest first: what a housekeeping pass fires."""

# MySQL assigns a single-table UPDATE's SET list from left to right, each assignment seeing
# the ones before it: next_fire is decided first, while fingerprint still holds the stored one.
UPDATE_SCHEDULE = """
            UPDATE {schedules}
            SET next_fire = CASE WHEN fingerprint = ? THEN next_fire ELSE ? END,
                spec = ?, fingerprint = ?, updated_at = ?
            WHERE id = ?"""
"""Save a schedule that exists: a redeploy of the same declaration keeps its next fire, its
pause and its last fire."""

INSERT_SCHEDULE = """
            INSERT INTO {schedules} ({schedule_columns})
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
"""Save a schedule that is not there yet (as given)."""

DELETE_SCHEDULE = "DELETE FROM {schedules} WHERE id = ?"
"""Remove a schedule (its row first: the lock a fire of it would take)."""

# By the primary key's leading column: no secondary range, so no gap locks on InnoDB.
DELETE_TICKS_OF = "DELETE FROM {ticks} WHERE schedule_id = ?"
"""Forget the ticks of a removed schedule."""

LOCK_SCHEDULE = """
            SELECT next_fire, last_fire, last_run_id FROM {schedules} WHERE id = ?{for_update}"""
"""Lock one schedule (every fire of it queues here); read what a fire compares and moves."""

INSERT_TICK = "INSERT INTO {ticks} ({tick_columns}) VALUES (?, ?, ?, ?, ?, ?, ?)"
"""Record a tick (``executemany``): a tick recorded already is refused by the primary key."""

FIRED = """
            UPDATE {schedules} SET next_fire = ?, last_fire = ?, last_run_id = ?
            WHERE id = ?"""
"""Move the locked schedule's next fire and remember its last fired tick and run."""

# COALESCE keeps resumed_at when pausing (the value bound is NULL) and sets it when resuming.
PAUSE_SCHEDULE = """
            UPDATE {schedules}
            SET paused = ?, resumed_at = COALESCE(?, resumed_at), updated_at = ?
            WHERE id = ?"""
"""Pause a schedule, or resume it from now (ticks due before never fire)."""

# The primary key (schedule_id, at) read backwards: no sort, stops after LIMIT rows.
TICK_HISTORY = """
            SELECT {tick_columns} FROM {ticks}
            WHERE schedule_id = ?
            ORDER BY at DESC
            LIMIT ?"""
"""A schedule's last recorded ticks, newest first."""

# A plain read, oldest first through the recorded_at index; "a newer tick of the schedule
# exists" is one primary-key probe per row and keeps each schedule's newest tick. The rows
# are then deleted by primary key (DELETE_TICKS), never by this range: on InnoDB a DELETE
# over a secondary range takes gap locks, which deadlock with the inserts of a fire.
PRUNABLE_TICKS = """
            SELECT t.schedule_id, t.at FROM {ticks} t
            WHERE t.recorded_at < ?
                AND EXISTS (
                    SELECT 1 FROM {ticks} n WHERE n.schedule_id = t.schedule_id AND n.at > t.at
                )
            ORDER BY t.recorded_at
            LIMIT ?"""
"""The keys of ticks recorded before a time, oldest first, never a schedule's newest."""

DELETE_TICKS = "DELETE FROM {ticks} WHERE {tick_keys}"
"""Delete ticks by primary key (``{tick_keys}``: one ``schedule_id = ? AND at = ?`` each)."""

# -- leadership (a claim locks its role's row, then writes it; nothing ever deletes one) ------
LOCK_LEADER = "SELECT {leader_columns} FROM {leaders} WHERE role = ?{for_update}"
"""Lock a role's lease (every claim of the role queues here); read who holds it until when."""

READ_LEADER = "SELECT {leader_columns} FROM {leaders} WHERE role = ?"
"""Who holds (or last held) a role's lease, without locking it (an operator's look)."""

INSERT_LEADER = "INSERT INTO {leaders} ({leader_columns}) VALUES (?, ?, ?, ?)"
"""The first claim of a role: its term 1. Of two first claimers, the primary key refuses one."""

# One statement for a renewal (same node and term) and a takeover (a new node, term + 1):
# the claim decides the values from the row it locked.
HOLD_LEADER = "UPDATE {leaders} SET node = ?, term = ?, lease_until = ? WHERE role = ?"
"""Write the locked role's holder, term and lease."""

# lease_until 0 is before every lease_now: the next claim takes the role at once, term + 1.
RESIGN_LEADER = "UPDATE {leaders} SET lease_until = 0 WHERE role = ? AND node = ?"
"""End a node's lease of a role now (nothing, if another node holds it)."""

# -- pauses (a row per paused queue or workflow; every claim reads them, nothing caches them) ---
FIND_PAUSE = "SELECT paused_at FROM {pauses} WHERE kind = ? AND name = ?"
"""Is a queue or workflow paused already (a second pause keeps the first's time)."""

INSERT_PAUSE = "INSERT INTO {pauses} ({pause_columns}) VALUES (?, ?, ?)"
"""Pause a queue or workflow. Of two pausers inserting at once, the primary key refuses one."""

DELETE_PAUSE = "DELETE FROM {pauses} WHERE kind = ? AND name = ?"
"""Resume a queue or workflow (by the primary key)."""

LIST_PAUSES = "SELECT {pause_columns} FROM {pauses} ORDER BY kind, name"
"""Every pause, by kind and name."""

# -- the journal (Cap.JOURNAL): one row per memoised result, read and written by primary key ---
READ_JOURNAL = "SELECT value FROM {journal} WHERE scope = ? AND step = ? AND name = ?"
"""The value recorded under a key (the primary key: one probe)."""

# The fence of a step's record: the attempt's step row, locked, with its lease still held.
# The record commits with the lock held, so a reclaim (which writes the same row) either
# ran before (the lease is gone: nothing is recorded) or waits until the record is in.
HOLD_STEP = """
            SELECT id FROM {steps}
            WHERE id = ? AND lease_token = ? AND status = 'running'{for_update}"""
"""Lock an attempt's step row while its lease is held (the primary key); no row: not held."""

INSERT_JOURNAL = """
            INSERT INTO {journal} (scope, step, name, value, recorded_at)
            VALUES (?, ?, ?, ?, ?)"""
"""Record a result. Of two recorders of one key, the primary key refuses the second, which
reads the first's value (the first record wins)."""

# -- named locks (Cap.LOCKS): a row per name with its holder's token and expiry ---------------
# Never a session or advisory lock: those end with their connection, and a pool's connection
# outlives (or dies before) the code that took the lock. Every statement is by primary key.
LOCK_NAMED = "SELECT {lock_columns} FROM {locks} WHERE name = ?{for_update}"
"""Lock a name's row (every taker of the name queues here); read who holds it until when."""

READ_NAMED = "SELECT {lock_columns} FROM {locks} WHERE name = ?"
"""A name's row as it stands, not locked (an operator's or a test's look)."""

INSERT_NAMED = "INSERT INTO {locks} ({lock_columns}) VALUES (?, ?, ?, ?)"
"""Take a name nobody holds (no row). Of two first takers, the primary key refuses one."""

TAKE_NAMED = "UPDATE {locks} SET token = ?, taken_at = ?, expires_at = ? WHERE name = ?"
"""Take the locked row of a name whose lock expired (or renew the holder's)."""

EXTEND_NAMED = """
            UPDATE {locks} SET expires_at = ?
            WHERE name = ? AND token = ? AND expires_at > ?"""
"""Move the expiry of a lock its token holds and that has not expired (one statement)."""

RELEASE_NAMED = "DELETE FROM {locks} WHERE name = ? AND token = ?"
"""Free a name, only for the token that holds it: the row goes, the table stays small."""

# -- global queue limits (docs/claim.md, 3: lock the limiter, count under it) -----------------
# A queue claimed with a global limit locks its row of the limits table, then counts the
# queue's running steps, and takes at most the limit minus that count: two claimers of the
# queue serialise on the row, so neither counts before the other's claim has committed.
# The count is recomputed by every claim, never kept (a kept counter drifts the first time
# a path forgets it); unlimited queues never read the table.
FIND_LIMITER = "SELECT name FROM {limits} WHERE kind = ? AND name = ?"
"""Does the limiter row exist (created once per queue, before the first claim that needs it)."""

INSERT_LIMITER = "INSERT INTO {limits} (kind, name) VALUES (?, ?)"
"""Create a limiter row. Of two creators inserting at once, the primary key refuses one."""

LOCK_LIMITER = "SELECT name FROM {limits} WHERE kind = ? AND name = ?{for_update}"
"""Lock a queue's limiter row: every limited claim of the queue queues here (SQLite: its
one writer already serialises them)."""

COUNT_RUNNING = "SELECT count(*) FROM {steps} WHERE queue = ? AND status = 'running'"
"""The queue's attempts running on every client, leases expired or not (an expired one counts
until it is reclaimed: the limit is never exceeded). Read by the running-by-queue index."""

# A claim's LIMIT that counts the queue's running attempts itself (docs/claim.md, 3), where the
# engine takes an expression there (Dialect.limit_expressions: Postgres, SQLite). The claim
# statement runs after the statement that locked the limiter row, so (READ COMMITTED: a new
# snapshot per statement) its count sees every claim committed before the lock was granted;
# on Postgres the lock, the claim and the COMMIT then go out in one round trip, where reading
# the count first cost two more. A limiter row deleted by hand since it was created locks
# nothing: the claim then takes nothing (the EXISTS), and the row is created again before
# the next claim.
ROOM_LIMIT = """CASE WHEN EXISTS (SELECT 1 FROM {limits} WHERE kind = 'queue' AND name = ?)
                THEN {greatest}(0, {least}(?, ? - (
                    SELECT count(*) FROM {steps} WHERE queue = ? AND status = 'running')))
                ELSE 0 END"""
"""At most ``?`` steps, and no more than the queue's global limit ``?`` minus its running."""

# -- rate limits (docs/claim.md, 5: a bucket's arrival time, moved under its row's lock) -------
# A bucket is a row of limits whose tat column holds its theoretical arrival time (GCRA,
# cairnflow/_rates.py): a take locks the row, reads tat, and writes the new one in the same
# transaction; a refused take writes nothing. A rate-limited queue's claim does the same with
# its queue's bucket (kind 'queue-rate'), charging what it leased before it commits.
LOCK_BUCKET = "SELECT tat FROM {limits} WHERE kind = ? AND name = ?{for_update}"
"""Lock a bucket's row and read its arrival time (NULL: never taken from)."""

SET_BUCKET = "UPDATE {limits} SET tat = ? WHERE kind = ? AND name = ?"
"""Write a bucket's new arrival time, under the lock :data:`LOCK_BUCKET` took."""

# -- concurrency keys and fifo keys (docs/claim.md, 4: a counter per key, under its lock) -------
# A step carries its key (and the key's limit) from enqueue on; a key's row of limits
# (kind 'key') counts its running attempts. The counter moves in the transactions that change
# the lease, joined to that change: +1 for each step a claim leases, -1 for each lease a
# fenced write ended (its row count said so), never beside it. Key rows are locked in name
# order, always the last locks a transaction takes (after runs, steps and queue limiters).
# Keyed claims only (ClaimRequest.keys): a plain claim keeps READY.
_KEY_HAS_ROOM = """
                AND NOT EXISTS (
                    SELECT 1 FROM {limits} l
                    WHERE l.kind = 'key' AND l.name = s.concurrency_key
                        AND (l.running >= s.key_limit
                             OR (l.head IS NOT NULL AND l.head <> s.run_id
                                 AND EXISTS (
                                     SELECT 1 FROM {runs} h
                                     WHERE h.id = l.head AND h.fifo_key = l.name
                                 )))
                )"""
"""READY_KEYED's skip: a step whose key is full, or whose fifo key's turn is another unfinished
run's, read without a lock."""

READY_KEYED = (
    """
            SELECT id, run_id, concurrency_key, key_limit FROM {steps} s"""
    + _READY_UNPAUSED
    + _KEY_HAS_ROOM
    + """
            ORDER BY priority DESC, due_at, id
            LIMIT ?"""
)
"""A keyed claim's candidates: READY (its pauses, and forced runs passing them), skipping
(without locking) the steps whose key is full or whose fifo key's turn belongs to another
unfinished run. A step without a key matches no
key row (``name = NULL`` is never true). Exact admission follows under the keys' locks."""

INSERT_KEY = """
            INSERT INTO {limits} (kind, name, running, fifo)
            VALUES ('key', ?, 0, ?){keep_existing}"""
"""Create a key's row at enqueue unless it exists (``executemany`` in name order)."""

# One statement per key, in name order: an exact primary-key lookup on every engine. (One
# "name IN (...)" for all of them was planned on Postgres as a scan of every key row with the
# names as a filter, 16 ms at 2,000 keys: measured, 2026-12-01.) Where the engine pipelines
# (Postgres) the statements go out together, one round trip; elsewhere LOCK_KEYS.
LOCK_KEY = """
            SELECT name, running, fifo, head FROM {limits}
            WHERE kind = 'key' AND name = ?{for_update}"""
"""Lock a key's row; read its count and fifo head."""

# MySQL and MariaDB read "kind = 'key' AND name IN (...)" as ranges of the primary key, in
# its order (EXPLAIN: range on PRIMARY), and lock the rows as they read them: name order,
# one statement where LOCK_KEY took one round trip per key (a claim of 16 candidates with
# keys of their own: 16). SQLite locks nothing: one statement is simply fewer.
LOCK_KEYS = """
            SELECT name, running, fifo, head FROM {limits}
            WHERE kind = 'key' AND name IN ({ids})
            ORDER BY name{for_update}"""
"""Lock several keys' rows, in name order; read their counts and fifo heads."""

# Postgres (Dialect.key_arrays): the names as one array parameter, each probed by primary
# key in a LATERAL subquery that locks its row, in the array's order (name order: the caller
# sorts them). A subquery with FOR UPDATE is never flattened into a join, so the plan is a
# nested loop whatever the statistics say: the plain join of the array to the key rows was
# planned as a hash join over every key row while the table was young and unanalysed (3 ms
# for 8 keys among 5,000, against 0.5 ms for one LOCK_KEY; measured 2026-12-02). One
# statement where LOCK_KEY was one per key (a claim of 8 runs under keys of their own: 8).
LOCK_KEYS_ARRAY = """
            SELECT k.name, k.running, k.fifo, k.head
            FROM unnest(?::text[]) AS wanted (name)
            CROSS JOIN LATERAL (
                SELECT l.name, l.running, l.fifo, l.head FROM {limits} l
                WHERE l.kind = 'key' AND l.name = wanted.name
                FOR UPDATE
            ) k"""
"""LOCK_KEYS with the names as an array, locked in its order (Postgres)."""

_KEYED_CANDIDATES = (
    """
            WITH candidates AS MATERIALIZED (
            SELECT id, run_id, concurrency_key, key_limit, priority, due_at FROM {steps} s"""
    + _READY_UNPAUSED
    + _KEY_HAS_ROOM
    + """
            ORDER BY priority DESC, due_at, id
            LIMIT ?{skip_locked}
            ), """
)
"""The one-queue keyed claims' first WITH clause (READY_KEYED_WITH_KEYS, CLAIM_KEYED): the
candidates, their step rows locked, locked ones skipped."""


def _locked_keys(released: str) -> str:
    """The WITH clause that locks the candidates' keys and the ``released`` ones (a SELECT of
    names), in name order, each by primary key in a LATERAL subquery."""
    return (
        """locked_keys AS MATERIALIZED (
                SELECT k.name, k.running, k.fifo, k.head
                FROM (
                    SELECT concurrency_key AS name FROM candidates
                    WHERE concurrency_key IS NOT NULL
                    UNION
                    """
        + released
        + """
                    ORDER BY 1
                ) AS wanted
                CROSS JOIN LATERAL (
                    SELECT l.name, l.running, l.fifo, l.head FROM {limits} l
                    WHERE l.kind = 'key' AND l.name = wanted.name
                    FOR UPDATE
                ) k
            )"""
    )


# Postgres (Dialect.key_arrays), a claim of one queue: its candidates and their keys' rows,
# locked, in one statement, where READY_KEYED and LOCK_KEYS_ARRAY took a round trip each.
# (One round trip less; keyed W2 did not move with it, 0.71x against 0.70x of plain: the
# time is in the server's work, not in waiting for it; measured 2026-12-02.) The lock order is
# the two statements': the candidates' step rows first, skipped when locked (never waited
# on); then the keys, in name order. The keys' subquery sorts every candidate's key (with
# the names an outcome batch releases, the array parameter) before its first lock, so it
# reads the whole CTE of candidates, and with it takes all their locks, first. Each key is
# probed by primary key in a LATERAL subquery, as in LOCK_KEYS_ARRAY. Rows: ('c', step id,
# run id, key, key limit, NULL, NULL) per candidate, in claim order, then ('k', NULL, NULL,
# name, count, fifo, head) per key row found.
READY_KEYED_WITH_KEYS = (
    _KEYED_CANDIDATES
    + _locked_keys("SELECT unnest(?::text[])")
    + """
            SELECT part, id, run_id, name, number, fifo, head FROM (
                SELECT 'c' AS part, id, run_id, concurrency_key AS name, key_limit AS number,
                    NULL::integer AS fifo, NULL::text AS head, priority, due_at
                FROM candidates
                UNION ALL
                SELECT 'k', NULL, NULL, name, running, fifo, head, NULL, NULL
                FROM locked_keys
            ) AS found
            ORDER BY part, priority DESC, due_at, id"""
)
"""READY_KEYED and LOCK_KEYS_ARRAY in one statement (Postgres, a claim of one queue)."""

_RELOCK_WANTED = """
                CROSS JOIN LATERAL (
                    SELECT name FROM {limits}
                    WHERE kind = 'key' AND name = wanted.name
                    FOR UPDATE
                ) k"""
"""Each ``wanted.name``'s key row, locked by primary key in a LATERAL subquery (never flattened
into a join: a nested loop whatever the statistics), in ``wanted``'s order: the key moves'
(MOVE_KEYS_ARRAY, CLAIM_KEYED) way to update in name order."""

# Postgres (Dialect.claims_keyed_in_one), a keyed claim of one queue: the whole claim in one
# statement, Keys.admit's rules in SQL, sent in the claim's pipeline as the plain claim's
# UPDATE is (behind an outcome batch's run writes, before its COMMIT): no round trip of its
# own. The two-step claim read its candidates and their keys (a round trip), admitted them in
# Python and sent the lease: keyed W2 on Postgres 0.63x of plain; in one statement, 0.8x (the
# round trip, not the server's work, was the cost: a claim's wait on its reply is also a
# wait for the worker threads' interpreter lock; measured 2026-12-02).
# - candidates: READY_KEYED_WITH_KEYS's, their step rows locked (locked ones skipped).
# - locked_keys: the rows of the candidates' keys and of those the same transaction releases
#   (``released``: names and counts, an outcome batch's), locked in name order, as in
#   READY_KEYED_WITH_KEYS. A row locked after a wait is read as its holder committed it.
# - turns: a fifo key's run whose turn it is: its recorded head while unfinished, else its
#   oldest unfinished run (the runs' fifo index), as Keys._head. Read in the statement's
#   snapshot, which may predate a wait for the key's lock: a head that finished meanwhile
#   still looks unfinished, so the error is an admission too few (the next claim moves the
#   turn on), never a run out of its turn (runs only join a key behind its head).
# - admitted: a candidate without a key; one whose key row exists, whose run holds its fifo
#   key's turn, and which is within its limit counting the key's running attempts, less what
#   the transaction releases, plus the candidates of its key before it (claim order).
# - moved: each key's count by what was admitted less what was released, and a fifo key's
#   turn when it moved; created: the row of a candidate's key that was missing (deleted by
#   hand), for the next claim. Data-modifying WITH clauses run whether read or not.
# The lease is MARK_CLAIMED_RETURNING_RUNS over the admitted. Parameters: the ready
# predicate's, the candidates' LIMIT, the released names and counts, then {claimed_set}'s.
CLAIM_KEYED = (
    _KEYED_CANDIDATES
    + """released AS MATERIALIZED (
                SELECT name, count FROM unnest(?::text[], ?::integer[]) AS given (name, count)
            ), """
    + _locked_keys("SELECT name FROM released")
    + """, turns AS MATERIALIZED (
                SELECT k.name, k.head AS recorded,
                    CASE WHEN EXISTS (
                        SELECT 1 FROM {runs} h WHERE h.id = k.head AND h.fifo_key = k.name
                    ) THEN k.head
                    ELSE (SELECT f.id FROM {runs} f WHERE f.fifo_key = k.name
                          ORDER BY f.seq LIMIT 1)
                    END AS head
                FROM locked_keys k
                WHERE k.fifo = 1
            ), ranked AS (
                SELECT c.id, c.concurrency_key, c.key_limit,
                    row_number() OVER (
                        PARTITION BY c.concurrency_key ORDER BY c.priority DESC, c.due_at, c.id
                    ) AS nth
                FROM candidates c
                LEFT JOIN turns t ON t.name = c.concurrency_key
                WHERE t.name IS NULL OR t.head = c.run_id
            ), admitted AS MATERIALIZED (
                SELECT r.id, r.concurrency_key FROM ranked r
                LEFT JOIN locked_keys k ON k.name = r.concurrency_key
                LEFT JOIN released g ON g.name = r.concurrency_key
                WHERE r.concurrency_key IS NULL
                    OR (k.name IS NOT NULL
                        AND k.running - COALESCE(g.count, 0) + r.nth <= r.key_limit)
            ), moves AS MATERIALIZED (
                SELECT k.name, t.head AS turn,
                    (SELECT count(*) FROM admitted a WHERE a.concurrency_key = k.name)
                    - COALESCE(g.count, 0) AS delta,
                    t.name IS NOT NULL AND t.head IS DISTINCT FROM t.recorded AS turned
                FROM locked_keys k
                LEFT JOIN released g ON g.name = k.name
                LEFT JOIN turns t ON t.name = k.name
            ), moved AS (
                UPDATE {limits} l
                SET running = l.running + m.delta,
                    head = CASE WHEN m.turned THEN m.turn ELSE l.head END
                FROM (
                    SELECT k.name, wanted.delta, wanted.turn, wanted.turned
                    FROM unnest(
                        ARRAY(SELECT name FROM moves WHERE delta <> 0 OR turned ORDER BY name),
                        ARRAY(SELECT delta FROM moves WHERE delta <> 0 OR turned ORDER BY name),
                        ARRAY(SELECT turn FROM moves WHERE delta <> 0 OR turned ORDER BY name),
                        ARRAY(SELECT turned FROM moves WHERE delta <> 0 OR turned ORDER BY name)
                    ) AS wanted (name, delta, turn, turned)"""
    + _RELOCK_WANTED
    + """
                ) m
                WHERE l.kind = 'key' AND l.name = m.name
            ), created AS (
                INSERT INTO {limits} (kind, name, running, fifo)
                SELECT DISTINCT 'key', c.concurrency_key, 0, 0 FROM candidates c
                WHERE c.concurrency_key IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM locked_keys k WHERE k.name = c.concurrency_key)
                ON CONFLICT DO NOTHING
            )
            UPDATE {steps} s SET {claimed_set}
            FROM {runs} r
            WHERE r.id = s.run_id AND s.id IN (SELECT id FROM admitted)
            RETURNING {claimed_columns_s}, {claim_run_columns_r}"""
)
"""A keyed claim of one queue in one statement: READY_KEYED_WITH_KEYS, Keys.admit and the
lease (Postgres)."""

MOVE_KEY = "UPDATE {limits} SET running = running + ? WHERE kind = 'key' AND name = ?"
"""Add a (signed) number of attempts to a key's count (``executemany``, in name order)."""

MOVE_KEYS = """
            UPDATE {limits} SET running = running + CASE name {moves} END
            WHERE kind = 'key' AND name IN ({ids})"""
"""MOVE_KEY for several keys in one statement (``{moves}``: ``WHEN ? THEN ?`` per key), where
``executemany`` sends one statement per row (PyMySQL does, for an UPDATE)."""

# Postgres (Dialect.key_arrays): every key's move in one statement, where MOVE_KEY went once
# per key. A claim of 16 runs under keys of their own, after an outcome batch that ended 16
# others, moves 32 keys: one statement of 0.5 ms on the server where 32 executions of
# MOVE_KEY were sent (keyed W2 on Postgres: 0.70x -> 0.73x of plain; measured 2026-12-02).
# The keys are locked first, in the array's order (name order), by a LATERAL subquery as in
# LOCK_KEYS_ARRAY, whatever join the update is planned as: a release that is no claim's
# locks in the claim's order too.
MOVE_KEYS_ARRAY = (
    """
            UPDATE {limits} l SET running = l.running + m.delta
            FROM (
                SELECT k.name, wanted.delta
                FROM unnest(?::text[], ?::integer[]) AS wanted (name, delta)"""
    + _RELOCK_WANTED
    + """
            ) m
            WHERE l.kind = 'key' AND l.name = m.name"""
)
"""MOVE_KEY for several keys in one statement, the names and counts as arrays (Postgres)."""

SET_HEAD = "UPDATE {limits} SET head = ? WHERE kind = 'key' AND name = ?"
"""Record the run whose turn it is on a fifo key (its row locked)."""

HEAD_UNFINISHED = "SELECT 1 FROM {runs} WHERE id = ? AND fifo_key = ?"
"""Is a fifo key's recorded head still unfinished (still holding the key's turn)?"""

FIFO_HEAD = """
            SELECT id FROM {runs} WHERE fifo_key = ? ORDER BY seq LIMIT 1"""
"""A fifo key's oldest unfinished run: whose turn it is (the runs' fifo index)."""

KEYED_STEPS = """
            SELECT id, concurrency_key FROM {steps}
            WHERE id IN ({ids}) AND concurrency_key IS NOT NULL"""
"""The keys of some steps (a key never changes: read without a lock)."""

HAND_BACK_ONE = """
            UPDATE {steps}
            SET status = 'ready', due_at = ?, lease_token = NULL, lease_until = NULL
            WHERE id = ? AND lease_token = ? AND status = 'running'"""
"""Hand back one keyed attempt (fenced): its row count says whether its key is released."""

LOCK_STEPS = "SELECT id, status, concurrency_key FROM {steps} WHERE id IN ({ids}){for_update}"
"""Lock a cancelled run's keyed steps, so no reclaim or claim changes them before they are
cancelled: those locked running are the leases the cancel ends."""

# -- schema -----------------------------------------------------------------------------------
LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS {migrations} ("
    "version INTEGER NOT NULL PRIMARY KEY, name VARCHAR(128) NOT NULL, "
    "checksum CHAR(64) NOT NULL, applied_at BIGINT NOT NULL)"
)
"""The migrations ledger: created before any migration, by every migrator (portable DDL)."""

LEDGER = "SELECT version, name, checksum FROM {migrations} ORDER BY version"
"""The migrations applied, with the checksums of their files."""

RECORD_MIGRATION = """
            INSERT INTO {migrations} (version, name, checksum, applied_at)
            VALUES (?, ?, ?, ?)"""
"""A migration was applied."""

PROBE = "SELECT 1 FROM {table} WHERE 1 = 0"
"""Is a table there and readable (reads no row)."""
