"""The MySQL store on a real server (MariaDB and MySQL): URLs, schema, sessions, errors, pool."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pymysql
import pytest

import cairnflow as cf
from cairnflow import ids
from cairnflow.sql import ErrorClass, split_statements
from cairnflow.store import AttemptState, ClaimRequest, NewRun, NewStep, QueueClaim, Succeeded
from cairnflow.testing import wait_until
from cairnflow_mysql import (
    MySQLStore,
    UnsupportedServer,
    classify_mysql_error,
    parse_server_version,
    parse_url,
)
from cairnflow_mysql import _store as store_module

Server = Any  # conftest.Server: the server under test and raw connections to it

MIGRATIONS = [
    "001_runs",
    "002_steps",
    "003_signals",
    "004_schedules",
    "005_ticks",
    "006_leaders",
    "007_claim_by_queue",
    "008_pauses",
    "009_limits",
    "010_journal",
    "011_locks",
    "012_forced",
    "013_errors",
    "014_run_labels",
    "015_run_labels_backfill",
    "016_servers",
    "017_step_keys",
    "018_run_fifo",
    "019_key_counts",
    "020_rates",
    "021_runs_archive",
    "022_steps_archive",
    "023_runs_finished",
    "024_step_history",
    "025_step_history_trigger",
    "026_runs_overdue",
    "027_headers",
    "028_archive_headers",
    "029_forced_ready",
    "030_step_history_branches_drop",
    "031_step_history_branches",
    "032_lifecycle",
    "033_lifecycle_subs",
    "034_lifecycle_step_trigger",
    "035_lifecycle_run_trigger",
    "036_tenant",
    "037_archive_tenant",
    "038_step_history_trim_drop",
    "039_step_history_trim",
]


def simple() -> cf.Workflow:
    wf = cf.Workflow("simple")
    wf.step(lambda ctx, d: {"got": d}, name="one")
    wf.step(lambda ctx, d: d, name="two", after=["one"])
    return wf


def run_one(store: MySQLStore, payload: Any = 1, **enqueue: Any) -> cf.RunInfo:
    with cf.Client(store, poll_interval=0.05) as client:
        client.register(simple())
        return client.wait(client.enqueue("simple", payload, **enqueue), timeout=20)


class Counting:
    """An error classifier that counts what it saw, then defers to the driver's."""

    def __init__(self) -> None:
        self.seen: list[tuple[int | None, ErrorClass]] = []
        self.lock = threading.Lock()

    def __call__(self, error: BaseException) -> ErrorClass:
        found = classify_mysql_error(error)
        code = error.args[0] if error.args and isinstance(error.args[0], int) else None
        with self.lock:
            self.seen.append((code, found))
        return found

    def codes(self) -> list[int | None]:
        with self.lock:
            return [code for code, _ in self.seen]


# -- opening ------------------------------------------------------------------------------------
def test_open_store_by_url_with_either_scheme(server: Server, prefix: str) -> None:
    for scheme in ("mysql", "mariadb"):
        url = scheme + server.url[server.url.index("://") :]
        store = cf.open_store(url + "?pool_size=3&ping_interval=0", table_prefix=prefix)
        try:
            assert isinstance(store, MySQLStore)
            assert store.tables.runs == f"`{prefix}runs`"
            info = store.describe()
            assert info.driver == "mysql"
            assert info.durable
            assert info.url == parse_url(url).redacted()  # never a password
            assert info.server == store.server.name
            assert store._connections.max_size == 3  # type: ignore[attr-defined]
        finally:
            store.close()


def test_opening_a_store_fails_at_once_with_the_servers_reason(server: Server) -> None:
    # Loopback only: a closed port on 127.0.0.1, and the test server with a user and a
    # database that do not exist.
    parts = parse_url(server.url)
    with pytest.raises(cf.Unavailable, match="Connection refused") as refused:
        cf.open_store("mysql://root@127.0.0.1:1/test").migrate()
    assert refused.value.__cause__ is not None
    with pytest.raises(cf.StoreOpenError, match="Access denied for user 'cairnflow_nosuch'"):
        cf.open_store(f"mysql://cairnflow_nosuch@{parts.host}:{parts.port}/test").migrate()
    user = server.url.split("://", 1)[1].split("@", 1)[0]
    with pytest.raises(cf.StoreOpenError, match="Unknown database 'cairnflow_nosuchdb'"):
        cf.open_store(f"mysql://{user}@{parts.host}:{parts.port}/cairnflow_nosuchdb").migrate()


def test_the_real_server_is_accepted_and_recognised(server: Server, prefix: str) -> None:
    store = MySQLStore(server.url, table_prefix=prefix)
    try:
        ((raw,),) = server.query("SELECT VERSION()")
        assert store.server == parse_server_version(str(raw))
        assert store.server.supported
        assert store.server.flavor == server.kind
        assert store.dialect.server_version(None) == store.server.name
    finally:
        store.close()


@pytest.mark.parametrize(
    ("stub", "found"),
    [("5.7.44-log", "MySQL 5.7.44"), ("10.5.22-MariaDB", "MariaDB 10.5.22")],
)
def test_a_server_reporting_an_old_version_is_refused(
    server: Server, prefix: str, monkeypatch: pytest.MonkeyPatch, stub: str, found: str
) -> None:
    monkeypatch.setattr(store_module, "_select_server", lambda cursor: (stub, 16 << 20))
    with pytest.raises(UnsupportedServer) as caught:
        MySQLStore(server.url, table_prefix=prefix)
    message = str(caught.value)
    assert f"runs {found} ({stub!r})" in message
    assert "needs MySQL 8.0.1 or newer, or MariaDB 10.6 or newer" in message
    assert server.tables(f"{prefix}%") == []


@pytest.mark.parametrize("hostile", ["cf`; DROP TABLE cf_runs; --", "CF_", "1cf", "a" * 49])
def test_a_hostile_prefix_is_refused_and_nothing_is_created(server: Server, hostile: str) -> None:
    before = server.tables("%DROP%")
    with pytest.raises(cf.InvalidName, match="invalid table prefix"):
        MySQLStore(server.url, table_prefix=hostile)
    assert server.tables("%DROP%") == before
    assert server.tables(hostile.replace("_", "\\_") + "%") == []


# -- every connection's session -----------------------------------------------------------------
def test_every_connection_is_utf8mb4_read_committed_strict_and_counts_matched_rows(
    store: MySQLStore,
) -> None:
    variable = store.server.isolation_variable
    with store._connections.connection() as conn:  # type: ignore[attr-defined]
        with conn.cursor() as cursor:
            cursor.execute(
                f"SELECT @@SESSION.{variable}, @@SESSION.sql_mode, @@character_set_client, "
                "@@character_set_results, @@autocommit"
            )
            isolation, mode, client, results, autocommit = cursor.fetchone()
        conn.rollback()
        assert conn.client_flag & pymysql.constants.CLIENT.FOUND_ROWS
    assert isolation == "READ-COMMITTED"
    assert "STRICT_ALL_TABLES" in mode
    assert "ANSI_QUOTES" not in mode
    assert (client, results, autocommit) == ("utf8mb4", "utf8mb4", 0)


def test_tables_are_innodb_utf8mb4_bin_with_bigint_times(store: MySQLStore, server: Server) -> None:
    tables = server.query(
        "SELECT table_name, engine, table_collation FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name IN (%s, %s, %s)",
        *[store.tables.unqualified(t) for t in ("runs", "steps", "signals")],
    )
    assert len(tables) == 3
    assert {(engine, collation) for _, engine, collation in tables} == {("InnoDB", "utf8mb4_bin")}
    columns = server.query(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = DATABASE() AND table_name LIKE %s",
        store.tables.prefix.replace("_", "\\_") + "%",
    )
    times = {name: kind for name, kind in columns if name.endswith("_at") or name == "lease_until"}
    assert times and set(times.values()) == {"bigint"}


def test_a_fenced_write_that_changes_no_value_still_counts(store: MySQLStore) -> None:
    # Without CLIENT.FOUND_ROWS, an UPDATE writing the values a row already has reports
    # 0 rows, and renewing a lease to the same instant would look like a lost lease.
    run_id = create(store, [("one", ())])
    (attempt,) = claim(store, limit=1)
    assert attempt.run_id == run_id
    until = time.time_ns() + 60 * 10**9
    for _ in range(2):
        result = store.renew([attempt.token], until)
        assert (result.lost, result.cancelled) == (frozenset(), frozenset())


# -- schema ---------------------------------------------------------------------------------------
def test_a_database_never_migrated_is_not_ready(server: Server, prefix: str) -> None:
    store = MySQLStore(server.url, table_prefix=prefix)
    try:
        client = cf.Client(store)
        client.register(simple())
        with pytest.raises(
            cf.SchemaNotReady,
            match=rf"table {prefix}migrations is not readable .*run store\.migrate\(\)",
        ):
            client.start()
        assert not client.running
    finally:
        store.close()


def test_migrate_is_idempotent_and_recorded(server: Server, prefix: str) -> None:
    store = MySQLStore(server.url, table_prefix=prefix)
    try:
        assert store.migrate() == MIGRATIONS
        assert store.migrate() == []
        rows = server.query(f"SELECT version, name, LENGTH(checksum) FROM `{prefix}migrations`")
        assert rows == [(n + 1, label[4:], 64) for n, label in enumerate(MIGRATIONS)]
        store.check_schema()
    finally:
        store.close()


def test_each_migration_file_is_one_statement() -> None:
    from cairnflow.sql import Tables, load_migrations
    from cairnflow_mysql import MySQLDialect

    tables = Tables.build("cf_", None, MySQLDialect().quote)
    for migration in load_migrations("cairnflow_mysql"):
        (statement,) = migration.statements(tables)
        # Safe to run twice: a table made only if missing, an index dropped and added
        # again under its own name (MySQL has no DROP INDEX IF EXISTS), columns added by one
        # ALTER TABLE, which the migrator takes as applied when its column or index exists
        # (MySQL 8 has no ADD COLUMN IF NOT EXISTS; one ALTER TABLE applies all of it or
        # nothing), an index made by CREATE INDEX (taken as applied when it exists), or rows
        # copied with INSERT IGNORE into a table whose primary key refuses
        # them the second time, or a trigger dropped if it exists (the next file makes it).
        rebuilt = re.search(
            r"^ALTER TABLE \S+\s+DROP INDEX (`\w+`),\s+ADD INDEX \1 \([^)]*\)\Z",
            statement,
            re.MULTILINE,
        )
        added = re.search(r"^ALTER TABLE \S+\s+ADD (COLUMN|INDEX) ", statement, re.MULTILINE)
        copied = re.search(r"^INSERT IGNORE INTO ", statement, re.MULTILINE)
        indexed = re.search(r"^CREATE INDEX ", statement, re.MULTILINE)  # 1061: applied
        dropped = re.search(r"^DROP TRIGGER IF EXISTS ", statement, re.MULTILINE)  # then made
        assert "IF NOT EXISTS" in statement or rebuilt or added or copied or indexed or dropped, (
            migration.label
        )


def test_a_migrator_that_died_after_the_ddl_does_not_wedge_the_next(
    store: MySQLStore, server: Server, prefix: str
) -> None:
    # DDL commits on its own: a migrator can die after CREATE TABLE, before the ledger row.
    server.query(f"DELETE FROM `{prefix}migrations` WHERE version >= 2")
    again = MySQLStore(server.url, table_prefix=prefix)
    try:
        assert again.migrate() == MIGRATIONS[1:]
        again.check_schema()
        assert run_one(again).status is cf.Status.SUCCEEDED
    finally:
        again.close()


def test_a_namespace_before_schedules_is_refused_until_migrated(
    server: Server, prefix: str
) -> None:
    old = MySQLStore(server.url, table_prefix=prefix)
    old.migrations = old.migrations[:3]  # the release before schedules
    new = MySQLStore(server.url, table_prefix=prefix)
    try:
        assert old.migrate() == MIGRATIONS[:3]
        with pytest.raises(
            cf.SchemaNotReady,
            match=r"004_schedules, 005_ticks, 006_leaders, 007_claim_by_queue, 008_pauses, 009",
        ):
            new.check_schema()
        assert new.migrate() == MIGRATIONS[3:]
        new.check_schema()
        assert new.list_schedules() == []
    finally:
        old.close()
        new.close()


def test_a_namespace_before_leaders_is_refused_until_migrated(server: Server, prefix: str) -> None:
    old = MySQLStore(server.url, table_prefix=prefix)
    old.migrations = old.migrations[:5]  # the release before leader election
    new = MySQLStore(server.url, table_prefix=prefix)
    try:
        assert old.migrate() == MIGRATIONS[:5]
        with pytest.raises(
            cf.SchemaNotReady,
            match=(
                r"migration\(s\) 006_leaders, 007_claim_by_queue, 008_pauses, 009_limits, "
                r"010_journal, 011_locks, 012_forced, 013_errors, 014_run_labels, "
                r"015_run_labels_backfill, 016_servers, 017_step_keys, 018_run_fifo, "
                r"019_key_counts(, \w+)* are"
            ),
        ):
            new.check_schema()
        assert new.migrate() == MIGRATIONS[5:]
        new.check_schema()
        held = new.claim_leadership("scheduler", "n1", lease_now=1, lease_until=2)
        assert (held.node, held.term) == ("n1", 1)
    finally:
        old.close()
        new.close()


def test_an_applied_migration_that_changed_is_refused(
    store: MySQLStore, server: Server, prefix: str
) -> None:
    server.query(f"UPDATE `{prefix}migrations` SET checksum = 'tampered' WHERE version = 2")
    with pytest.raises(cf.CairnError, match=r"002_steps was applied .* must never change"):
        store.migrate()


def test_a_newer_schema_and_a_missing_table_are_named(
    store: MySQLStore, server: Server, prefix: str
) -> None:
    server.query(f"DROP TABLE `{prefix}signals`")
    with pytest.raises(cf.SchemaNotReady, match=f"table {prefix}signals is not readable"):
        store.check_schema()
    server.query(f"INSERT INTO `{prefix}migrations` VALUES (99, 'future', 'x', 0)")
    known = rf"knows versions up to {len(MIGRATIONS)}"
    with pytest.raises(cf.SchemaTooNew, match=rf"schema version 99 .* {known}"):
        store.check_schema()


def test_migration_scripts_let_a_dba_migrate_by_hand(server: Server, prefix: str) -> None:
    store = MySQLStore(server.url, table_prefix=prefix)
    try:
        conn = server.connect()
        with conn.cursor() as cursor:
            for _label, script in store.migration_scripts():
                for statement in split_statements(script):
                    cursor.execute(statement)
        store.check_schema()
        assert store.migrate() == []
        assert run_one(store).status is cf.Status.SUCCEEDED
    finally:
        store.close()


# -- values ----------------------------------------------------------------------------------
def test_utf8mb4_round_trips_in_payloads_labels_keys_outputs_and_errors(store: MySQLStore) -> None:
    wf = cf.Workflow("emoji")

    @wf.step
    def greet(ctx: cf.StepContext, data: Any) -> Any:
        if data == "fail 💥":
            raise cf.Permanent("failed with 💥 and 中文")
        return {"echo": data, "node": ctx.node_id}

    labels = {"team": "🦊 renard", "lang": "日本語"}
    with cf.Client(store, poll_interval=0.05, node_id="nœud-🚀") as client:
        client.register(wf)
        ok = client.enqueue("emoji", "héllo 🌍", key="clé-🔑", labels=labels)
        bad = client.enqueue("emoji", "fail 💥")
        info = client.wait(ok, timeout=20)
        failed = client.wait(bad, timeout=20)
        found = client.runs(labels={"team": "🦊 renard"}).runs
    assert info.result == {"echo": "héllo 🌍", "node": "nœud-🚀"}
    assert info.key == "clé-🔑"
    assert info.labels == labels
    assert info.steps["greet"].node == "nœud-🚀"
    assert [r.id for r in found] == [ok.id]
    assert failed.status is cf.Status.FAILED
    assert failed.error is not None
    assert "💥 and 中文" in failed.error.message


def test_idempotency_keys_are_compared_exactly(store: MySQLStore) -> None:
    client = cf.Client(store)
    client.register(simple())
    first = client.enqueue("simple", 1, key="Key-A")
    # Different case, trailing space, different accent: all different keys.
    for other in ("key-a", "KEY-A", "Key-A ", "Key-Á"):
        client.enqueue("simple", 2, key=other)
    with pytest.raises(cf.DuplicateRun, match=first.id):
        client.enqueue("simple", 3, key="Key-A")
    assert len(client.runs(limit=50).runs) == 5


def test_names_are_case_sensitive(store: MySQLStore) -> None:
    upper = cf.Workflow("Orders")
    upper.step(lambda ctx, d: "upper", name="Step")
    lower = cf.Workflow("orders")
    lower.step(lambda ctx, d: "lower", name="step")
    with cf.Client(store, poll_interval=0.05) as client:
        client.register(upper, lower)
        a, b = client.enqueue("Orders"), client.enqueue("orders")
        assert client.wait(a, timeout=20).result == "upper"
        assert client.wait(b, timeout=20).result == "lower"
    assert [r.workflow for r in cf.Client(store).runs(workflow="orders").runs] == ["orders"]


def test_the_session_time_zone_shifts_nothing(server: Server, prefix: str) -> None:
    east = MySQLStore(
        server.url, table_prefix=prefix, connect_args={"init_command": "SET time_zone = '+05:00'"}
    )
    west = MySQLStore(
        server.url, table_prefix=prefix, connect_args={"init_command": "SET time_zone = '-08:00'"}
    )
    try:
        east.migrate()
        for store, zone in ((east, "+05:00"), (west, "-08:00")):
            with store._connections.connection() as conn:  # type: ignore[attr-defined]
                with conn.cursor() as cursor:
                    cursor.execute("SELECT @@SESSION.time_zone")
                    assert cursor.fetchone() == (zone,)
                conn.rollback()
        before = time.time_ns()
        with cf.Client(east) as enqueuer:
            enqueuer.register(simple())
            ref = enqueuer.enqueue("simple", "tz", delay=0.5)
        with cf.Client(west, poll_interval=0.05) as worker:
            worker.register(simple())
            info = worker.wait(ref, timeout=20)
        after = time.time_ns()
        assert info.status is cf.Status.SUCCEEDED
        east_run, west_run = east.get_run(ref.id), west.get_run(ref.id)
        assert east_run == west_run
        assert east_run is not None
        assert before <= east_run.created_at <= east_run.run_at - 5 * 10**8 + 10**7
        assert east_run.run_at <= min(s.started_at or 0 for s in east_run.steps)
        assert east_run.finished_at is not None and east_run.finished_at <= after
        # What the server stores is the same integer whatever zone a session reads it in.
        raw = []
        for zone in ("+05:00", "-08:00", "SYSTEM"):
            conn = server.connect(init_command=f"SET time_zone = '{zone}'")
            with conn.cursor() as cursor:
                cursor.execute(
                    f"SELECT created_at, run_at, finished_at FROM `{prefix}runs` WHERE id = %s",
                    (ref.id,),
                )
                raw.append(cursor.fetchall())
        expected = ((east_run.created_at, east_run.run_at, east_run.finished_at),)
        assert raw == [expected] * 3
        # The server's clock (for Cap.DATABASE_CLOCK) is read in UTC, not in the session's zone.
        now = time.time_ns()
        for store in (east, west):
            assert abs(store.database_now() - now) < 5 * 10**9
        assert abs(east.database_now() - west.database_now()) < 5 * 10**9
    finally:
        east.close()
        west.close()


# -- claims ------------------------------------------------------------------------------------
def create(store: MySQLStore, steps: list[tuple[str, tuple[str, ...]]], priority: int = 0) -> str:
    now = time.time_ns()
    children = {name: tuple(c for c, parents in steps if name in parents) for name, _ in steps}
    new = NewRun(
        id=ids.default_id_generator("run"),
        workflow="wf",
        queue="default",
        priority=priority,
        payload=b"{}",
        steps=tuple(
            NewStep(name, cf.StepKind.TASK, parents, children[name]) for name, parents in steps
        ),
        step_ids=tuple(ids.default_id_generator("step") for _ in steps),
        created_at=now,
        run_at=now,
    )
    (run_id,) = store.create_runs([new])
    return run_id


def claim(store: MySQLStore, limit: int) -> list[Any]:
    now = time.time_ns()
    return store.claim(
        ClaimRequest(
            workflows=frozenset({"wf"}),
            limit=limit,
            now=now,
            lease_until=now + 60 * 10**9,
            node_id="n",
        )
    )


def test_the_claim_reads_its_index_in_order(store: MySQLStore, server: Server) -> None:
    for i in range(50):
        create(store, [("one", ())], priority=i % 3)
    server.query(f"ANALYZE TABLE `{store.tables.prefix}steps`")
    # The claim's own statement: one queue's ready steps, most urgent first.
    claim_plan = store._queries.claim_plan(
        workflows=["wf"], queue="default", limit=5, claimed=("s", 0, "n", 0)
    )
    sql, params = claim_plan.select_ready
    conn = server.connect()
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("EXPLAIN " + store.dialect.sql(sql), params)
        plans = cursor.fetchall()
    (plan,) = [p for p in plans if p["table"] == "s"]
    # The pauses are read by their primary key (or found empty at once), never scanned.
    for pauses in [p for p in plans if p["table"] not in ("s", "f")]:
        assert pauses["key"] == "PRIMARY" or "no matching row" in str(pauses["Extra"]), plans
    # The queue's gate reads the index of forced ready steps (029_forced_ready).
    for forced in [p for p in plans if p["table"] == "f"]:
        assert forced["key"] == f"{store.tables.prefix}steps_forced_ready", plans
    assert plan["key"] == f"{store.tables.prefix}steps_claim"
    extra = str(plan["Extra"] or "")
    if store.server.descending_indexes:
        assert "filesort" not in extra, plan  # read in claim order, stops after LIMIT rows
    else:
        assert "filesort" in extra, plan  # MariaDB < 10.8: why the dialect claims by candidates


def test_a_limited_claim_counts_the_running_by_the_claim_index(
    store: MySQLStore, server: Server
) -> None:
    # 009_limits adds no index: the claim index (status, queue, ...) has the queue's running
    # steps in its own range, so the count under the limiter's lock reads only those.
    for i in range(50):
        create(store, [("one", ())], priority=i % 3)
    now = time.time_ns()
    limited = (QueueClaim("default", None, 5),)  # creates the queue's limiter row
    taken = store.claim(ClaimRequest(frozenset({"wf"}), 10, now, now + 60 * 10**9, "n", limited))
    assert len(taken) == 5
    server.query(f"ANALYZE TABLE `{store.tables.prefix}steps`")
    q = store._queries
    conn = server.connect()
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("EXPLAIN " + store.dialect.sql(q.count_running), ("default",))
        (count,) = cursor.fetchall()
        cursor.execute("EXPLAIN " + store.dialect.sql(q.lock_limiter), ("queue", "default"))
        (lock,) = cursor.fetchall()
    assert count["key"] == f"{store.tables.prefix}steps_claim", count
    assert count["type"] == "ref" and "Using index" in str(count["Extra"]), count
    assert (lock["key"], lock["type"]) == ("PRIMARY", "const"), lock


def test_a_keyed_claim_locks_and_moves_its_keys_by_the_primary_key_in_one_statement_each(
    store: MySQLStore, server: Server
) -> None:
    # LOCK_KEYS and MOVE_KEYS: one statement for every key of a claim, each a range of the
    # limits' primary key (read in its order: the rows are locked in name order), where one
    # statement per key cost one round trip per key.
    q = store._queries
    conn = server.connect()
    with conn.cursor(pymysql.cursors.DictCursor) as cursor:
        for name in ("k1", "k2", "k3", "k4"):
            cursor.execute(
                f"INSERT INTO `{store.tables.prefix}limits` (kind, name, running, fifo)"
                " VALUES ('key', %s, 0, 0)",
                (name,),
            )
        for kind in ("queue", "rate"):  # rows of other kinds, as a busy database has
            for n in range(50):
                cursor.execute(
                    f"INSERT INTO `{store.tables.prefix}limits` (kind, name, running, fifo)"
                    " VALUES (%s, %s, 0, 0)",
                    (kind, f"x{n}"),
                )
        conn.commit()
        cursor.execute(f"ANALYZE TABLE `{store.tables.prefix}limits`")
        cursor.fetchall()
        plans = {}
        for name, (sql, params) in {
            "lock_keys": q.lock_keys(["k1", "k3", "k4"]),
            "move_keys": q.move_keys([(1, "k1"), (-1, "k3")]),
        }.items():
            cursor.execute("EXPLAIN " + store.dialect.sql(sql), params)
            plans[name] = cursor.fetchall()
    for name, rows in plans.items():
        (plan,) = rows
        assert (plan["key"], plan["type"]) == ("PRIMARY", "range"), (name, plan)
        assert "filesort" not in str(plan["Extra"] or ""), (name, plan)  # read in name order


def test_a_paused_queue_s_claim_reads_none_of_its_ready_rows(
    store: MySQLStore, server: Server
) -> None:
    # The queue's gate ("not paused, or a forced step of it is ready": the pauses' primary
    # key, then the index of the forced_ready column) is a constant condition, evaluated
    # before the steps are read: a paused queue's claim reads none of its ready rows.
    for i in range(300):
        create(store, [("one", ())], priority=i % 3)
    t = store.tables
    server.query(
        f"INSERT INTO `{t.prefix}pauses` (kind, name, paused_at) VALUES ('queue', 'default', 0)"
    )
    server.query(f"ANALYZE TABLE `{t.prefix}steps`")
    claim_plan = store._queries.claim_plan(
        workflows=["wf"], queue="default", limit=5, claimed=("s", 0, "n", 0)
    )
    sql, params = claim_plan.select_ready

    def analyzed() -> list[dict[str, Any]]:
        conn = server.connect()
        with conn.cursor() as cursor:
            cursor.execute("ANALYZE FORMAT=JSON " + store.dialect.sql(sql), params)
            (document,) = cursor.fetchone()
        conn.rollback()
        tables: list[dict[str, Any]] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                if "table_name" in node:
                    tables.append(node)
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(json.loads(document))
        return tables

    closed = analyzed()
    steps = [n for n in closed if n["table_name"] == "s"]
    assert all(not n.get("r_loops") for n in steps), closed  # not read (or not even planned)
    gate = [n for n in closed if n["table_name"] == "f"]
    assert gate and gate[0]["key"] == f"{t.prefix}steps_forced_ready", gate
    # A forced step opens the gate: the claim reads the steps (and finds that one).
    server.query(f"UPDATE `{t.prefix}steps` SET forced = 1 LIMIT 1")
    steps = [n for n in analyzed() if n["table_name"] == "s"]
    assert steps and steps[0].get("r_rows"), steps


@pytest.mark.parametrize("branch", ["index order", "candidates"])
def test_claims_take_the_most_urgent_first_and_never_the_same_step_twice(
    store: MySQLStore, branch: str
) -> None:
    if branch == "candidates":  # the MariaDB 10.6/10.7 branch, run on this server
        store.dialect.server = parse_server_version("10.6.17-MariaDB")  # type: ignore[attr-defined]
        assert not store.dialect.sorts_claims_in_index  # type: ignore[attr-defined]
    low = [create(store, [("one", ())], priority=0) for _ in range(3)]
    high = [create(store, [("one", ())], priority=5) for _ in range(3)]
    first = claim(store, limit=4)
    assert {a.run_id for a in first} == set(high) | {low[0]}
    # Many claimers at once: every ready step is claimed exactly once.
    for _ in range(40):
        create(store, [("one", ())])
    taken: list[str] = []
    lock = threading.Lock()

    def claimer() -> None:
        for _ in range(30):
            got = claim(store, limit=3)
            with lock:
                taken.extend(a.token.split(":")[0] for a in got)

    threads = [threading.Thread(target=claimer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == len(set(taken)) == 40 + 2


# -- deadlocks, lock waits, dead connections --------------------------------------------------
def test_a_real_deadlock_is_classified_retryable(server: Server, prefix: str) -> None:
    table = f"{prefix}scratch"
    server.query(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, v INT) ENGINE = InnoDB")
    server.query(f"INSERT INTO `{table}` VALUES (1, 0), (2, 0)")
    a, b = server.connect(autocommit=False), server.connect(autocommit=False)
    errors: list[BaseException] = []
    with a.cursor() as ca, b.cursor() as cb:
        ca.execute(f"UPDATE `{table}` SET v = 1 WHERE id = 1")
        cb.execute(f"UPDATE `{table}` SET v = 2 WHERE id = 2")

        def a_wants_2() -> None:
            try:
                ca.execute(f"UPDATE `{table}` SET v = 1 WHERE id = 2")
            except pymysql.err.MySQLError as error:
                errors.append(error)

        waiter = threading.Thread(target=a_wants_2)
        waiter.start()
        time.sleep(0.3)  # a now waits for b's row
        try:
            cb.execute(f"UPDATE `{table}` SET v = 2 WHERE id = 1")
        except pymysql.err.MySQLError as error:
            errors.append(error)
        if not errors:  # b won: a was chosen as the victim
            waiter.join(10)
        else:
            b.rollback()
            waiter.join(10)
    a.rollback()
    b.rollback()
    (error,) = errors
    assert error.args[0] == 1213
    assert classify_mysql_error(error) == ErrorClass(retryable=True)


def test_a_real_lock_wait_timeout_is_classified_retryable_and_retried(
    server: Server, prefix: str
) -> None:
    counting = Counting()
    store = MySQLStore(
        server.url, table_prefix=prefix, lock_wait_timeout=1, error_classifier=counting
    )
    try:
        store.migrate()
        run_id = create(store, [("one", ())])
        holder = server.connect(autocommit=False)
        with holder.cursor() as cursor:
            cursor.execute(f"SELECT id FROM `{prefix}runs` WHERE id = %s FOR UPDATE", (run_id,))
        # Another transaction holds the run row past the store's 1 s lock wait timeout.
        releaser = threading.Timer(1.6, holder.commit)
        releaser.start()
        try:
            assert store.cancel_run(run_id, time.time_ns()) is True
        finally:
            releaser.join()
        assert 1205 in counting.codes()
        assert all(found.retryable for code, found in counting.seen if code == 1205)
        stored = store.get_run(run_id)
        assert stored is not None and stored.state == "cancelled"
    finally:
        store.close()


def test_a_deadlock_inside_the_store_is_retried_and_never_reaches_the_caller(
    server: Server, prefix: str
) -> None:
    counting = Counting()
    store = MySQLStore(server.url, table_prefix=prefix, error_classifier=counting)
    try:
        store.migrate()
        run_id = create(store, [("a", ()), ("b", ("a",))])
        (attempt,) = claim(store, limit=1)
        scratch = f"{prefix}scratch"
        server.query(f"CREATE TABLE `{scratch}` (id INT PRIMARY KEY) ENGINE = InnoDB")
        other = server.connect(autocommit=False)
        with other.cursor() as cursor:
            # A heavy transaction (InnoDB picks the lighter one as the deadlock victim)...
            cursor.executemany(f"INSERT INTO `{scratch}` VALUES (%s)", [(i,) for i in range(500)])
            # ...that holds the child step the store's finish will update.
            cursor.execute(
                f"UPDATE `{prefix}steps` SET parents_left = parents_left WHERE run_id = %s "
                "AND name = 'b'",
                (run_id,),
            )
        outcome: list[Any] = []
        finisher = threading.Thread(
            target=lambda: outcome.append(
                store.finish(attempt.token, Succeeded(b'"ok"'), time.time_ns())
            )
        )
        finisher.start()  # locks the run row, writes step a, then waits for step b
        wait_until(lambda: lock_waits(server, prefix) > 0, what="the finish to wait for step b")
        with other.cursor() as cursor:  # now wants the run row the finish holds: a deadlock
            cursor.execute(f"SELECT id FROM `{prefix}runs` WHERE id = %s FOR UPDATE", (run_id,))
        other.commit()
        finisher.join(20)
        assert outcome and outcome[0].state is AttemptState.HELD
        assert outcome[0].ready == 1
        assert 1213 in counting.codes()  # the store saw the deadlock, retried, and succeeded
    finally:
        store.close()


def lock_waits(server: Server, prefix: str) -> int:
    rows = server.query(
        "SELECT COUNT(*) FROM information_schema.innodb_trx "
        "WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE %s",
        f"%{prefix}steps%",
    )
    return int(rows[0][0])


def own_connection_id(store: MySQLStore) -> int:
    with store._connections.connection() as conn:  # type: ignore[attr-defined]
        return int(conn.thread_id())


def test_a_killed_connection_is_unavailable_and_the_pool_reconnects(
    server: Server, prefix: str
) -> None:
    counting = Counting()
    # No pre-ping: the dead connection is found by using it.
    store = MySQLStore(
        server.url, table_prefix=prefix, ping_interval=3600, pool_size=1, error_classifier=counting
    )
    try:
        store.migrate()
        victim = own_connection_id(store)
        server.query(f"KILL {victim}")
        # The dead connection raises, classified unavailable...
        with (
            store._connections.connection() as conn,  # type: ignore[attr-defined]
            pytest.raises(pymysql.err.MySQLError) as caught,
            conn.cursor() as cursor,
        ):
            cursor.execute("SELECT 1")
        assert classify_mysql_error(caught.value).unavailable
        # ...and the pool lends a new connection from then on.
        assert own_connection_id(store) != victim
        # Killed while idle in the pool, then used: the transaction is retried, not raised.
        victim = own_connection_id(store)
        server.query(f"KILL {victim}")
        assert store.get_run("run_missing") is None
        assert own_connection_id(store) != victim
        assert any(found.unavailable for _, found in counting.seen)
    finally:
        store.close()


def test_an_idle_connection_is_pinged_and_replaced_before_use(server: Server, prefix: str) -> None:
    counting = Counting()
    store = MySQLStore(
        server.url, table_prefix=prefix, ping_interval=0, pool_size=1, error_classifier=counting
    )
    try:
        store.migrate()
        victim = own_connection_id(store)
        server.query(f"KILL {victim}")
        assert store.get_run("run_missing") is None
        assert own_connection_id(store) != victim
        assert counting.seen == []  # the ping found it: no statement ever failed
    finally:
        store.close()


# -- transactional enqueue ----------------------------------------------------------------------
@pytest.fixture
def app_table(server: Server, prefix: str) -> str:
    name = f"{prefix}app"
    server.query(f"CREATE TABLE `{name}` (id INT PRIMARY KEY, note VARCHAR(64)) ENGINE = InnoDB")
    return name


def app_rows(server: Server, table: str) -> list[tuple[Any, ...]]:
    return server.query(f"SELECT id, note FROM `{table}` ORDER BY id")


def test_enqueue_tx_commits_with_the_application(
    store: MySQLStore, server: Server, app_table: str
) -> None:
    with cf.Client(store, poll_interval=30) as client:  # only a wake() finds work soon
        client.register(simple())
        conn = server.connect(autocommit=False)
        with conn.cursor() as cursor:
            cursor.execute(f"INSERT INTO `{app_table}` VALUES (1, 'order 🧾')")
        ref = client.enqueue_tx(conn, "simple", {"order": 1}, key="order-1")
        assert store.get_run(ref.id) is None  # not visible outside the transaction
        conn.commit()
        client.wake()
        info = client.wait(ref, timeout=20)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == {"got": {"order": 1}}
    assert app_rows(server, app_table) == [(1, "order 🧾")]


def test_enqueue_tx_rolls_back_with_the_application(
    store: MySQLStore, server: Server, app_table: str
) -> None:
    client = cf.Client(store)
    client.register(simple())
    conn = server.connect(autocommit=False)
    with conn.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{app_table}` VALUES (1, 'order')")
    ref = client.enqueue_tx(conn, "simple", 1, key="order-1")
    conn.rollback()
    assert store.get_run(ref.id) is None
    assert app_rows(server, app_table) == []
    assert client.runs().runs == ()
    # The key was never held: it can be used now.
    client.enqueue("simple", 2, key="order-1")


def test_a_duplicate_in_enqueue_tx_leaves_the_application_transaction_usable(
    store: MySQLStore, server: Server, app_table: str
) -> None:
    client = cf.Client(store)
    client.register(simple())
    held = client.enqueue("simple", 0, key="order-1")
    conn = server.connect(autocommit=False)
    with conn.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{app_table}` VALUES (1, 'kept')")
    with pytest.raises(cf.DuplicateRun, match=held.id):
        client.enqueue_tx(conn, "simple", 1, key="order-1")
    ok = client.enqueue_tx(conn, "simple", 2, key="order-2")
    conn.commit()
    assert app_rows(server, app_table) == [(1, "kept")]
    assert sorted(r.id for r in client.runs().runs) == sorted([held.id, ok.id])


def test_enqueue_tx_refuses_connections_it_cannot_be_atomic_on(
    store: MySQLStore, server: Server
) -> None:
    client = cf.Client(store)
    client.register(simple())
    with pytest.raises(cf.CairnError, match="autocommit off"):
        client.enqueue_tx(server.connect(autocommit=True), "simple", 1)
    elsewhere = server.connect(autocommit=False)
    with elsewhere.cursor() as cursor:
        cursor.execute("USE information_schema")
    with pytest.raises(cf.CairnError, match="current database is 'information_schema'"):
        client.enqueue_tx(elsewhere, "simple", 1)
    with pytest.raises(TypeError, match="PyMySQL connection"):
        client.enqueue_tx(object(), "simple", 1)
    assert client.runs().runs == ()


def test_options_from_the_command_line_are_converted(server: Server, prefix: str) -> None:
    store = MySQLStore.from_url(
        server.url, table_prefix=prefix, pool_size="2", ping_interval="0.5", tx_attempts="3"
    )
    try:
        assert store._connections.max_size == 2  # type: ignore[attr-defined]
        assert store._connections.ping_interval == 0.5  # type: ignore[attr-defined]
    finally:
        store.close()
