"""The SQLite store: URLs, namespaces, schema checks, migrations, bad input that writes nothing."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.sql import split_statements
from cairnflow.store import RunQuery
from cairnflow_sqlite import SQLiteStore


def simple() -> cf.Workflow:
    wf = cf.Workflow("simple")
    wf.step(lambda ctx, d: {"got": d}, name="one")
    wf.step(lambda ctx, d: d, name="two", after=["one"])
    return wf


def run_one(store: SQLiteStore, payload: Any = 1, **options: Any) -> cf.RunInfo:
    store.migrate()
    with cf.Client(store, poll_interval=0.05, **options) as client:
        client.register(simple())
        return client.wait(client.enqueue("simple", payload), timeout=10)


MIGRATIONS = [
    "001_init",
    "002_partial_active_key",
    "003_schedules",
    "004_leaders",
    "005_queues",
    "006_pauses",
    "007_limits",
    "008_state",
    "009_forced",
    "010_errors",
    "011_run_labels",
    "012_servers",
    "013_keys",
    "014_rates",
    "015_archive",
    "016_step_history",
    "017_runs_overdue",
    "018_headers",
    "019_forced_ready",
    "020_step_history_branches",
    "021_lifecycle",
    "022_tenant",
    "023_runs_finished",
    "024_lifecycle_switch",
]


def raw(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def test_open_store_by_url(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = cf.open_store(f"sqlite:///{db}", table_prefix="app_", busy_timeout="2.5")
    assert isinstance(store, SQLiteStore)
    assert store.path == str(db)
    assert store.tables.runs == '"app_runs"'
    assert store.describe().durable
    monkeypatch.chdir(tmp_path)
    relative = cf.open_store("sqlite:///rel.db")
    assert relative.path == str(tmp_path / "rel.db")
    memory = cf.open_store("sqlite:///:memory:")
    assert not memory.describe().durable
    assert cf.Cap.DURABLE not in memory.capabilities
    assert cf.Cap.MULTI_PROCESS not in memory.capabilities
    with pytest.raises(cf.CairnError, match=r"sqlite:///relative\.db or sqlite:////absolute\.db"):
        cf.open_store("sqlite://relative.db")


@pytest.mark.parametrize(
    "prefix", ['cf"; DROP TABLE cf_runs; --', "CF_", "1cf", "a" * 49, "", "cf-", "cf runs"]
)
def test_hostile_prefixes_are_refused(db: Path, prefix: str) -> None:
    with pytest.raises(cf.InvalidName, match="invalid table prefix"):
        SQLiteStore(db, table_prefix=prefix)
    assert not db.exists()


def test_start_on_a_database_never_migrated_names_the_table(db: Path) -> None:
    store = SQLiteStore(db)
    client = cf.Client(store)
    client.register(simple())
    with pytest.raises(
        cf.SchemaNotReady, match=r"table cf_migrations is not readable .*run store\.migrate\(\)"
    ):
        client.start()
    assert not client.running


def test_a_newer_schema_is_refused_with_both_versions(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    raw(db, "INSERT INTO cf_migrations VALUES (99, 'future', 'x', 0)")
    known = rf"knows versions up to {len(MIGRATIONS)}"
    with pytest.raises(cf.SchemaTooNew, match=rf"schema version 99 .* {known}"):
        store.check_schema()


def test_a_missing_table_is_named(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    raw(db, "DROP TABLE cf_signals")
    with pytest.raises(cf.SchemaNotReady, match="table cf_signals is not readable"):
        store.check_schema()


def test_an_applied_migration_that_changed_is_refused(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    raw(db, "UPDATE cf_migrations SET checksum = 'tampered' WHERE version = 1")
    with pytest.raises(
        cf.CairnError, match=r"001_init was applied .* an applied migration must never change"
    ):
        SQLiteStore(db).migrate()


def test_migrate_is_idempotent_and_recorded(db: Path) -> None:
    store = SQLiteStore(db)
    assert store.migrate() == MIGRATIONS
    assert store.migrate() == []
    rows = raw(db, "SELECT version, name, length(checksum) FROM cf_migrations ORDER BY version")
    assert rows == [(n + 1, label[4:], 64) for n, label in enumerate(MIGRATIONS)]


def _older_release(db: Path, version: int) -> SQLiteStore:
    """A store of the release that knew schema versions up to ``version`` (and their tables)."""
    store = SQLiteStore(db)
    store.migrations = store.migrations[:version]
    known = ["runs", "steps", "signals"]  # a release before schedules probes these
    known += ["schedules", "ticks"] if version >= 3 else []
    store._queries.probe = {t: sql for t, sql in store._queries.probe.items() if t in known}
    if version < 8:  # a release before concurrency keys: its statements name none of them
        q = store._queries
        for name in ("_steps_of", "_steps_with_runs", "_expired", "end_run", "_runs_succeeded"):
            text = re.sub(r",\s*(s\.)?concurrency_key\b", "", getattr(q, name))
            setattr(q, name, re.sub(r",\s*fifo_key = NULL", "", text))
    if version < 20:  # a release before tenants: its statements read and write none
        _without_run_column(store, "tenant")
    if version < 15:  # a release before run headers: its statements read and write none
        _without_run_column(store, "headers")
    if version < 24:  # a release whose lifecycle triggers (if any) were permanent
        store.dialect.switches_lifecycle = False
    if version < 6:  # a release before pauses: its claim reads no pauses table
        # (the parameters of today's claim, Queries.ready_params: the gate's two, the queue,
        # the workflows, the queue's pause, each compared with the queue here)
        store._queries._ready = (
            f"SELECT id FROM {store.tables.steps} WHERE status = 'ready' AND ? = ? AND queue = ?"
            " AND workflow IN ({workflows}) AND queue = ? ORDER BY priority DESC, due_at, id"
            " LIMIT {limit}"
        )
    return store


def _without_run_column(store: SQLiteStore, column: str) -> None:
    """Make ``store``'s statements those of a release before the runs' last ``column`` (run
    headers, Cap.HEADERS; the tenant, Cap.TENANT): the newest first, as they were added."""
    q = store._queries
    for name, text in list(vars(q).items()):
        if isinstance(text, str) and column in text:
            setattr(q, name, re.sub(rf",\s*(r\.)?{column}\b", "", text))
    runs = q.insert_runs
    assert runs.columns[-1] == column, f"{column} is not the runs' newest column"
    q.insert_runs = dataclasses.replace(
        runs,
        columns=runs.columns[:-1],
        types=runs.types[:-1],
        single=re.sub(r", \?\)$", ")", re.sub(rf",\s*{column}\b", "", runs.single)),
    )
    enqueue = store._enqueue
    insert = enqueue.insert

    def insert_without(cur: Any, rows: Any) -> list[str]:
        return insert(cur, rows._replace(runs=[row[:-1] for row in rows.runs]))

    enqueue.insert = insert_without  # type: ignore[method-assign]


def scheduled() -> cf.Workflow:
    wf = cf.Workflow("scheduled", steps=[cf.Step("tick", lambda ctx, d: d)])
    wf.schedule("nightly", cron="0 3 * * *", payload={"from": "nightly"})
    return wf


def test_a_schema_one_database_is_refused_until_migrated_then_keeps_its_keys(db: Path) -> None:
    old = _older_release(db, 1)
    assert old.migrate() == ["001_init"]
    wf = cf.Workflow("keyed", steps=[cf.Step("wait", lambda ctx, d: d)])
    writer = cf.Client(old)
    writer.register(wf)
    held = writer.enqueue("keyed", 1, key="order-1")
    finished = run_one(old)
    with pytest.raises(
        cf.SchemaNotReady,
        match=r"002_partial_active_key, 003_schedules, 004_leaders, 005_queues, 006_pauses, 007",
    ):
        SQLiteStore(db).check_schema()
    new = SQLiteStore(db)
    assert new.migrate() == MIGRATIONS[1:]
    new.check_schema()
    client = cf.Client(new)
    client.register(wf)
    # The key of the unfinished run is still held, and only by it, through the new index.
    with pytest.raises(cf.DuplicateRun, match=held.id):
        client.enqueue("keyed", 2, key="order-1")
    assert client.enqueue("keyed", 3, key="order-2").id != held.id
    assert client.info(finished.ref).status is cf.Status.SUCCEEDED
    index = raw(db, "SELECT sql FROM sqlite_master WHERE name = 'cf_runs_active_key'")
    assert "WHERE active_key IS NOT NULL" in index[0][0]


def test_a_schema_two_database_is_refused_until_migrated_then_schedules_fire(db: Path) -> None:
    old = _older_release(db, 2)
    assert old.migrate() == ["001_init", "002_partial_active_key"]
    before = run_one(old)
    with pytest.raises(
        cf.SchemaNotReady,
        match=r"003_schedules, 004_leaders, 005_queues, 006_pauses, 007_limits, 008_state, "
        r"009_forced, 010_errors, 011_run_labels, 012_servers, 013_keys(, \w+)* are",
    ):
        SQLiteStore(db).check_schema()
    with pytest.raises(cf.SchemaNotReady):
        cf.Client(SQLiteStore(db)).start()  # a client refuses it too, before any statement
    new = SQLiteStore(db)
    assert new.migrate() == MIGRATIONS[2:]
    with cf.Client(new, poll_interval=0.05) as client:
        client.register(scheduled())
        ref = client.trigger_schedule("scheduled", "nightly")
        assert client.wait(ref, timeout=10).result == {"from": "nightly"}
        assert [s.name for s in client.schedules()] == ["nightly"]
        assert client.info(before.ref).status is cf.Status.SUCCEEDED


def test_a_schema_three_database_is_refused_until_migrated_then_a_leader_is_elected(
    db: Path,
) -> None:
    old = _older_release(db, 3)
    assert old.migrate() == MIGRATIONS[:3]
    before = run_one(old)
    with pytest.raises(
        cf.SchemaNotReady,
        match=r"migration\(s\) 004_leaders, 005_queues, 006_pauses, 007_limits, 008_state, "
        r"009_forced, 010_errors, 011_run_labels, 012_servers, 013_keys(, \w+)* are",
    ):
        SQLiteStore(db).check_schema()
    with pytest.raises(cf.SchemaNotReady):
        cf.Client(SQLiteStore(db), leader_election=True).start()
    new = SQLiteStore(db)
    assert new.migrate() == MIGRATIONS[3:]
    with cf.Client(new, poll_interval=0.05, leader_election=True, node_id="n1") as client:
        assert client.is_leader
        assert client.info(before.ref).status is cf.Status.SUCCEEDED
    ((node, term),) = raw(db, "SELECT node, term FROM cf_leaders WHERE role = 'scheduler'")
    assert (node, term) == ("n1", 1)


def test_drop_tables_drops_every_table(db: Path) -> None:
    store = SQLiteStore(db, table_prefix="gone_")
    store.migrate()
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'gone%'"
    assert sorted(name for (name,) in raw(db, tables)) == sorted(store.table_names())
    assert "gone_leaders" in store.table_names()
    store.drop_tables()
    assert raw(db, tables) == []


def test_migration_scripts_let_a_dba_migrate_by_hand(db: Path) -> None:
    store = SQLiteStore(db, table_prefix="dba_")
    with sqlite3.connect(db) as conn:
        for _label, script in store.migration_scripts():
            for statement in split_statements(script):
                conn.execute(statement)
    store.check_schema()
    assert run_one(store).status is cf.Status.SUCCEEDED


def test_two_prefixes_share_nothing(db: Path) -> None:
    first, second = SQLiteStore(db, table_prefix="a_"), SQLiteStore(db, table_prefix="b_")
    first.migrate()
    second.migrate()
    info = run_one(first)
    assert second.get_run(info.id) is None
    assert cf.Client(second).runs().runs == ()


def test_outcomes_survive_a_new_store_object(db: Path) -> None:
    info = run_one(SQLiteStore(db), {"order": "A-1"})
    reopened = cf.Client(SQLiteStore(db))
    again = reopened.info(info.ref)
    assert again.status is cf.Status.SUCCEEDED
    assert again.result == {"got": {"order": "A-1"}}
    assert again.steps["one"].node == info.steps["one"].node


def test_times_are_integer_nanoseconds(db: Path) -> None:
    before = time.time_ns()
    run_one(SQLiteStore(db))
    after = time.time_ns()
    ((created, finished, kind_c, kind_f),) = raw(
        db, "SELECT created_at, finished_at, typeof(created_at), typeof(finished_at) FROM cf_runs"
    )
    assert (kind_c, kind_f) == ("integer", "integer")
    assert before <= created <= finished <= after


def test_a_bad_id_generator_writes_nothing(db: Path) -> None:
    calls: list[str] = []

    def generator(kind: str) -> str:
        calls.append(kind)
        return "has a space" if kind == "step" else f"{kind}_ok{len(calls)}"

    store = SQLiteStore(db)
    store.migrate()
    client = cf.Client(store, id_generator=generator)  # type: ignore[arg-type]
    client.register(simple())
    with pytest.raises(
        cf.InvalidName, match="the id generator returned 'has a space' for kind 'step'"
    ):
        client.enqueue("simple", 1)
    assert raw(db, "SELECT COUNT(*) FROM cf_runs") == [(0,)]
    assert raw(db, "SELECT COUNT(*) FROM cf_steps") == [(0,)]


def test_custom_ids_are_used(db: Path) -> None:
    counter = iter(range(1000))
    store = SQLiteStore(db)
    store.migrate()
    info = run_one(store, id_generator=lambda kind: f"{kind}-{next(counter):04d}")
    assert info.id == "run-0000"  # the client named the run and its steps, the store wrote them
    steps = raw(db, "SELECT id, run_id, name FROM cf_steps ORDER BY position")
    assert steps == [("step-0001", "run-0000", "one"), ("step-0002", "run-0000", "two")]


def test_oversized_and_unencodable_payloads_write_nothing(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    client = cf.Client(store, payload_limit=1024)
    client.register(simple())
    with pytest.raises(cf.PayloadTooLarge):
        client.enqueue("simple", "x" * 2000)
    with pytest.raises(TypeError):
        client.enqueue("simple", object())
    with pytest.raises(cf.UnknownWorkflow):
        client.enqueue("other", 1)
    assert raw(db, "SELECT COUNT(*) FROM cf_runs") == [(0,)]


def test_duplicate_key_names_the_holder(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    client = cf.Client(store)
    client.register(simple())
    first = client.enqueue("simple", 1, key="k-1")
    with pytest.raises(cf.DuplicateRun, match=first.id):
        client.enqueue("simple", 2, key="k-1")
    with pytest.raises(cf.DuplicateRun, match=first.id):
        client.enqueue_many([cf.Job("simple", 3, key="k-2"), cf.Job("simple", 4, key="k-1")])
    assert raw(db, "SELECT COUNT(*) FROM cf_runs") == [(1,)]
    assert raw(db, "SELECT active_key FROM cf_runs") == [("k-1",)]


def test_an_unknown_cursor_is_refused(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    with pytest.raises(cf.CairnError, match="invalid run cursor"):
        cf.Client(store).runs(cursor="nope")


def test_a_database_busy_beyond_the_timeout_is_retried_not_raised(db: Path) -> None:
    store = SQLiteStore(db, busy_timeout=0.05)
    store.migrate()
    client = cf.Client(store)
    client.register(simple())
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock...
    released = threading.Timer(0.12, holder.commit)  # ...for longer than busy_timeout
    released.start()
    try:
        ref = client.enqueue("simple", 1)
    finally:
        released.join()
        holder.close()
    assert client.info(ref).status is cf.Status.QUEUED


def test_the_claim_uses_the_ready_index(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    sql, params = store._queries.claim_plan(
        workflows=["a"], queue="mail", limit=5, claimed=("s", 0, "n", 0)
    ).select_ready
    plan = raw(db, "EXPLAIN QUERY PLAN " + sql, *params)
    detail = " ".join(str(row[-1]) for row in plan)
    assert "cf_steps_ready (queue=?)" in detail  # the queue's own range of the index
    assert "TEMP B-TREE" not in detail  # the index gives the order: no sort


def _ids(sql: str, ids: list[str], *before: object) -> tuple[str, tuple[object, ...]]:
    """``sql`` with its ``{ids}`` list filled for ``ids`` (after the ``before`` values)."""
    return sql.replace("{ids}", ", ".join("?" * len(ids))), (*before, *ids)


def test_no_hot_path_statement_scans_a_table(db: Path) -> None:
    """Claims and outcomes read through the index meant for them (EXPLAIN QUERY PLAN).

    A plan may walk an index in order (the claim does, and stops after n rows);
    it may never scan a table, nor reach runs by id through another index (a
    state condition once sent run updates down the state index, over every
    active run).
    """
    store = SQLiteStore(db)
    store.migrate()
    q = store._queries
    t = store._timing.queries
    r = store._retention
    paths = store._outcomes._paths
    life = store._lifecycle
    plan = q.claim_plan(workflows=["w"], queue="default", limit=8, claimed=("s", 0, "n", 0))
    limited = q.claim_plan(
        workflows=["w"], queue="default", limit=8, claimed=("s", 0, "n", 0), global_limit=5
    )
    by_run_id = "sqlite_autoindex_cf_runs_1"
    by_tick_key = "sqlite_autoindex_cf_ticks_1"
    by_role = "sqlite_autoindex_cf_leaders_1"
    by_pause = "sqlite_autoindex_cf_pauses_1"
    by_error = "sqlite_autoindex_cf_errors_1"
    within = q.labels_within(FAILED_ACME, 2001)
    assert within is not None
    keyed = q.ready_keyed(workflows=["w"], queue="default", limit=8)
    statements = {
        "claim": (plan.update_returning, "cf_steps_ready"),
        "claim_runs": (q.claim_runs(["r1", "r2"]), by_run_id),
        "claim_inputs": (q.claim_inputs(["r1"], ["a", "b"]), "sqlite_autoindex_cf_steps_2"),
        "steps_with_runs": (q.steps_with_runs(["s1", "s2", "s3"]), by_run_id),
        "succeed": ((q.succeed, (b"1", 0, "s1", "t")), "sqlite_autoindex_cf_steps_1"),
        "runs_succeeded": (q.runs_succeeded(0, ["r1", "r2", "r3"]), by_run_id),
        "drop_signals_of": (q.drop_signals_of(["r1", "r2"]), "cf_signals_run"),
        "count_steps_done": ((q.count_steps_done, (1, "r1")), by_run_id),
        "lock_run": ((q.lock_run, ("r1",)), by_run_id),
        "release_children": (q.release_children("r1", ["b", "c"]), "sqlite_autoindex_cf_steps_2"),
        "ready_children": (q.ready_children(0, "r1", ["b", "c"]), "sqlite_autoindex_cf_steps_2"),
        "renew": (q.renew(0, [("s1", "t"), ("s2", "t")]), "sqlite_autoindex_cf_steps_1"),
        "expired": (q.expired(0, ["w"], 10), "cf_steps_running"),
        "due": (q.due(0, ["w"], 10), "cf_steps_due"),
        "promote": (q.promote(["s1", "s2"]), "sqlite_autoindex_cf_steps_1"),
        # The partial key index (schema 2): "active_key IN (...)" implies its predicate.
        "holder_of_key": (q.holder_of_key("w", ["k1", "k2"]), "cf_runs_active_key"),
        # After a refused enqueue: which of its run ids landed before (by the id index).
        "runs_named": (q.runs_named(["r1", "r2"]), by_run_id),
        # Schedules (schema 3): a pass reads its own workflows' due rows; a fire locks its
        # schedule by id; ticks go by their primary key, pruning picks by recorded_at.
        "due_schedules": (q.due_schedules(0, ["w", "v"], 10), "cf_schedules_due"),
        "due_schedules, last run": (q.due_schedules(0, ["w"], 10), by_run_id),
        "lock_schedule": ((q.lock_schedule, ("sch",)), "sqlite_autoindex_cf_schedules_1"),
        "fired": ((q.fired, (1, 1, "r1", "sch")), "sqlite_autoindex_cf_schedules_1"),
        "tick_history": ((q.tick_history, ("sch", 10)), by_tick_key),
        "prunable_ticks": ((q.prunable_ticks, (0, 100)), "cf_ticks_recorded"),
        "prunable_ticks, newest kept": ((q.prunable_ticks, (0, 100)), by_tick_key),
        "delete_ticks": (q.delete_ticks([("a", 1), ("b", 2)]), by_tick_key),
        # Leadership (schema 4): every claim and resignation goes by the role's primary key.
        "lock_leader": ((q.lock_leader, ("scheduler",)), by_role),
        "hold_leader": ((q.hold_leader, ("n", 2, 1, "scheduler")), by_role),
        "resign_leader": ((q.resign_leader, ("scheduler", "n")), by_role),
        # Pauses (schema 6): every claim probes them by the primary key; so do their writes.
        "claim, pauses": (plan.update_returning, by_pause),
        "find_pause": ((q.find_pause, ("queue", "q")), by_pause),
        "delete_pause": ((q.delete_pause, ("workflow", "w")), by_pause),
        # Global queue limits (schema 7): the limiter by its primary key, the running steps
        # counted in the queue's range of the running ones alone.
        "lock_limiter": ((q.lock_limiter, ("queue", "q")), "sqlite_autoindex_cf_limits_1"),
        "count_running": ((q.count_running, ("q",)), "cf_steps_running_queue"),
        # A limited claim counts the running in its own LIMIT, and probes the limiter row.
        "claim, limited": (limited.update_returning, "cf_steps_ready"),
        "claim, limited, running": (limited.update_returning, "cf_steps_running_queue"),
        "claim, limited, limiter": (limited.update_returning, "sqlite_autoindex_cf_limits_1"),
        # Durable step state (schema 8): a memo's probe, fence and record, a lock's take,
        # extension and release, each by a primary key.
        "read_journal": ((q.read_journal, ("r1", "a", "m")), "sqlite_autoindex_cf_journal_1"),
        "hold_step": ((q.hold_step, ("s1", "t")), "sqlite_autoindex_cf_steps_1"),
        "lock_named": ((q.lock_named, ("n",)), "sqlite_autoindex_cf_locks_1"),
        "take_named": ((q.take_named, ("t", 1, 2, "n")), "sqlite_autoindex_cf_locks_1"),
        "extend_named": ((q.extend_named, (2, "n", "t", 1)), "sqlite_autoindex_cf_locks_1"),
        "release_named": ((q.release_named, ("n", "t")), "sqlite_autoindex_cf_locks_1"),
        # Run timing (schema 9): a reschedule or a force locks its run and writes its steps by
        # id; the next due time reads the ready, due and running indexes, stopped at one row.
        "run_steps": ((t.run_steps, ("r1",)), "sqlite_autoindex_cf_steps_2"),
        "move_start": (t.move_start("scheduled", 1, ["s1", "s2"]), "sqlite_autoindex_cf_steps_1"),
        "run_at": ((t.run_at, (1, "r1")), by_run_id),
        "force_ready": (t.force_ready(1, ["s1", "s2"]), "sqlite_autoindex_cf_steps_1"),
        "force_pass": (t.force_pass(["s1", "s2"]), "sqlite_autoindex_cf_steps_1"),
        "due_ready": (t.due_ready(["w", "v"], ["default", "mail"]), "cf_steps_ready"),
        "due_ready, pauses": (t.due_ready(["w"], ["default"]), by_pause),
        "next_timed": (t.next_timed(["w", "v"], ["default", "mail"]), "cf_steps_due"),
        "next_expiry": (t.next_expiry(["w", "v"]), "cf_steps_running"),
        # Failure policies and error history (schema 10): a failure reads its run's steps by
        # the (run_id, name) key, and the run's range of the errors' primary key.
        "run_failures": ((q.run_failures, ("r1",)), "sqlite_autoindex_cf_steps_2"),
        "run_failures, run": ((q.run_failures, ("r1",)), by_run_id),
        "last_error": ((store._errors.last_error, ("r1",)), by_error),
        "trim_errors": ((store._errors.trim_errors, ("r1", 3)), by_error),
        "run_errors": ((store._errors.run_errors_of, ("r1",)), by_error),
        # Step history (schema 14) by the run's range of its index; overdue runs (schema 15,
        # RUN_TIMEOUT) from the index of unfinished runs only.
        "step_history": ((store._step_log.run_step_history, ("r1",)), "cf_step_history_run"),
        "overdue_runs": ((q.overdue_runs, ("w", 0, 10)), "cf_runs_overdue"),
        # Failure paths (#17, WAIT_BRANCH, COMPENSATION): a run's steps by the (run_id, name)
        # key, their writes by id, the run's kept error by its id.
        "run_graph": ((paths._graph_sql, ("r1",)), "sqlite_autoindex_cf_steps_2"),
        "skip_steps": (_ids(paths._skip_sql, ["s1", "s2"], 0), "sqlite_autoindex_cf_steps_1"),
        "time_out_to_branch": (
            (paths._time_out_sql, ("{}", 0, "s1", 0)),
            "sqlite_autoindex_cf_steps_1",
        ),
        "start_step": ((paths._start_sql, (0, "s1")), "sqlite_autoindex_cf_steps_1"),
        "hold_compensations": (_ids(paths._hold_sql, ["s1"]), "sqlite_autoindex_cf_steps_1"),
        "keep_run_error": ((paths._keep_error_sql, ("{}", "r1")), by_run_id),
        "run_error": ((paths._error_sql, ("r1",)), by_run_id),
        # Finding runs (#17): by queue through its index; a rare label prefix from the label
        # index's range; a common one and exact labels probed by the label's primary key.
        "list_runs by queue": (
            q.list_runs(RunQuery(queue="q"), before_seq=None, limit=51),
            "cf_runs_queue",
        ),
        "list_runs, failed, rare label prefix": (
            q.list_runs(FAILED_ACME, before_seq=None, limit=51, by_label=True),
            "cf_run_labels_value",
        ),
        "count_runs, failed, rare label prefix": (
            q.count_runs(FAILED_ACME, by_label=True),
            "cf_run_labels_value",
        ),
        "labels_within": (within, "cf_run_labels_value"),
        # Tenants (schema 20): one tenant's runs newest first along the partial tenant index
        # (tenant = ? implies its predicate), a page's cursor a range of it; counted there.
        "list_runs by tenant": (
            q.list_runs(RunQuery(tenant="acme"), before_seq=None, limit=51),
            "cf_runs_tenant",
        ),
        "list_runs by tenant, next page": (
            q.list_runs(RunQuery(tenant="acme"), before_seq=1000, limit=51),
            "cf_runs_tenant",
        ),
        "count_runs by tenant": (q.count_runs(RunQuery(tenant="acme")), "cf_runs_tenant"),
        # Statistics (Cap.STATS): each count over the index holding what it counts.
        "stats: steps now": ((store._stats._steps_now, ()), "cf_steps_ready"),
        "stats: steps now, running": ((store._stats._steps_now, ()), "cf_steps_running_queue"),
        "stats: steps now, due": ((store._stats._steps_now, ()), "cf_steps_due"),
        "stats: active runs": ((store._stats._active_runs, ()), "cf_runs_state"),
        "stats: ended runs": ((store._stats._ended_runs, (0, 60, 0)), "cf_runs_finished"),
        # Servers (Cap.SERVERS): a heartbeat by the primary key; listing and pruning by seen_at.
        "servers: heartbeat": (
            (store._servers._update, ("h", 1, "[]", 1, "v", 0, 0, 1, "n")),
            "sqlite_autoindex_cf_servers_1",
        ),
        "servers: stop": ((store._servers._stop, (0, "n")), "sqlite_autoindex_cf_servers_1"),
        "servers: list": ((store._servers._list, (0,)), "cf_servers_seen"),
        "servers: prunable": ((store._servers._prunable, (0, 100)), "cf_servers_seen"),
        "list_runs, rare exact label": (
            q.list_runs(
                RunQuery(labels={"tenant": "acme-1"}), before_seq=None, limit=51, by_label=True
            ),
            "cf_run_labels_value",
        ),
        "list_runs, failed, common label prefix": (
            q.list_runs(FAILED_ACME, before_seq=None, limit=51),
            "l USING PRIMARY KEY (run_id=? AND name=?)",
        ),
        "list_runs, queued, by label": (
            q.list_runs(
                RunQuery(statuses=frozenset({cf.Status.QUEUED}), labels={"t": "a"}, now=1),
                before_seq=None,
                limit=51,
            ),
            "l USING PRIMARY KEY (run_id=? AND name=?)",
        ),
        # Concurrency keys (schema 13): a keyed claim walks the ready index as the plain one,
        # probing each row's key by the limits' primary key and a fifo head by the run's id;
        # the keys are locked and moved by their primary key, a fifo key's head found in the
        # runs' fifo index, a hand back and a cancel go by the steps' id.
        "claim, keyed": (keyed, "cf_steps_ready"),
        "claim, keyed, keys": (keyed, "sqlite_autoindex_cf_limits_1"),
        "claim, keyed, fifo head": (keyed, by_run_id),
        "claim, keyed, pauses": (keyed, by_pause),
        "lock_key": ((q.lock_key, ("a",)), "sqlite_autoindex_cf_limits_1"),
        "move_key": ((q.move_key, (1, "a")), "sqlite_autoindex_cf_limits_1"),
        "lock_keys": (q.lock_keys(["a", "b", "c"]), "sqlite_autoindex_cf_limits_1"),
        "move_keys": (q.move_keys([(1, "a"), (-2, "b")]), "sqlite_autoindex_cf_limits_1"),
        "set_head": ((q.set_head, ("r1", "a")), "sqlite_autoindex_cf_limits_1"),
        "fifo_head": ((q.fifo_head, ("a",)), "cf_runs_fifo"),
        "head_unfinished": ((q.head_unfinished, ("r1", "a")), by_run_id),
        "keyed_steps": (q.keyed_steps(["s1", "s2"]), "sqlite_autoindex_cf_steps_1"),
        "lock_steps": (q.lock_steps(["s1", "s2"]), "sqlite_autoindex_cf_steps_1"),
        "hand_back_one": ((q.hand_back_one, (0, "s1", "t")), "sqlite_autoindex_cf_steps_1"),
        # Retention and the archive (schema 15): a chunk is a range of the finished index; the
        # move copies its runs by id and their steps by run; the archive is read newest finish
        # first along its own index, its steps by their primary key. No claim names them.
        "prunable_runs": ((r._prunable, (0, 200)), "cf_runs_finished"),
        "archive_runs": (_listed(r._archive_runs, ["r1", "r2"]), by_run_id),
        "archive_steps": (_listed(r._archive_steps, ["r1", "r2"]), "sqlite_autoindex_cf_steps_2"),
        "stamp_archived": (
            _listed(r._stamp, ["r1", "r2"], 1),
            "sqlite_autoindex_cf_runs_archive_1",
        ),
        "archived_first": ((r._first, (51,)), "cf_runs_archive_finished"),
        "archived_after": ((r._after, (5, 5, "r1", 51)), "cf_runs_archive_finished"),
        "archived_steps": (
            _listed(r._steps, ["r1", "r2"]),
            "sqlite_autoindex_cf_steps_archive_1",
        ),
        # Lifecycle events (schema 21): the triggers probe the subscriptions by their primary
        # key at each transition; a claim reads its channel's oldest free rows by the channel
        # index; leasing, renewing, releasing and deleting go by the rows' ids.
        "lifecycle: probe": (
            (
                "SELECT 1 FROM cf_lifecycle_subs WHERE channel = 'events' AND workflow IN (?, '')",
                ("w",),
            ),
            "sqlite_autoindex_cf_lifecycle_subs_1",
        ),
        "lifecycle: free": (
            (life._free.format(workflows=" AND workflow IN (?, ?)"), ("events", 0, "w", "v", 9)),
            "cf_lifecycle_channel",
        ),
        "lifecycle: lease": (_listed(life._lease, ["1", "2"], "t", 1), "INTEGER PRIMARY KEY"),
        "lifecycle: read": (_listed(life._read, ["1", "2"]), "INTEGER PRIMARY KEY"),
        "lifecycle: renew": (_listed(life._renew, ["1", "2"], 1, "t"), "INTEGER PRIMARY KEY"),
        "lifecycle: release": ((life._release, (1, 1, "t")), "INTEGER PRIMARY KEY"),
        "lifecycle: ack": (_listed(life._ack, ["1", "2"], "t"), "INTEGER PRIMARY KEY"),
    }
    with sqlite3.connect(db) as conn:
        for name, ((sql, params), index) in statements.items():
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
            details = [str(row[-1]) for row in rows]
            # "SCAN s": an aliased table (the schedules' reads) is named by its alias.
            # "SCAN x" of a "CO-ROUTINE x" reads a subquery's own rows, not a table.
            subqueries = {d.removeprefix("CO-ROUTINE ") for d in details if d.startswith("CO-")}
            bare = [
                d
                for d in details
                if d.startswith("SCAN ") and " INDEX " not in d and d[5:] not in subqueries
            ]
            assert not bare, f"{name} scans a table: {details}"
            assert any(index in d for d in details), f"{name} does not use {index}: {details}"


def _listed(sql: str, ids: list[str], *before: object) -> tuple[str, tuple[object, ...]]:
    """``sql`` with its ``{ids}`` list filled for ``ids`` (after the ``before`` values)."""
    return sql.replace("{ids}", ", ".join("?" * len(ids))), (*before, *ids)


FAILED_ACME = RunQuery(statuses=frozenset({cf.Status.FAILED}), label_prefix=("tenant", "acme-1"))


def test_labels_of_runs_made_before_the_label_index_are_found_after_migrating(db: Path) -> None:
    old = _older_release(db, 7)
    old.migrate()
    raw(
        db,
        "INSERT INTO cf_runs (id, workflow, queue, state, payload, labels, steps_left, "
        "created_at, run_at) VALUES ('run_old', 'simple', 'default', 'succeeded', x'7b7d', "
        """'{"tenant": "acme-12", "team": "é"}', 0, 1, 1)""",
    )
    new = SQLiteStore(db)
    assert new.migrate() == MIGRATIONS[7:]  # the label index (011) backfills the old labels
    client = cf.Client(new)
    assert [r.id for r in client.runs(label_prefix=("tenant", "acme-1")).runs] == ["run_old"]
    assert [r.id for r in client.runs(labels={"team": "é"}).runs] == ["run_old"]


def test_a_path_in_a_missing_directory_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "flows.db"
    with pytest.raises(cf.StoreOpenError, match=r"nowhere/flows.db: the directory .* does not"):
        cf.open_store(f"sqlite:///{missing}")
    assert not missing.parent.exists()  # nothing made on the way


def test_a_directory_as_the_path_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(cf.StoreOpenError, match=r"is a directory; name a file in it"):
        cf.open_store(f"sqlite:///{tmp_path}")


def test_only_a_limited_queue_sends_the_limiters_statements(db: Path) -> None:
    # Plain W2 keeps its claim: an unlimited queue sends what it did. A queue with a global
    # limit adds one (lock the limiter) once its row was created: the claim statement counts
    # the running itself, in its LIMIT (Dialect.limit_expressions).
    from cairnflow.store import ClaimRequest, QueueClaim

    store = SQLiteStore(db)
    store.migrate()
    client = cf.Client(store)
    client.register(cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)]))
    for n in range(10):
        client.enqueue("w", n)

    def statements(*queues: QueueClaim) -> tuple[int, int]:
        before = store.stats.snapshot()["statements"]
        now = time.time_ns()
        taken = store.claim(ClaimRequest(frozenset({"w"}), 2, now, now + 10**12, "n", queues))
        return store.stats.snapshot()["statements"] - before, len(taken)

    plain, taken = statements(QueueClaim("default"))  # the claim, and the runs it leased
    assert taken == 2
    assert statements(QueueClaim("default", None, 3)) == (2 + 1 + plain, 1)  # row made once
    assert statements(QueueClaim("default", None, 3)) == (1 + 1, 0)  # 3 running: none taken
    assert statements(QueueClaim("default", None, 5)) == (1 + plain, 2)
    assert statements(QueueClaim("default")) == (0 + plain, 2)  # unlimited: as before
    store.close()


def test_a_limiter_row_deleted_by_hand_holds_its_queue_for_one_claim_only(db: Path) -> None:
    # The claim counts the running under the limiter's lock; a row deleted since it was
    # created locks nothing, so that claim takes nothing of the queue (never more than the
    # limit) and the row is created again before the next claim, which takes its room.
    from cairnflow.store import ClaimRequest, QueueClaim

    store = SQLiteStore(db)
    store.migrate()
    client = cf.Client(store)
    client.register(cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)]))
    for n in range(10):
        client.enqueue("w", n)
    limited = (QueueClaim("default", None, 3),)

    def claim() -> int:
        now = time.time_ns()
        request = ClaimRequest(frozenset({"w"}), 5, now, now + 10**12, "n", limited)
        return len(store.claim(request))

    assert claim() == 3
    raw(db, "DELETE FROM cf_limits WHERE kind = 'queue'")
    assert claim() == 0  # no row, no lock: nothing taken
    assert raw(db, "SELECT count(*) FROM cf_limits WHERE kind = 'queue'") == [(0,)]
    assert claim() == 0  # made again; still 3 running of 3
    assert raw(db, "SELECT count(*) FROM cf_limits WHERE kind = 'queue'") == [(1,)]
    raw(db, "UPDATE cf_steps SET status = 'ready' WHERE status = 'running'")
    assert claim() == 3
    store.close()


def test_only_a_keyed_claim_sends_the_keys_statements(db: Path) -> None:
    # Plain W2 keeps its claim: a claim that does not honour keys sends the statement it
    # did, which reads nothing of the limits table. A keyed claim reads its candidates,
    # locks their keys (one statement), moves the counts (one), and leases by id.
    from cairnflow.store import ClaimRequest

    store = SQLiteStore(db)
    store.migrate()
    q = store._queries
    plain = q.claim_plan(workflows=["w"], queue="default", limit=8, claimed=("s", 0, "n", 0))
    assert "limits" not in plain.update_returning[0]
    assert "concurrency_key" not in plain.update_returning[0]
    client = cf.Client(store)
    keyed = cf.Workflow(
        "w",
        steps=[cf.Step("a", lambda c, d: d)],
        concurrency=cf.Concurrency(key=lambda p: f"k{p % 2}", limit=1),
    )
    client.register(keyed)
    for n in range(6):
        client.enqueue("w", n)

    def statements(keys: bool) -> tuple[int, list[str]]:
        before = store.stats.snapshot()["statements"]
        now = time.time_ns()
        request = ClaimRequest(frozenset({"w"}), 4, now, now + 10**12, "n", keys=keys)
        taken = store.claim(request)
        return store.stats.snapshot()["statements"] - before, sorted(a.run_id for a in taken)

    sent, taken = statements(keys=True)
    assert len(taken) == 2  # one run of each key: the limit is 1
    # candidates, lock both keys (one statement), move the counts, lease by id, read the rows
    assert sent == 5, sent
    # Both keys full: the candidates' statement skips every row, and nothing is locked.
    assert statements(keys=True) == (1, [])
    plain_sent, plain_taken = statements(keys=False)  # keys ignored: the plain claim
    assert (plain_sent, len(plain_taken)) == (1 + 1, 4)  # the claim, and the runs it leased
    store.close()


def test_deleting_a_run_leaves_no_row_of_it_in_any_table(db: Path) -> None:
    # Rows no read of the SPI shows once the run is gone (its labels, its error history, its
    # memos) must go with it (Cap.DELETE_RUN): counted table by table.
    store = cf.open_store(f"sqlite:///{db}")
    store.migrate()
    wf = cf.Workflow("doomed")

    @wf.step
    def memo_then_fail(ctx: cf.StepContext, data: Any) -> None:
        ctx.memo("once", lambda: 1)
        raise cf.Permanent(RuntimeError("broken"))

    try:
        client = cf.Client(store, poll_interval=0.05)
        client.register(wf)
        with client:
            ref = client.enqueue("doomed", 1, labels={"team": "x"})
            assert client.wait(ref, timeout=20).status is cf.Status.FAILED
        assert client.delete_runs(ref) == 1
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        for table, column in (
            ("cf_runs", "id"),
            ("cf_steps", "run_id"),
            ("cf_signals", "run_id"),
            ("cf_errors", "run_id"),
            ("cf_run_labels", "run_id"),
            ("cf_journal", "scope"),
        ):
            (left,) = conn.execute(
                f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (ref.id,)
            ).fetchone()
            assert left == 0, f"{table} still holds rows of the deleted run"


def test_enqueue_tx_refuses_an_autocommit_connection_and_another_object(db: Path) -> None:
    store = SQLiteStore(str(db))
    store.migrate()
    client = cf.Client(store)
    client.register(simple())
    autocommit = sqlite3.connect(str(db), isolation_level=None)
    try:
        # Outside a transaction each INSERT would commit alone: refused, nothing written.
        with pytest.raises(cf.CairnError, match="autocommit"):
            client.enqueue_tx(autocommit, "simple", 1)
        assert raw(db, f"SELECT COUNT(*) FROM {store.tables.prefix}runs") == [(0,)]
        # After its BEGIN the same connection holds a transaction: taken, and rolled back.
        autocommit.execute("BEGIN")
        ref = client.enqueue_tx(autocommit, "simple", 2)
        autocommit.rollback()
        assert store.get_run(ref.id) is None
    finally:
        autocommit.close()
    with pytest.raises(TypeError, match=r"sqlite3\.Connection"):
        client.enqueue_tx(object(), "simple", 3)
    store.close()


class _PipeNotifier:
    """A notifier of the test's own: a bus like ``LocalNotifier`` that says it is not one.

    Anything but the in-process bus is taken to reach other processes (core's rule,
    ``cairnflow.notify.reaches_other_processes``); the broker notifiers' own tests
    (contrib/redis, contrib/nats) run the kit with real ones."""

    def __init__(self) -> None:
        self.bus = cf.LocalNotifier()
        self.closed = 0

    def notify(self, channel: str) -> None:
        self.bus.notify(channel)

    def listen(self, channel: str, wake: Any) -> Any:
        return self.bus.listen(channel, wake)

    def close(self) -> None:
        self.closed += 1


def test_a_notifier_beyond_the_process_declares_notify_and_is_closed_with_the_store(
    db: Path,
) -> None:
    notifier = _PipeNotifier()
    store = SQLiteStore(db, notifier=notifier)
    try:
        assert cf.Cap.NOTIFY in store.capabilities
        assert cf.Cap.NOTIFY not in SQLiteStore.capabilities  # the class is unchanged
        assert store.default_notifier() is notifier
    finally:
        store.close()
    assert notifier.closed == 1
    plain = SQLiteStore(db)
    try:
        assert cf.Cap.NOTIFY not in plain.capabilities
    finally:
        plain.close()


def test_a_notifier_is_refused_for_memory_and_when_it_is_not_one(db: Path) -> None:
    with pytest.raises(ValueError, match="memory"):
        SQLiteStore(":memory:", notifier=_PipeNotifier())
    with pytest.raises(TypeError, match="Notifier"):
        SQLiteStore(db, notifier="redis://127.0.0.1:6379")  # type: ignore[arg-type]


def test_a_paused_queue_s_claim_reads_none_of_its_ready_rows(db: Path) -> None:
    # The queue's gate ("not paused, or a forced step of it is ready") is folded into the
    # index key (Dialect.gate_in_queue_key): a paused queue's claim seeks nothing, where it
    # walked every ready row looking for forced ones. Counted in SQLite's virtual machine
    # instructions (a progress handler), never timed.
    store = SQLiteStore(db)
    store.migrate()
    client = cf.Client(store)
    client.register(cf.Workflow("w", queue="bulk", steps=[cf.Step("a", lambda c, d: d)]))
    for start in range(0, 5000, 1000):
        client.enqueue_many(cf.Job("w", n) for n in range(start, start + 1000))
    client.pause_queue("bulk")
    sql, params = store._queries.claim_plan(
        workflows=["w"], queue="bulk", limit=8, claimed=("s", 0, "n", 0)
    ).select_ready

    def instructions() -> tuple[int, int]:
        counted = [0]

        def tick() -> int:
            counted[0] += 1
            return 0

        with sqlite3.connect(db) as conn:
            conn.set_progress_handler(tick, 100)
            rows = conn.execute(sql, params).fetchall()
        return counted[0] * 100, len(rows)

    paused, taken = instructions()
    assert taken == 0
    # A forced step at the back of the queue opens the gate: the claim walks to it.
    raw(db, "UPDATE cf_steps SET forced = 1 WHERE rowid = (SELECT max(rowid) FROM cf_steps)")
    walked, taken = instructions()
    assert taken == 1
    assert walked > 10 * 5000, walked  # the walk the gate spares: every ready row visited
    assert paused < 1000, paused
    store.close()
