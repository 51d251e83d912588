"""No hot-path query reads a table from end to end, with 100k finished runs in it.

The plans are the server's own (``EXPLAIN (FORMAT JSON)`` with the values
inlined, as the engine's statements are planned), after ``ANALYZE``. Finished
runs and steps are in no partial index, so the claim, the reclaimer and the
due-work scan read only the few hot rows whatever the history holds. Beside
them, 5,000 schedules of 100 workflows and 200k recorded ticks: a pass reads its
own workflows' due schedules, pruning the oldest ticks in order. And 5,000
leadership roles (far more than a cluster has): a claim locks and writes its
role's row by the primary key, however many roles there are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cairnflow import Status
from cairnflow.sql import TABLES, Statement
from cairnflow.sql._queries import RUN_COLUMNS, STEP_COLUMNS
from cairnflow.store import ClaimRequest, QueueClaim, RunQuery
from cairnflow_postgres import PostgresStore
from cairnflow_postgres._dialect import CLAIM_SETTINGS

pytestmark = pytest.mark.timeout(240)

FINISHED = 100_000
NOW = 1_800_000_000_000_000_000
TOKEN = "0" * 32
UNFINISHED = frozenset(s for s in Status if not s.finished)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


@pytest.fixture(scope="module")
def history(postgres_url: str, admin_conn: psycopg.Connection[Any]) -> Iterator[PostgresStore]:
    """A store with 100k succeeded runs (300k steps) and a few dozen hot rows."""
    from cairnflow_postgres.testing import drop_namespace, unique_prefix

    store = PostgresStore(postgres_url, table_prefix=unique_prefix("px"), max_size=2, notify=False)
    store.migrate()
    t = store.tables
    try:
        with admin_conn.transaction():
            admin_conn.execute(
                f"""
                INSERT INTO {t.runs} (id, workflow, queue, priority, state, payload, idem_key,
                    active_key, labels, steps_left, created_at, run_at, finished_at, tenant)
                SELECT 'run_' || g, 'w' || (g %% 5), 'default', 0,
                    CASE WHEN g > %(finished)s THEN 'active'
                         WHEN g %% 10 = 0 THEN 'failed' ELSE 'succeeded' END,
                    '\\x7b7d'::bytea, 'k' || g,
                    CASE WHEN g <= %(finished)s THEN NULL ELSE 'k' || g END,
                    '{{}}', CASE WHEN g <= %(finished)s THEN 0 ELSE 3 END,
                    %(now)s - g, %(now)s - g,
                    CASE WHEN g <= %(finished)s THEN %(now)s - g + 1000 END,
                    -- Cap.TENANT: three runs in four of 500 tenants, the fourth of none.
                    CASE WHEN g %% 4 <> 0 THEN 'tenant-' || (g %% 500) END
                FROM generate_series(1, %(finished)s + 60) AS g""",
                {"finished": FINISHED, "now": NOW},
            )
            # Three steps a run; the 60 active runs' first steps are hot in every status.
            admin_conn.execute(
                f"""
                INSERT INTO {t.steps} (id, run_id, workflow, queue, priority, name, kind,
                    position, parents, children, parents_left, status, due_at, attempt,
                    failures, reclaims, lease_token, lease_until, signal_name, output,
                    finished_at)
                SELECT 'step_' || g || '_' || s.pos, 'run_' || g, 'w' || (g %% 5), 'default', 0,
                    s.name, 'task', s.pos,
                    CASE s.pos WHEN 0 THEN '[]' ELSE '["a"]' END,
                    CASE s.pos WHEN 0 THEN '["b", "c"]' ELSE '[]' END,
                    CASE s.pos WHEN 0 THEN 0 ELSE 1 END,
                    CASE WHEN g <= %(finished)s THEN 'succeeded'
                         WHEN s.pos > 0 THEN 'blocked'
                         ELSE (ARRAY['ready', 'running', 'sleeping', 'waiting', 'scheduled'])
                              [g %% 5 + 1]
                    END,
                    CASE WHEN g > %(finished)s AND s.pos = 0 THEN %(now)s - g END,
                    1, 0, 0,
                    CASE WHEN g > %(finished)s AND g %% 5 = 1 THEN %(token)s END,
                    CASE WHEN g > %(finished)s AND g %% 5 = 1 THEN %(now)s - g END,
                    CASE WHEN g > %(finished)s AND g %% 5 = 3 THEN 'go' END,
                    CASE WHEN g <= %(finished)s THEN '\\x7b7d'::bytea END,
                    CASE WHEN g <= %(finished)s THEN %(now)s END
                FROM generate_series(1, %(finished)s + 60) AS g
                CROSS JOIN (VALUES ('a', 0), ('b', 1), ('c', 2)) AS s (name, pos)""",
                {"finished": FINISHED, "now": NOW, "token": TOKEN},
            )
            # 5,000 servers seen over two days (Cap.SERVERS): a listing reads the last hour's.
            admin_conn.execute(
                f"""
                INSERT INTO {t.servers} (node, host, pid, queues, workers, version,
                    started_at, seen_at, beat_every)
                SELECT 'node_' || g, 'host', g, '[]', 8, 'v', %(now)s - g * 40000000000,
                    %(now)s - g * 35000000000, 10000000000
                FROM generate_series(1, 5000) AS g""",
                {"now": NOW},
            )
            # A label on every run (1,000 tenants), in the label index (Cap.LABEL_PREFIX).
            admin_conn.execute(
                f"""
                INSERT INTO {t.run_labels} (run_id, name, value, created_at)
                SELECT 'run_' || g, 'tenant', 'acme-' || (g %% 1000), %(now)s - g
                FROM generate_series(1, %(finished)s + 60) AS g""",
                {"finished": FINISHED, "now": NOW},
            )
            admin_conn.execute(
                f"""
                INSERT INTO {t.signals} (run_id, name, payload, created_at)
                SELECT 'run_' || g, 'go', '\\x7b7d'::bytea, %(now)s
                FROM generate_series(1, 2000) AS g""",
                {"now": NOW},
            )
            # 5,000 schedules of 100 workflows, a few of them due; 40 recorded ticks each.
            admin_conn.execute(
                f"""
                INSERT INTO {t.schedules} (id, workflow, name, spec, fingerprint, next_fire,
                    paused, last_fire, last_run_id, created_at, updated_at)
                SELECT 'sch_' || g, 'w' || (g %% 100), 's' || g, '{{}}', 'f',
                    CASE WHEN g %% 500 = 0 THEN %(now)s - g ELSE %(now)s + g * 60000000000 END,
                    FALSE, %(now)s - 60000000000, 'run_' || g, %(now)s, %(now)s
                FROM generate_series(1, 5000) AS g""",
                {"now": NOW},
            )
            admin_conn.execute(
                f"""
                INSERT INTO {t.ticks} (schedule_id, at, outcome, reason, node, recorded_at,
                    run_id)
                SELECT 'sch_' || g, %(now)s - k * 60000000000, 'fired', 'due', 'node',
                    %(now)s - k * 60000000000, 'run_' || g
                FROM generate_series(1, 5000) AS g CROSS JOIN generate_series(1, 40) AS k""",
                {"now": NOW},
            )
            admin_conn.execute(
                f"""
                INSERT INTO {t.leaders} (role, node, term, lease_until)
                SELECT 'role_' || g, 'node', g, %(now)s
                FROM generate_series(1, 5000) AS g""",
                {"now": NOW},
            )
            # 2,000 paused workflows and queues (none of the hot rows'): every claim probes them.
            admin_conn.execute(
                f"""
                INSERT INTO {t.pauses} (kind, name, paused_at)
                SELECT k.kind, 'paused_' || g, %(now)s
                FROM generate_series(1, 1000) AS g
                CROSS JOIN (VALUES ('queue'), ('workflow')) AS k (kind)""",
                {"now": NOW},
            )
            # 5,000 memoised results of 1,000 runs, and 5,000 named locks: by primary key.
            admin_conn.execute(
                f"""
                INSERT INTO {t.journal} (scope, step, name, value, recorded_at)
                SELECT 'run_' || g, 'a', 'memo_' || k, '\\x7b7d'::bytea, %(now)s
                FROM generate_series(1, 1000) AS g CROSS JOIN generate_series(1, 5) AS k""",
                {"now": NOW},
            )
            admin_conn.execute(
                f"""
                INSERT INTO {t.locks} (name, token, taken_at, expires_at)
                SELECT 'lock_' || g, 'secret', %(now)s, %(now)s
                FROM generate_series(1, 5000) AS g""",
                {"now": NOW},
            )
            # 1,000 limited queues: a limited claim locks its queue's row by the primary key.
            admin_conn.execute(
                f"""
                INSERT INTO {t.limits} (kind, name)
                SELECT 'queue', 'limited_' || g FROM generate_series(1, 1000) AS g"""
            )
            # 20 recorded errors of each of 10,000 runs (a history full at its default bound).
            admin_conn.execute(
                f"""
                INSERT INTO {t.errors} (run_id, seq, step, attempt, node, at, error)
                SELECT 'run_' || g, k, 'a', k, 'node', %(now)s, '{{}}'
                FROM generate_series(%(finished)s - 9995, %(finished)s + 5) AS g
                CROSS JOIN generate_series(1, 20) AS k""",
                {"now": NOW, "finished": FINISHED},
            )
            # 1,000 concurrency keys, half of them fifo; the hot steps carry keys, and every
            # other active run is a fifo key's: a keyed claim probes them by primary key.
            admin_conn.execute(
                f"""
                INSERT INTO {t.limits} (kind, name, running, fifo, head)
                SELECT 'key', 'key_' || g, g %% 3, g %% 2,
                    CASE WHEN g %% 2 = 1 THEN 'run_' || (%(finished)s + g %% 60 + 1) END
                FROM generate_series(1, 1000) AS g""",
                {"finished": FINISHED},
            )
            admin_conn.execute(
                f"""
                UPDATE {t.steps} SET concurrency_key = 'key_' || (position + 1), key_limit = 2
                WHERE run_id IN (
                    SELECT id FROM {t.runs} WHERE state = 'active'
                )"""
            )
            admin_conn.execute(
                f"UPDATE {t.runs} SET fifo_key = 'key_1' WHERE state = 'active' AND seq % 2 = 0"
            )
            # The archive (schema 13): half the history moved there as a pruner moves it.
            admin_conn.execute(
                f"INSERT INTO {t.runs_archive} ({RUN_COLUMNS}, archived_at) "
                f"SELECT {RUN_COLUMNS}, {NOW} FROM {t.runs} WHERE state <> 'active' "
                f"AND seq % 2 = 0"
            )
            admin_conn.execute(
                f"INSERT INTO {t.steps_archive} (run_id, position, {STEP_COLUMNS}) "
                f"SELECT run_id, position, {STEP_COLUMNS} FROM {t.steps} "
                f"WHERE run_id IN (SELECT id FROM {t.runs_archive})"
            )
            # Lifecycle events (schema 21): 50,000 undelivered events of two channels, most of
            # them leased, and 1,000 subscriptions the triggers probe by the primary key.
            admin_conn.execute(
                f"""
                INSERT INTO {t.lifecycle} (channel, run_id, workflow, step, attempt, kind, at,
                    token, lease_until)
                SELECT CASE WHEN g %% 10 = 0 THEN 'on_failure' ELSE 'events' END, 'run_' || g,
                    'w' || (g %% 5), 'a', 1, 'step.started', %(now)s,
                    CASE WHEN g %% 3 = 0 THEN NULL ELSE 'secret' END,
                    CASE WHEN g %% 3 = 0 THEN NULL ELSE %(now)s + 1 END
                FROM generate_series(1, 50000) AS g""",
                {"now": NOW},
            )
            admin_conn.execute(
                f"""
                INSERT INTO {t.lifecycle_subs} (channel, workflow, since)
                SELECT 'events', 'sub_' || g, %(now)s FROM generate_series(1, 1000) AS g""",
                {"now": NOW},
            )
        tables = (
            t.runs,
            t.steps,
            t.signals,
            t.schedules,
            t.ticks,
            t.leaders,
            t.pauses,
            t.limits,
            t.journal,
            t.locks,
            t.errors,
            t.run_labels,
            t.servers,
            t.runs_archive,
            t.steps_archive,
            t.lifecycle,
            t.lifecycle_subs,
        )
        for table in tables:
            admin_conn.execute(f"ANALYZE {table}")
        yield store
    finally:
        store.close()
        drop_namespace(admin_conn, store.tables.prefix)


def _statements(store: PostgresStore) -> dict[str, Statement]:
    """Every statement the engine runs while it works, with realistic values."""
    q = store._queries  # the SQL layer's statements, as the store runs them
    t = store._timing.queries
    r = store._retention
    paths = store._outcomes._paths
    life = store._lifecycle
    hot_run, hot_step = f"run_{FINISHED + 5}", f"step_{FINISHED + 5}_0"
    workflows = ["w0", "w1", "w2", "w3", "w4"]
    claim = q.claim_plan(
        workflows=workflows, queue="default", limit=8, claimed=(TOKEN, NOW, "node", NOW)
    )
    by_id = (hot_step, TOKEN)
    statements: dict[str, Statement] = {
        "claim": claim.update_returning,
        "claim, one workflow": q.claim_plan(
            workflows=["w1"], queue="default", limit=8, claimed=(TOKEN, 0, "n", 0)
        ).update_returning,
        "claim, globally limited": q.claim_plan(
            workflows=workflows,
            queue="default",
            limit=8,
            claimed=(TOKEN, NOW, "node", NOW),
            global_limit=5,
        ).update_returning_runs,
        "claim_runs": q.claim_runs([hot_run, f"run_{FINISHED + 9}"]),
        "claim_inputs": q.claim_inputs([hot_run], ["a"]),
        "renew": q.renew(NOW, [by_id, (f"step_{FINISHED + 9}_0", TOKEN)]),
        "lease_states": q.lease_states([hot_step]),
        "hand_back": q.hand_back(NOW, [by_id]),
        "heartbeat": (q.heartbeat, (NOW, NOW, *by_id)),
        "progress": (q.progress, (b"{}", NOW, *by_id)),
        "lease_state": (q.lease_state, (hot_step,)),
        "step_of": (q.step_of, (hot_step,)),
        "steps_of (group commit)": q.steps_of([hot_step, f"step_{FINISHED + 9}_0"]),
        "runs_succeeded": q.runs_succeeded(NOW, [hot_run]),
        "lock_run": (q.lock_run, (hot_run,)),
        "succeed": (q.succeed, (b"{}", NOW, *by_id)),
        "retry": (q.retry, ("scheduled", NOW, "{}", *by_id)),
        "fail": (q.fail, ("{}", NOW, *by_id)),
        "snooze": (q.snooze, ("scheduled", NOW, *by_id)),
        "sleep": (q.sleep, (NOW, b"{}", *by_id)),
        "wait": (q.wait, (NOW, "go", *by_id)),
        "oldest_signal": (q.oldest_signal, (hot_run, "go")),
        "consume_signal": (q.consume_signal, (7,)),
        "release_children": q.release_children(hot_run, ["b", "c"]),
        "ready_children": q.ready_children(NOW, hot_run, ["b", "c"]),
        "count_steps_done": (q.count_steps_done, (2, hot_run)),
        "steps_with_runs (group commit)": q.steps_with_runs([hot_step]),
        "end_run": (q.end_run, ("succeeded", NOW, None, hot_run)),
        "unfinished_steps": (q.unfinished_steps, (hot_run,)),
        "cancel_steps": q.cancel_steps(NOW, [hot_step]),
        "drop_signals": (q.drop_signals, (hot_run,)),
        "expired (reclaimer)": q.expired(NOW, workflows, 100),
        "requeue_expired": (q.requeue_expired, (NOW, hot_step, TOKEN, NOW)),
        "due (sleeps and waits)": q.due(NOW, workflows, 100),
        "promote (scheduled to ready)": q.promote([hot_step, f"step_{FINISHED + 9}_0"]),
        "wake_sleeper": (q.wake_sleeper, (NOW, hot_step, NOW)),
        "time_out_wait": (q.time_out_wait, ("{}", NOW, hot_step, NOW)),
        "step_signal": (q.step_signal, (hot_step,)),
        "waiting_for": (q.waiting_for, (hot_run, "go")),
        "resolve_wait": (q.resolve_wait, (b"{}", NOW, hot_step)),
        "get_run": (q.get_run, (hot_run,)),
        "get_steps": (q.get_steps, (hot_run,)),
        "list_runs": q.list_runs(RunQuery(), before_seq=None, limit=51),
        "list_runs, next page": q.list_runs(RunQuery(), before_seq=FINISHED // 2, limit=51),
        "list_runs by workflow": q.list_runs(RunQuery(workflow="w3"), before_seq=None, limit=51),
        "list_runs by queue": q.list_runs(RunQuery(queue="default"), before_seq=None, limit=51),
        "list_runs, unfinished": q.list_runs(
            RunQuery(statuses=UNFINISHED, now=NOW), before_seq=None, limit=51
        ),
        "list_runs, queued": q.list_runs(
            RunQuery(statuses=frozenset({Status.QUEUED}), now=NOW), before_seq=None, limit=51
        ),
        "list_runs, failed only": q.list_runs(
            RunQuery(workflow="w1", statuses=frozenset({Status.FAILED})), before_seq=None, limit=51
        ),
        "list_runs, label": q.list_runs(
            RunQuery(labels={"tenant": "acme-7"}), before_seq=None, limit=51
        ),
        "list_runs, failed, label prefix": q.list_runs(
            RunQuery(statuses=frozenset({Status.FAILED}), label_prefix=("tenant", "acme-12")),
            before_seq=None,
            limit=51,
        ),
        "count_runs, failed, label prefix": q.count_runs(
            RunQuery(statuses=frozenset({Status.FAILED}), label_prefix=("tenant", "acme-12"))
        ),
        "list_runs by tenant": q.list_runs(RunQuery(tenant="tenant-7"), before_seq=None, limit=51),
        "list_runs by tenant, next page": q.list_runs(
            RunQuery(tenant="tenant-7"), before_seq=FINISHED // 2, limit=51
        ),
        "count_runs by tenant": q.count_runs(RunQuery(tenant="tenant-7")),
        "stats: steps now": (store._stats._steps_now, ()),
        "stats: active runs": (store._stats._active_runs, ()),
        "stats: ended runs": (  # a window holding 1.5% of the history (it all ended in 0.1 ms)
            store._stats._ended_runs,
            (NOW - 500, 60 * 10**9, NOW - 500),
        ),
        "servers: heartbeat": (
            store._servers._update,
            ("h", 1, "[]", 1, "v", NOW, NOW, 10**9, "node_7"),
        ),
        "servers: list": (store._servers._list, (NOW - 3600 * 10**9,)),
        "servers: prunable": (store._servers._prunable, (NOW - 24 * 3600 * 10**9, 100)),
        "step_counts": q.step_counts([hot_run, f"run_{FINISHED - 3}"]),
        "holder_of_key": q.holder_of_key("w0", [f"k{FINISHED + 5}"]),
        "runs_named": q.runs_named([hot_run, f"run_{FINISHED - 3}"]),
        # Schedules: a pass, a fire (its schedule locked by id), reads, pruning.
        "due_schedules": q.due_schedules(NOW, workflows, 100),
        "list_schedules": q.list_schedules(["w3"]),
        "get_schedule": (q.get_schedule, ("sch_7",)),
        "update_schedule": (q.update_schedule, ("f", NOW, "{}", "f", NOW, "sch_7")),
        "lock_schedule": (q.lock_schedule, ("sch_7",)),
        "fired": (q.fired, (NOW, NOW, hot_run, "sch_7")),
        "pause_schedule": (q.pause_schedule, (True, None, NOW, "sch_7")),
        "delete_schedule": (q.delete_schedule, ("sch_7",)),
        "delete_ticks_of": (q.delete_ticks_of, ("sch_7",)),
        "tick_history": (q.tick_history, ("sch_7", 20)),
        "prunable_ticks": (q.prunable_ticks, (NOW - 38 * 60 * 10**9, 1000)),
        "delete_ticks": q.delete_ticks([("sch_7", NOW - 60 * 10**9), ("sch_8", NOW)]),
        # Leadership: a claim locks its role's row, then writes it; a resignation.
        "lock_leader": (q.lock_leader, ("role_7",)),
        "hold_leader": (q.hold_leader, ("node", 8, NOW, "role_7")),
        "resign_leader": (q.resign_leader, ("role_7", "node")),
        # Pauses: written and read by the primary key.
        "find_pause": (q.find_pause, ("queue", "paused_7")),
        "delete_pause": (q.delete_pause, ("workflow", "paused_7")),
        # Global queue limits: the limiter locked by the primary key, the running counted
        # in the queue's range of the running steps alone.
        "lock_limiter": (q.lock_limiter, ("queue", "limited_7")),
        "count_running": (q.count_running, ("default",)),
        # Durable step state: a memo's probe and its fence (the attempt's step row), a
        # lock's take, extension and release, each by a primary key.
        "read_journal": (q.read_journal, (hot_run, "a", "memo_7")),
        "hold_step": (q.hold_step, (hot_step, "secret")),
        "lock_named": (q.lock_named, ("lock_7",)),
        "take_named": (q.take_named, ("secret", NOW, NOW, "lock_7")),
        "extend_named": (q.extend_named, (NOW, "lock_7", "secret", NOW)),
        "release_named": (q.release_named, ("lock_7", "secret")),
        # Run timing: a reschedule or a force locks its run (lock_run) and writes its steps by
        # id; the next due time stops at the first row of the ready, due and running indexes.
        "run_steps": (t.run_steps, (hot_run,)),
        "move_start": t.move_start("scheduled", NOW, [hot_step, f"step_{FINISHED + 9}_0"]),
        "run_at": (t.run_at, (NOW, hot_run)),
        "force_ready": t.force_ready(NOW, [hot_step]),
        "force_pass": t.force_pass([hot_step, f"step_{FINISHED + 9}_0"]),
        "due_ready": t.due_ready(workflows, ["default", "mail"]),
        "next_timed": t.next_timed(workflows, ["default", "mail"]),
        "next_expiry": t.next_expiry(workflows),
        # Failure policies and error history: a failure reads its run's steps through the
        # (run_id, name) key and its range of the errors' primary key.
        "run_failures": (q.run_failures, (hot_run,)),
        "last_error": (store._errors.last_error, (hot_run,)),
        "trim_errors": (store._errors.trim_errors, (hot_run, 3)),
        "run_errors": (store._errors.run_errors_of, (hot_run,)),
        # Step history: one run's range of its index; overdue runs (RUN_TIMEOUT): the partial
        # index of unfinished runs, never the finished ones.
        "step_history": (store._step_log.run_step_history, (hot_run,)),
        "overdue_runs": (q.overdue_runs, ("w0", NOW, 10)),
        # Concurrency keys: a keyed claim walks the ready index as the plain one, probing each
        # row's key (and a fifo key's head run) by primary key; keys are locked and moved by
        # their primary key, a fifo key's head found in the runs' fifo index.
        "claim, keyed": (
            q.ready_keyed(workflows=workflows, queue="default", limit=8)[0]
            + store.dialect.skip_locked,
            q.ready_keyed(workflows=workflows, queue="default", limit=8)[1],
        ),
        "lock_key": (q.lock_key, ("key_1",)),
        "move_key": (q.move_key, (1, "key_1")),
        "lock_keys_array": (q.lock_keys_array, (["key_1", "key_3", "key_2"],)),
        "move_keys_array": (q.move_keys_array, (["key_1", "key_2", "key_3"], [1, -1, 2])),
        # A keyed claim of one queue: READY_KEYED and the keys' locks in one statement, and its
        # lease by id, returning the runs' columns.
        "claim, keyed, with keys": q.ready_keyed_with_keys(
            workflows=workflows, queue="default", limit=8, released=["key_2", "key_9"]
        ),
        "lease, keyed": claim.mark_claimed_returning_runs([hot_step, f"step_{FINISHED + 7}_0"]),
        # The same claim in one statement (CLAIM_KEYED): those reads, the keys' moves and the
        # lease, after an outcome batch that released two keys.
        "claim, keyed, one statement": q.claim_keyed(
            workflows=workflows,
            queue="default",
            limit=8,
            released={"key_2": 1, "key_9": 2},
            claimed=(TOKEN, NOW, "node", NOW),
        ),
        "set_head": (q.set_head, (hot_run, "key_1")),
        "head_unfinished": (q.head_unfinished, (hot_run, "key_1")),
        "fifo_head": (q.fifo_head, ("key_1",)),
        "keyed_steps": q.keyed_steps([hot_step]),
        "lock_steps": q.lock_steps([hot_step, f"step_{FINISHED + 9}_0"]),
        "hand_back_one": (q.hand_back_one, (NOW, *by_id)),
        # Retention and the archive (schema 13): a chunk of the oldest finished runs, their
        # move by id and by run, and the archive read newest finish first.
        "prunable_runs": (r._prunable, (NOW - FINISHED // 2, 200)),
        "archive_runs": _listed(r._archive_runs, [hot_run, f"run_{FINISHED - 3}"]),
        "archive_steps": _listed(r._archive_steps, [hot_run, f"run_{FINISHED - 3}"]),
        "stamp_archived": _listed(r._stamp, ["run_2", "run_4"], NOW),
        "archived_first": (r._first, (51,)),
        "archived_after": (r._after, (NOW - 5000, NOW - 5000, "run_5000", 51)),
        "archived_steps": _listed(r._steps, ["run_2", "run_4"]),
        # Failure paths (#17, WAIT_BRANCH, COMPENSATION): a run's steps by its (run_id, name)
        # key, their writes by id, the run's kept error by its id.
        "run_graph": (paths._graph_sql, (hot_run,)),
        "skip_steps": _listed(paths._skip_sql, [hot_step], NOW),
        "time_out_to_branch": (paths._time_out_sql, ("{}", NOW, hot_step, NOW)),
        "start_step": (paths._start_sql, (NOW, hot_step)),
        "hold_compensations": _listed(paths._hold_sql, [hot_step]),
        "keep_run_error": (paths._keep_error_sql, ("{}", hot_run)),
        "run_error": (paths._error_sql, (hot_run,)),
        # Lifecycle events (schema 21): the triggers' probe of the subscriptions; a claim of a
        # channel's oldest free rows along the channel index; the rest by the rows' ids.
        "lifecycle: probe": (
            f"SELECT 1 FROM {store.tables.lifecycle_subs} "
            "WHERE channel = 'events' AND workflow IN (?, '')",
            ("w1",),
        ),
        "lifecycle: free": (
            life._free.format(workflows=" AND workflow IN (?, ?)"),
            ("events", NOW, "w1", "w2", 100),
        ),
        "lifecycle: lease": _listed(life._lease, ["10", "20"], "t", NOW),
        "lifecycle: read": _listed(life._read, ["10", "20"]),
        "lifecycle: renew": _listed(life._renew, ["10", "20"], NOW, "t"),
        "lifecycle: release": (life._release, (NOW, 10, "t")),
        "lifecycle: ack": _listed(life._ack, ["10", "20"], "t"),
    }
    return statements


def _listed(sql: str, ids: list[str], *before: object) -> Statement:
    """``sql`` with its ``{ids}`` list filled for ``ids`` (after the ``before`` values)."""
    return sql.replace("{ids}", ", ".join("?" * len(ids))), (*before, *ids)


def _plan(conn: psycopg.Connection[Any], store: PostgresStore, statement: Statement) -> Any:
    text, params = statement
    # A client-side cursor inlines the values: the plan is the one those values get. A claim
    # is planned under the settings its transaction makes (the dialect's CLAIM_SETTINGS).
    claim = "'ready'" in text and (
        text.lstrip().startswith(f"UPDATE {store.tables.steps}") or "key_limit" in text
    )
    with conn.transaction(), psycopg.ClientCursor(conn) as cursor:
        if claim:
            cursor.execute(CLAIM_SETTINGS)
        cursor.execute("EXPLAIN (FORMAT JSON) " + store.dialect.sql(text), params)
        row = cursor.fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return document[0]["Plan"]


def _analyzed(conn: psycopg.Connection[Any], store: PostgresStore, statement: Statement) -> Any:
    """The plan of ``statement`` as it ran (EXPLAIN ANALYZE), under the claim's settings; the
    statement's writes are rolled back."""
    return _explained(conn, store, statement)["Plan"]


def _explained(
    conn: psycopg.Connection[Any], store: PostgresStore, statement: Statement, *before: str
) -> Any:
    """EXPLAIN ANALYZE's whole report of ``statement`` (its plan, and its JIT if any), run
    after the ``before`` statements and the claim's settings; its writes are rolled back."""
    text, params = statement
    with conn.transaction() as transaction, psycopg.ClientCursor(conn) as cursor:
        for setting in before:
            cursor.execute(setting)
        cursor.execute(CLAIM_SETTINGS)
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + store.dialect.sql(text), params)
        row = cursor.fetchone()
        raise psycopg.Rollback(transaction)
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return document[0]


def test_no_hot_path_query_scans_a_whole_table(
    history: PostgresStore, admin_conn: psycopg.Connection[Any]
) -> None:
    tables = {history.tables.unqualified(t) for t in TABLES if t != "migrations"}
    scans: dict[str, list[str]] = {}
    indexes: dict[str, set[str]] = {}
    for name, statement in _statements(history).items():
        plan = _plan(admin_conn, history, statement)
        nodes = list(_nodes(plan))
        seq = [n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"]
        if set(seq) & tables:
            scans[name] = seq
        indexes[name] = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert scans == {}, f"sequential scans on a table of {FINISHED} finished runs: {scans}"
    prefix = history.tables.prefix
    # The three hot scans read their partial indexes, which hold only the hot rows. Two
    # partial indexes hold the running steps alone (steps_running by lease end, and since
    # schema 6 steps_running_queue by queue): the planner takes either, as its statistics
    # say, and both hold no more rows than there are leases.
    leased = {f"{prefix}steps_running", f"{prefix}steps_running_queue"}
    assert f"{prefix}steps_ready" in indexes["claim"]
    assert indexes["expired (reclaimer)"] & leased, indexes["expired (reclaimer)"]
    assert f"{prefix}steps_due" in indexes["due (sleeps and waits)"]
    assert f"{prefix}runs_active_key" in indexes["holder_of_key"]
    # A pass reads its own workflows' due schedules; pruning picks the oldest ticks in order.
    assert f"{prefix}schedules_due" in indexes["due_schedules"]
    assert f"{prefix}ticks_recorded" in indexes["prunable_ticks"]
    assert f"{prefix}ticks_pkey" in indexes["tick_history"]
    for name in ("lock_leader", "hold_leader", "resign_leader"):
        assert f"{prefix}leaders_pkey" in indexes[name]
    # Every claim reads the pauses by their primary key.
    for name in ("claim", "claim, one workflow", "find_pause", "delete_pause"):
        assert f"{prefix}pauses_pkey" in indexes[name], (name, indexes[name])
    assert f"{prefix}limits_pkey" in indexes["lock_limiter"]
    assert f"{prefix}journal_pkey" in indexes["read_journal"]
    # A memo's fence finds its step by the primary key, or (the planner's choice when its
    # statistics say few steps run) in a partial index of the running steps alone, which
    # holds no more rows than there are leases: either is bounded, neither scans the table.
    running = {f"{prefix}steps_pkey", *leased}
    assert indexes["hold_step"] & running, indexes["hold_step"]
    for name in ("lock_named", "take_named", "extend_named", "release_named"):
        assert f"{prefix}locks_pkey" in indexes[name], (name, indexes[name])
    # A queue's running steps are counted in either partial index of the running steps (by
    # queue, or all of them with the queue as a filter: the planner's choice by its
    # statistics; CI saw both): no more rows than there are leases.
    assert indexes["count_running"] & leased, indexes["count_running"]
    # A globally limited claim counts the queue's running in its LIMIT, the same way, and
    # probes its limiter by the primary key.
    limited = indexes["claim, globally limited"]
    for index in ("steps_ready", "limits_pkey"):
        assert f"{prefix}{index}" in limited, limited
    assert limited & leased, limited
    # The next due time: three ranges of the hot indexes, each stopped at its first row.
    assert f"{prefix}steps_ready" in indexes["due_ready"], indexes["due_ready"]
    assert f"{prefix}pauses_pkey" in indexes["due_ready"], indexes["due_ready"]
    assert f"{prefix}steps_due" in indexes["next_timed"], indexes["next_timed"]
    assert indexes["next_expiry"] & leased, indexes["next_expiry"]
    for name in ("last_error", "trim_errors", "run_errors"):
        assert f"{prefix}errors_pkey" in indexes[name], (name, indexes[name])
    assert f"{prefix}steps_run_name" in indexes["run_failures"], indexes["run_failures"]
    # A dashboard's counts read the hot indexes and the window of finished runs only.
    for index in ("steps_ready", "steps_running_queue", "steps_due"):
        assert f"{prefix}{index}" in indexes["stats: steps now"], indexes["stats: steps now"]
    assert f"{prefix}runs_finished" in indexes["stats: ended runs"], indexes["stats: ended runs"]
    assert f"{prefix}servers_pkey" in indexes["servers: heartbeat"]
    for name in ("servers: list", "servers: prunable"):
        assert f"{prefix}servers_seen" in indexes[name], (name, indexes[name])
    # Labels are found in the label index, never in the runs' JSON.
    labelled = (
        "list_runs, label",
        "list_runs, failed, label prefix",
        "count_runs, failed, label prefix",
    )
    for name in labelled:
        assert indexes[name] & {f"{prefix}run_labels_value", f"{prefix}run_labels_pkey"}, (
            name,
            indexes[name],
        )
    # One tenant's runs, newest first and counted, along the partial tenant index.
    for name in ("list_runs by tenant", "list_runs by tenant, next page", "count_runs by tenant"):
        assert f"{prefix}runs_tenant" in indexes[name], (name, indexes[name])
    # A keyed claim reads the ready index as the plain one, and the keys by primary key.
    assert f"{prefix}steps_ready" in indexes["claim, keyed"], indexes["claim, keyed"]
    assert f"{prefix}limits_pkey" in indexes["claim, keyed"], indexes["claim, keyed"]
    for name in ("lock_key", "move_key", "set_head", "lock_keys_array", "move_keys_array"):
        assert f"{prefix}limits_pkey" in indexes[name], (name, indexes[name])
    for index in ("steps_ready", "limits_pkey"):
        assert f"{prefix}{index}" in indexes["claim, keyed, with keys"], indexes
    # In one statement: the same reads, a fifo key's turn in the runs' fifo index (or its
    # recorded head by primary key), and the lease by id, each step's run by its id.
    one = indexes["claim, keyed, one statement"]
    for index in ("steps_ready", "limits_pkey", "runs_fifo", "runs_id_key"):
        assert f"{prefix}{index}" in one, (index, one)
    # The lease finds its steps by id, or in the partial index of the ready steps (where the
    # statistics say few are ready): bounded either way.
    by_id = {f"{prefix}steps_pkey", f"{prefix}steps_ready"}
    assert indexes["lease, keyed"] & by_id, indexes["lease, keyed"]
    assert f"{prefix}runs_fifo" in indexes["fifo_head"], indexes["fifo_head"]
    # Retention: a chunk is a range of the finished index; the move goes by id and by run;
    # the archive is read along its own finished index, its steps by their primary key.
    assert f"{prefix}runs_finished" in indexes["prunable_runs"], indexes["prunable_runs"]
    assert f"{prefix}steps_run_name" in indexes["archive_steps"], indexes["archive_steps"]
    assert f"{prefix}runs_archive_pkey" in indexes["stamp_archived"], indexes["stamp_archived"]
    for name in ("archived_first", "archived_after"):
        assert f"{prefix}runs_archive_finished" in indexes[name], (name, indexes[name])
    assert f"{prefix}steps_archive_pkey" in indexes["archived_steps"], indexes["archived_steps"]
    # Lifecycle events: the triggers' probe by the subscriptions' primary key, a claim along
    # its channel's range of the channel index or along the ids (the planner's choice when
    # its statistics say most rows are of that channel), stopped at its limit either way;
    # every write by the rows' primary key.
    assert f"{prefix}lifecycle_subs_pkey" in indexes["lifecycle: probe"]
    walked = {f"{prefix}lifecycle_channel", f"{prefix}lifecycle_pkey"}
    assert indexes["lifecycle: free"] & walked, indexes["lifecycle: free"]
    for name in ("lease", "read", "renew", "release", "ack"):
        assert f"{prefix}lifecycle_pkey" in indexes[f"lifecycle: {name}"], (name, indexes)
    # No claim reads the cold tables.
    cold = {f"{prefix}runs_archive_pkey", f"{prefix}runs_archive_finished"}
    claims = (
        "claim",
        "claim, one workflow",
        "claim, keyed",
        "claim, keyed, with keys",
        "claim, keyed, one statement",
    )
    for name in (*claims, "claim, globally limited"):
        assert not indexes[name] & cold, (name, indexes[name])


def test_the_hot_indexes_hold_only_the_hot_rows(
    history: PostgresStore, admin_conn: psycopg.Connection[Any]
) -> None:
    prefix = history.tables.prefix
    names = ["steps_ready", "steps_running", "steps_due", "steps_running_queue", "steps_pkey"]
    sizes = dict(
        admin_conn.execute(
            "SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relname = ANY(%s)",
            ([prefix + name for name in names],),
        ).fetchall()
    )
    assert sizes[f"{prefix}steps_pkey"] > 5_000_000  # every one of the 300k steps
    for name in ("steps_ready", "steps_running", "steps_due", "steps_running_queue"):
        # A B-tree's metapage and one leaf: the few dozen hot rows, nothing of the history.
        assert sizes[prefix + name] <= 2 * 8192, (name, sizes)


def test_no_claim_statement_is_compiled_by_jit(
    history: PostgresStore, admin_conn: psycopg.Connection[Any]
) -> None:
    """A claim's plan that keeps a sort under ``enable_sort = off`` is costed over
    ``jit_above_cost``; CLAIM_SETTINGS turns JIT off, or each claim compiled it (350 ms)."""
    q = history._queries
    statements = (
        q.ready_keyed_with_keys(
            workflows=["w0", "w1"], queue="default", limit=8, released=["key_2"]
        ),
        q.claim_keyed(
            workflows=["w0", "w1"],
            queue="default",
            limit=8,
            released={"key_2": 1},
            claimed=(TOKEN, NOW, "node", NOW),
        ),
    )
    for statement in statements:
        # JIT for any plan at all, unless the claim's settings turn it off.
        report = _explained(admin_conn, history, statement, "SET LOCAL jit_above_cost = 0")
        assert report["Plan"]["Node Type"], report
        assert "JIT" not in report, report["JIT"]


def test_a_claim_on_the_big_history_is_fast(history: PostgresStore) -> None:
    timings: list[float] = []
    for _ in range(5):
        started = time.perf_counter()
        history.claim(
            ClaimRequest(
                workflows=frozenset({"w9"}),  # nothing matches: the worst case reads the index
                limit=8,
                now=NOW,
                lease_until=NOW + 10**9,
                node_id="explain",
            )
        )
        timings.append(time.perf_counter() - started)
    # Not a benchmark: a guard against a plan that reads 300k rows (hundreds of ms).
    assert min(timings) < 0.05, timings


def test_a_claim_of_one_queue_walks_its_own_range_of_the_ready_index(
    postgres_url: str, admin_conn: psycopg.Connection[Any]
) -> None:
    """10,000 ready steps on one queue do not stand in the way of a claim of another.

    The ready index leads with the queue: a claim of ``mail`` reads the index
    from mail's first ready row, in the claim's order, and stops after n; it
    neither sorts nor reads bulk's rows, whatever the statistics say.
    """
    from cairnflow_postgres.testing import drop_namespace, unique_prefix

    store = PostgresStore(postgres_url, table_prefix=unique_prefix("pq"), max_size=2, notify=False)
    store.migrate()
    t = store.tables
    try:
        with admin_conn.transaction():
            admin_conn.execute(
                f"""
                INSERT INTO {t.runs} (id, workflow, queue, priority, state, payload, labels,
                    steps_left, created_at, run_at)
                SELECT 'run_' || g, 'w', CASE WHEN g <= 10000 THEN 'bulk' ELSE 'mail' END,
                    g %% 3, 'active', '\\x7b7d'::bytea, '{{}}', 1, %(now)s - g, %(now)s - g
                FROM generate_series(1, 10020) AS g""",
                {"now": NOW},
            )
            admin_conn.execute(
                f"""
                INSERT INTO {t.steps} (id, run_id, workflow, queue, priority, name, kind,
                    position, parents, children, parents_left, status, due_at, attempt,
                    failures, reclaims)
                SELECT 'step_' || g, 'run_' || g, 'w',
                    CASE WHEN g <= 10000 THEN 'bulk' ELSE 'mail' END, g %% 3, 'a', 'task', 0,
                    '[]', '[]', 0, 'ready', %(now)s - g, 0, 0, 0
                FROM generate_series(1, 10020) AS g""",
                {"now": NOW},
            )
        for table in (t.runs, t.steps):
            admin_conn.execute(f"ANALYZE {table}")
        claim = store._queries.claim_plan(
            workflows=["w"], queue="mail", limit=8, claimed=(TOKEN, NOW, "node", NOW)
        )
        for statement in (claim.update_returning_runs, claim.update_returning):
            nodes = list(_nodes(_plan(admin_conn, store, statement)))
            ready = [n for n in nodes if n.get("Index Name") == f"{t.prefix}steps_ready"]
            assert ready, nodes
            assert "queue" in ready[0].get("Index Cond", ""), ready[0]
            assert not [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")]
            assert not [n for n in nodes if n["Node Type"] == "Seq Scan"]
        # And the claim takes mail's most urgent steps: priority first, then the oldest.
        taken = store.claim(
            ClaimRequest(frozenset({"w"}), 3, NOW, NOW + 10**9, "explain", (QueueClaim("mail"),))
        )
        assert {a.queue for a in taken} == {"mail"}
        assert {a.run_id for a in taken} == {"run_10019", "run_10016", "run_10013"}
        # A paused queue's 10,000 ready rows are not read at all: the queue's gate (paused,
        # and no forced step ready: one probe of steps_forced_ready) is a one-time filter.
        bulk = store._queries.claim_plan(
            workflows=["w"], queue="bulk", limit=8, claimed=(TOKEN, NOW, "node", NOW)
        )
        admin_conn.execute(
            f"INSERT INTO {t.pauses} (kind, name, paused_at) VALUES ('queue', 'bulk', 0)"
        )
        nodes = list(_nodes(_analyzed(admin_conn, store, bulk.update_returning_runs)))
        ready = [n for n in nodes if n.get("Index Name") == f"{t.prefix}steps_ready"]
        assert ready and all(n["Actual Loops"] == 0 for n in ready), nodes
        assert any(n.get("Index Name") == f"{t.prefix}steps_forced_ready" for n in nodes), nodes
        # A forced run's step passes the pause: the gate opens, and the claim takes it alone.
        admin_conn.execute(f"UPDATE {t.steps} SET forced = 1 WHERE id = 'step_5000'")
        taken = store.claim(
            ClaimRequest(frozenset({"w"}), 8, NOW, NOW + 10**9, "explain", (QueueClaim("bulk"),))
        )
        assert [a.run_id for a in taken] == ["run_5000"]
    finally:
        store.close()
        drop_namespace(admin_conn, t.prefix)
