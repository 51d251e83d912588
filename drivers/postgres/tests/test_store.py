"""The Postgres store on a server: namespaces, migrations, pools, claims, bad input."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import IsolationLevel
from psycopg_pool import ConnectionPool

import cairnflow as cf
from cairnflow import StepKind, ids
from cairnflow.sql import TABLES, split_statements
from cairnflow.store import ClaimRequest, NewRun, NewStep, RunQuery
from cairnflow_postgres import PostgresStore
from cairnflow_postgres.testing import drop_namespace, unique_prefix

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]

pytestmark = pytest.mark.timeout(120)

MIGRATIONS = [
    "001_init",
    "002_schedules",
    "003_leaders",
    "004_queues",
    "005_pauses",
    "006_limits",
    "007_state",
    "008_forced",
    "009_errors",
    "010_run_labels",
    "011_servers",
    "012_keys",
    "013_rates",
    "014_archive",
    "015_headers",
    "016_step_history",
    "017_step_history_trigger",
    "018_runs_overdue",
    "019_forced_ready",
    "020_step_history_branches",
    "021_lifecycle",
    "022_tenant",
    "023_runs_finished",
    "024_lifecycle_run_probe",
    "025_lifecycle_run_once",
    "026_step_history_trim",
    "027_byte_order",
]


def simple() -> cf.Workflow:
    wf = cf.Workflow("simple")
    wf.step(lambda ctx, d: {"got": d}, name="one")
    wf.step(lambda ctx, d: d, name="two", after=["one"])
    return wf


def run_one(make_client: ClientFactory, store: PostgresStore, payload: Any = 1) -> cf.RunInfo:
    client = make_client(store, simple())
    return client.wait(client.enqueue("simple", payload), timeout=10)


def catalog(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """How many schemas and relations a hostile name below could have made.

    Counted by name, not in all: other tests of the session (other xdist workers) create
    and drop tables, and their TOAST tables in ``pg_toast``, at the same time.
    """
    row = conn.execute(
        "SELECT (SELECT count(*) FROM pg_namespace WHERE nspname LIKE '%pwned%'"
        " OR nspname LIKE 'x\"%%'),"
        " (SELECT count(*) FROM pg_class WHERE relname LIKE '%pwned%' OR relname LIKE 'x\"%%'"
        "  OR (relnamespace = 'pg_toast'::regnamespace AND relname NOT LIKE 'pg\\_toast\\_%%'))"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


# -- opening ---------------------------------------------------------------------------------
def test_open_store_by_url_with_options(
    postgres_url: str, make_client: ClientFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    prefix = unique_prefix()
    store = cf.open_store(f"{postgres_url}?table_prefix={prefix}", max_size="4", notify="off")
    try:
        assert isinstance(store, PostgresStore)
        assert store.tables.runs == f'"{prefix}runs"'
        assert store.pool.max_size == 4
        assert cf.Cap.NOTIFY not in store.capabilities
        info = store.describe()
        assert info.server is not None and info.server.startswith("PostgreSQL ")
        assert info.durable
        assert "password" not in info.url
        store.migrate()
        assert run_one(make_client, store).status is cf.Status.SUCCEEDED
    finally:
        store.close()
        drop_namespace(admin_conn, prefix)


def test_hostile_names_create_nothing(
    postgres_url: str, admin_conn: psycopg.Connection[Any]
) -> None:
    before = catalog(admin_conn)
    for options in (
        {"schema": 'x"; CREATE SCHEMA pwned; --'},
        {"table_prefix": 'x"; CREATE TABLE pwned (a int); --'},
        {"schema": "pg_toast"},
    ):
        with pytest.raises(cf.InvalidName):
            PostgresStore(postgres_url, **options)
        with pytest.raises(cf.InvalidName):
            cf.open_store(postgres_url, **options)
    assert catalog(admin_conn) == before
    row = admin_conn.execute(
        "SELECT count(*) FROM pg_class WHERE relname LIKE %s", ("%pwned%",)
    ).fetchone()
    assert row == (0,)


def test_start_on_a_database_never_migrated_names_the_table(make_store: StoreFactory) -> None:
    store = make_store(migrate=False)
    client = cf.Client(store)
    client.register(simple())
    with pytest.raises(
        cf.SchemaNotReady,
        match=rf"(?s)table {store.tables.prefix}migrations is not readable .*store\.migrate\(\)",
    ):
        client.start()
    assert not client.running


def test_an_unknown_schema_is_not_ready_until_migrate_creates_it(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any], make_client: ClientFactory
) -> None:
    schema = f"s{unique_prefix()}"
    store = make_store(schema=schema, migrate=False)
    with pytest.raises(cf.SchemaNotReady):
        store.check_schema()
    assert store.migrate() == MIGRATIONS
    rows = admin_conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
        (schema,),
    ).fetchall()
    prefix = store.tables.prefix
    assert [r[0] for r in rows] == sorted(f"{prefix}{t}" for t in TABLES)
    store.check_schema()
    assert run_one(make_client, store).status is cf.Status.SUCCEEDED


def test_an_existing_schema_is_used_as_it_is(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    schema = f"s{unique_prefix()}"
    admin_conn.execute(f'CREATE SCHEMA "{schema}"')
    store = make_store(schema=schema)
    store.check_schema()
    row = admin_conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (schema,)
    ).fetchone()
    assert row == (len(TABLES),)


def test_migrate_is_idempotent_and_recorded(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    store = make_store(migrate=False)
    assert store.migrate() == MIGRATIONS
    assert store.migrate() == []
    rows = admin_conn.execute(
        f"SELECT version, name, length(checksum) FROM {store.tables.migrations} ORDER BY 1"
    ).fetchall()
    assert rows == [(n + 1, label[4:], 64) for n, label in enumerate(MIGRATIONS)]


def test_a_schema_one_namespace_is_refused_until_migrated(make_store: StoreFactory) -> None:
    old = make_store(migrate=False)
    old.migrations = old.migrations[:1]  # the release before schedules
    assert old.migrate() == ["001_init"]
    new = make_store(prefix=old.tables.prefix, migrate=False)
    with pytest.raises(
        cf.SchemaNotReady,
        match=r"002_schedules, 003_leaders, 004_queues, 005_pauses, 006_limits, 007_state, "
        r"008_forced, 009_errors, 010_run_labels, 011_servers, 012_keys(, \w+)* are",
    ):
        new.check_schema()
    assert new.migrate() == MIGRATIONS[1:]
    new.check_schema()
    assert new.list_schedules() == []


def test_a_schema_two_namespace_is_refused_until_migrated(make_store: StoreFactory) -> None:
    old = make_store(migrate=False)
    old.migrations = old.migrations[:2]  # the release before leader election
    assert old.migrate() == MIGRATIONS[:2]
    new = make_store(prefix=old.tables.prefix, migrate=False)
    with pytest.raises(
        cf.SchemaNotReady,
        match=r"migration\(s\) 003_leaders, 004_queues, 005_pauses, 006_limits, 007_state, "
        r"008_forced, 009_errors, 010_run_labels, 011_servers, 012_keys(, \w+)* are",
    ):
        new.check_schema()
    assert new.migrate() == MIGRATIONS[2:]
    new.check_schema()
    held = new.claim_leadership("scheduler", "n1", lease_now=1, lease_until=2)
    assert (held.node, held.term) == ("n1", 1)


def test_every_text_column_compares_byte_for_byte(
    store: PostgresStore, admin_conn: psycopg.Connection[Any]
) -> None:
    """Every text column of the namespace but the migrations ledger's is ``COLLATE "C"``
    (027), as on MySQL (utf8mb4_bin) and SQLite: a migration adding one must say so too.

    Not only the indexed ones: the planner carries an equality from one column to
    another only within one collation (a claim's workflow to the workflow pauses'
    name, which then reads their primary key)."""
    rows = admin_conn.execute(
        "SELECT t.relname, a.attname, coalesce(c.collname, '') "
        "FROM pg_class t JOIN pg_attribute a ON a.attrelid = t.oid "
        "LEFT JOIN pg_collation c ON c.oid = a.attcollation "
        "WHERE t.relnamespace = current_schema()::regnamespace AND t.relkind = 'r' "
        "AND left(t.relname, length(%s)) = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "AND a.atttypid IN ('text'::regtype, 'varchar'::regtype) ORDER BY 1, 2",
        (store.tables.prefix, store.tables.prefix),
    ).fetchall()
    columns = {
        (table.removeprefix(store.tables.prefix), column): collation
        for table, column, collation in rows
    }
    assert columns.pop(("migrations", "name")) == "default"
    assert {("runs", "id"), ("steps", "status"), ("pauses", "name")} <= set(columns)
    assert {where: c for where, c in columns.items() if c != "C"} == {}


def test_runs_made_before_027_are_kept_and_run_after_it(
    make_store: StoreFactory, make_client: ClientFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    """027 changes the collation of the runs' and steps' key columns (rebuilding their
    indexes): what was enqueued before it keeps its keys, labels and tenant, and runs."""
    old = make_store(migrate=False)
    old.migrations = old.migrations[:26]
    assert old.migrate() == MIGRATIONS[:26]
    before = make_client(old, simple(), start=False)
    keyed = before.enqueue("simple", 1, key="k1", labels={"team": "Zeta"}, tenant="acme")
    plain = before.enqueue_many([cf.Job("simple", n) for n in range(2, 5)])
    new = make_store(prefix=old.tables.prefix, migrate=False)
    assert new.migrate() == ["027_byte_order"]
    after = make_client(new, simple(), start=False)
    # Before the client starts, while the keyed run is unfinished: the key's unique index,
    # rebuilt, still holds it (a finished run gives its key up).
    with pytest.raises(cf.DuplicateRun):
        after.enqueue("simple", 9, key="k1")
    after.start()
    for ref in (keyed, *plain):
        assert after.wait(ref, timeout=30).status == "succeeded"
    found = new.list_runs(RunQuery(tenant="acme", labels={"team": "Zeta"}))
    assert [run.id for run in found.runs] == [keyed.id]
    (triggers,) = admin_conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgname = %s", (old.tables.prefix + "lifecycle_run",)
    ).fetchone() or (0,)
    assert triggers == 1


@pytest.mark.parametrize("drop", ["drop_tables", "drop_namespace"])
def test_dropping_a_namespace_leaves_none_of_its_tables_nor_functions(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any], drop: str
) -> None:
    store = make_store()
    prefix = store.tables.prefix

    def tables() -> list[str]:
        rows = admin_conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE %s ORDER BY 1", (prefix + "%",)
        )
        return [name for (name,) in rows.fetchall()]

    def functions() -> list[str]:
        rows = admin_conn.execute(
            "SELECT proname FROM pg_proc WHERE proname LIKE %s ORDER BY 1", (prefix + "%",)
        )
        return [name for (name,) in rows.fetchall()]

    assert tables() == sorted(store.table_names())  # the leaders table among them
    assert len(functions()) == 3  # the trigger functions
    if drop == "drop_tables":
        store.drop_tables()
    else:
        drop_namespace(admin_conn, prefix)  # what test suites clean up with (TABLES)
    assert (tables(), functions()) == ([], [])
    # Nothing of it is left to refuse the namespace's first migration, run again.
    store.migrate()
    assert tables() == sorted(store.table_names())


def test_a_newer_schema_and_a_changed_migration_are_refused(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    store = make_store()
    table = store.tables.migrations
    admin_conn.execute(f"INSERT INTO {table} VALUES (99, 'future', 'x', 0)")
    known = rf"knows versions up to {len(MIGRATIONS)}"
    with pytest.raises(cf.SchemaTooNew, match=rf"schema version 99 .* {known}"):
        store.check_schema()
    admin_conn.execute(f"DELETE FROM {table} WHERE version = 99")
    admin_conn.execute(f"UPDATE {table} SET checksum = 'tampered' WHERE version = 1")
    with pytest.raises(cf.CairnError, match=r"001_init was applied .* must never change"):
        store.migrate()


def test_a_missing_table_is_named(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    store = make_store()
    admin_conn.execute(f"DROP TABLE {store.tables.signals}")
    with pytest.raises(cf.SchemaNotReady, match=f"table {store.tables.prefix}signals is not"):
        store.check_schema()


def test_migration_scripts_let_a_dba_migrate_by_hand(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any], make_client: ClientFactory
) -> None:
    schema = f"s{unique_prefix()}"
    store = make_store(schema=schema, migrate=False)
    scripts = store.migration_scripts()
    assert scripts[0][1].startswith(f'CREATE SCHEMA IF NOT EXISTS "{schema}";')
    with admin_conn.transaction():
        for _label, script in scripts:
            for statement in split_statements(script):
                admin_conn.execute(statement.encode())
    store.check_schema()
    assert store.migrate() == []
    assert run_one(make_client, store).status is cf.Status.SUCCEEDED


MIGRATOR = """
import sys, time
from cairnflow_postgres import PostgresStore
dsn, prefix, schema, start_at = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
store = PostgresStore(dsn, table_prefix=prefix, schema=schema, max_size=2, notify=False)
time.sleep(max(0.0, start_at - time.time()))
print(",".join(store.migrate()) or "-")
store.close()
"""


def test_eight_processes_migrating_at_once_apply_each_version_once(
    postgres_url: str, admin_conn: psycopg.Connection[Any]
) -> None:
    prefix, schema = unique_prefix(), f"s{unique_prefix()}"
    start_at = time.time() + 3.0  # every process starts migrating at the same instant
    try:
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", MIGRATOR, postgres_url, prefix, schema, str(start_at)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(8)
        ]
        outputs = [process.communicate(timeout=60) for process in processes]
        assert [p.returncode for p in processes] == [0] * 8, [e.decode() for _, e in outputs]
        applied = sorted(out.decode().strip() for out, _ in outputs)
        # exactly one process applied them
        assert applied == ["-"] * 7 + [",".join(MIGRATIONS)]
        rows = admin_conn.execute(f'SELECT version FROM "{schema}"."{prefix}migrations"')
        assert sorted(rows.fetchall()) == [(n + 1,) for n in range(len(MIGRATIONS))]
    finally:
        drop_namespace(admin_conn, prefix, schema)


# -- namespaces ---------------------------------------------------------------------------------
def test_prefixes_and_schemas_share_nothing(
    make_store: StoreFactory, make_client: ClientFactory
) -> None:
    first = make_store()
    second = make_store()
    schema = f"s{unique_prefix()}"
    third = make_store(schema=schema, prefix=first.tables.prefix)
    info = run_one(make_client, first)
    for other in (second, third):
        assert other.get_run(info.id) is None
        assert cf.Client(other).runs().runs == ()
    assert len({first.channel, second.channel, third.channel}) == 3


def test_outcomes_survive_a_new_store_object(
    make_store: StoreFactory, make_client: ClientFactory
) -> None:
    store = make_store()
    info = run_one(make_client, store, {"order": "A-1"})
    again = cf.Client(make_store(prefix=store.tables.prefix, migrate=False)).info(info.ref)
    assert again.status is cf.Status.SUCCEEDED
    assert again.result == {"got": {"order": "A-1"}}


def test_times_are_bigint_nanoseconds_and_payloads_bytea(
    store: PostgresStore, make_client: ClientFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    before = time.time_ns()
    run_one(make_client, store)
    after = time.time_ns()
    row = admin_conn.execute(
        f"SELECT created_at, finished_at, pg_typeof(created_at)::text, pg_typeof(payload)::text "
        f"FROM {store.tables.runs}"
    ).fetchone()
    assert row is not None
    created, finished, time_type, payload_type = row
    assert (time_type, payload_type) == ("bigint", "bytea")
    assert before <= created <= finished <= after


def test_a_batch_stores_every_text_as_given(
    store: PostgresStore, make_client: ClientFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    """A batch's columns go as arrays, or as one value where every row holds it
    (``PostgresDialect.batch_insert``): each row keeps its own key, tenant (NULL
    included), label and payload, spaces and empty labels included, and the keys stay
    all-or-none."""
    client = make_client(store, simple(), start=False)
    plain = [cf.Job("simple", n, key=f"k{n}", labels={"who": f"a{n}"}) for n in range(3)]
    spaced = [
        cf.Job("simple", n, key=key, labels={"who": label}, tenant=tenant)
        for n, (key, label, tenant) in enumerate(
            [("with space", "", "t1"), ("x", " lead", None), (" lead", "trail ", "t2")]
        )
    ]
    refs = client.enqueue_many(plain) + client.enqueue_many(spaced)
    rows = admin_conn.execute(
        f"SELECT r.id, r.idem_key, r.active_key, r.tenant, r.payload, l.value "
        f"FROM {store.tables.runs} r JOIN {store.tables.run_labels} l ON l.run_id = r.id "
        f"ORDER BY r.seq"
    ).fetchall()
    jobs = plain + spaced
    assert rows == [
        (ref.id, job.key, job.key, job.tenant, str(job.payload).encode(), job.labels["who"])
        for ref, job in zip(refs, jobs, strict=True)
    ]
    steps = admin_conn.execute(
        f"SELECT run_id, name FROM {store.tables.steps} ORDER BY run_id, position"
    ).fetchall()
    assert steps == sorted((ref.id, name) for ref in refs for name in ("one", "two"))
    # The keys hold: the same keys again are refused, all or none.
    with pytest.raises(cf.DuplicateRun):
        client.enqueue_many([cf.Job("simple", 9, key="k9"), cf.Job("simple", 9, key="x")])
    (count,) = admin_conn.execute(f"SELECT count(*) FROM {store.tables.runs}").fetchone() or (0,)
    assert count == len(jobs)


# -- pools ----------------------------------------------------------------------------------------
def test_the_applications_pool_is_used_and_never_closed(
    postgres_url: str, make_store: StoreFactory, make_client: ClientFactory
) -> None:
    # An application pool as applications make them: autocommit connections at SERIALIZABLE.
    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.isolation_level = IsolationLevel.SERIALIZABLE

    with ConnectionPool(
        postgres_url,
        min_size=1,
        max_size=8,
        kwargs={"autocommit": True},
        configure=configure,
        open=True,
    ) as pool:
        prefix = unique_prefix()
        owned = make_store(prefix=prefix)  # creates the tables (and drops them afterwards)
        store = PostgresStore(pool=pool, table_prefix=prefix)
        try:
            assert store.pool is pool
            assert run_one(make_client, store).status is cf.Status.SUCCEEDED
            # Each store transaction was one transaction at READ COMMITTED, on this pool.
            with pool.connection() as conn:
                assert conn.autocommit
        finally:
            store.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert owned.get_run("nothing") is None


def test_claims_size_sizes_the_claims_pool_for_several_clients_of_one_store(
    postgres_url: str, make_store: StoreFactory, make_client: ClientFactory
) -> None:
    # Each client claims on a connection of the claims pool of its own at a time: four
    # clients of one store in one process claim side by side on a pool of four.
    store = make_store(claims_size=4, max_size=16)
    assert store.claims_pool is not None and store.claims_pool.max_size == 4
    clients = [make_client(store, simple(), workers=2) for _ in range(4)]
    refs = [clients[0].enqueue("simple", n) for n in range(40)]
    infos = [clients[0].wait(ref, timeout=30) for ref in refs]
    assert all(info.status is cf.Status.SUCCEEDED for info in infos)
    assert sorted(info.result["got"] for info in infos) == list(range(40))
    # The URL's query parameter, as the command line's -o gives it, is converted.
    from_url = PostgresStore.from_url(
        f"{postgres_url}?claims_size=3", table_prefix=store.tables.prefix
    )
    try:
        assert from_url.claims_pool is not None and from_url.claims_pool.max_size == 3
    finally:
        from_url.close()


def test_open_store_takes_the_applications_pool(
    postgres_url: str, make_store: StoreFactory, make_client: ClientFactory
) -> None:
    # Issue #19: open_store(url, pool=...) said "takes exactly one of dsn= and pool=".
    with ConnectionPool(postgres_url, min_size=1, max_size=8, open=True) as pool:
        prefix = unique_prefix()
        owned = make_store(prefix=prefix)  # creates the tables (and drops them afterwards)
        for url in (postgres_url, "postgresql://", f"postgres://?table_prefix={prefix}"):
            store = cf.open_store(url, pool=pool, table_prefix=prefix)
            try:
                assert isinstance(store, PostgresStore) and store.pool is pool
                assert run_one(make_client, store).status is cf.Status.SUCCEEDED
            finally:
                store.close()
            assert not pool.closed
        with pytest.raises(cf.CairnError, match=r"connection parameters \(sslmode\)"):
            cf.open_store(f"{postgres_url}?sslmode=disable", pool=pool, table_prefix=prefix)
        assert owned.get_run("nothing") is None


def test_the_dialect_makes_autocommit_connections_transactional(postgres_url: str) -> None:
    from cairnflow_postgres import PostgresDialect

    dialect = PostgresDialect()
    with psycopg.connect(postgres_url, autocommit=True) as conn, conn.cursor() as cursor:
        dialect.begin(cursor, write=True)
        cursor.execute("SELECT current_setting('transaction_isolation')")
        assert cursor.fetchone() == ("read committed",)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
    with psycopg.connect(postgres_url) as conn, conn.cursor() as cursor:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        dialect.begin(cursor, write=True)
        cursor.execute("SELECT current_setting('transaction_isolation')")
        assert cursor.fetchone() == ("read committed",)


def test_an_exhausted_pool_is_unavailable_not_a_hang(make_store: StoreFactory) -> None:
    store = make_store(min_size=0, max_size=1, pool_timeout=0.3, notify=False)
    with store.pool.connection():
        started = time.monotonic()
        with pytest.raises(cf.Unavailable, match="size it above workers"):
            store.get_run("run_x")
        assert time.monotonic() - started < 2


def test_an_unreachable_server_is_unavailable() -> None:
    store = PostgresStore(
        "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1", min_size=0, pool_timeout=0.5
    )
    try:
        with pytest.raises(cf.Unavailable):
            store.get_run("run_x")
        with pytest.raises(cf.Unavailable):
            store.check_schema()
        assert store.describe().server is None
    finally:
        store.close()


# -- claims -------------------------------------------------------------------------------------
def _ready_runs(store: PostgresStore, count: int, *, workflow: str = "w") -> None:
    now = time.time_ns()
    runs = [
        NewRun(
            id=ids.default_id_generator("run"),
            workflow=workflow,
            queue="default",
            priority=0,
            payload=b"{}",
            steps=(NewStep("only", StepKind.TASK, (), ()),),
            step_ids=(ids.default_id_generator("step"),),
            created_at=now,
            run_at=now,
        )
        for _ in range(count)
    ]
    store.create_runs(runs)


def test_concurrent_claims_never_return_one_step_twice(make_store: StoreFactory) -> None:
    store = make_store(max_size=12, notify=False)
    _ready_runs(store, 400)
    peers = [make_store(prefix=store.tables.prefix, migrate=False, notify=False) for _ in range(3)]
    claimed: list[list[str]] = [[] for _ in range(6)]
    start = threading.Barrier(6)

    def claimer(index: int) -> None:
        mine = peers[index % 3]
        start.wait()
        while True:
            got = mine.claim(
                ClaimRequest(
                    workflows=frozenset({"w"}),
                    limit=7,
                    now=time.time_ns(),
                    lease_until=time.time_ns() + 60 * 10**9,
                    node_id=f"n{index}",
                )
            )
            if not got:
                return
            assert len(got) <= 7
            claimed[index].extend(a.token.rsplit(":", 1)[0] for a in got)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    every = [step for part in claimed for step in part]
    assert len(every) == 400
    assert len(set(every)) == 400
    assert sum(1 for part in claimed if part) >= 2  # SKIP LOCKED let claimers run side by side


def test_a_failing_migration_file_leaves_nothing_and_frees_the_lock(
    make_store: StoreFactory, admin_conn: psycopg.Connection[Any]
) -> None:
    from cairnflow.sql import Migration

    store = make_store(migrate=False)
    prefix = store.tables.prefix
    broken = Migration(
        len(MIGRATIONS) + 1, "broken", 'CREATE TABLE "{p}half" (a INT);\nSELECT 1 / 0;\n'
    )
    store.migrations = (*store.migrations, broken)
    with pytest.raises(psycopg.errors.DivisionByZero):
        store.migrate()
    # The release's migrations committed, each in its own transaction; the broken one rolled
    # back whole, its table included.
    rows = admin_conn.execute(f"SELECT version FROM {store.tables.migrations} ORDER BY 1")
    assert rows.fetchall() == [(n + 1,) for n in range(len(MIGRATIONS))]
    exists = admin_conn.execute("SELECT to_regclass(%s)", (f'"{prefix}half"',)).fetchone()
    assert exists == (None,)
    # The advisory lock was released: a second migrator is not kept waiting.
    again = make_store(prefix=prefix, migrate=False)
    assert again.migrate() == []


def test_the_command_line_migrates_and_prints_the_sql(
    postgres_url: str, admin_conn: psycopg.Connection[Any]
) -> None:
    prefix, schema = unique_prefix(), f"s{unique_prefix()}"
    command = [sys.executable, "-m", "cairnflow", "migrate", postgres_url]
    options = ["-o", f"table_prefix={prefix}", "-o", f"schema={schema}", "-o", "notify=off"]
    try:
        printed = subprocess.run(
            [*command, "--sql", *options], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        assert f'CREATE SCHEMA IF NOT EXISTS "{schema}";' in printed
        assert f'CREATE TABLE "{schema}"."{prefix}runs"' in printed
        assert admin_conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone() == (None,)
        done = subprocess.run(
            [*command, *options], capture_output=True, text=True, timeout=60, check=True
        )
        assert "001_init" in done.stdout
        tables = admin_conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchone()
        assert tables == (len(TABLES),)
    finally:
        drop_namespace(admin_conn, prefix, schema)
