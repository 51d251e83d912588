"""What needs no server: names, URLs, channels, classification, the schema file, debouncing."""

from __future__ import annotations

import itertools
import re
import socket
import threading
import time
import types
from importlib import resources
from typing import Any

import psycopg
import pytest
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg_pool import PoolClosed, PoolTimeout

import cairnflow as cf
from cairnflow.sql import Queries, Tables
from cairnflow_postgres import (
    POSTGRES_CAPABILITIES,
    PgNotifier,
    PostgresDialect,
    PostgresStore,
    advisory_key,
    channel_name,
    classify,
    redact,
)

# Nothing listens here: a store pointed at it opens nothing until it is used.
NOWHERE = "postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=1"


def offline(**options: Any) -> PostgresStore:
    """A store that never connects (no connection is opened before the first use)."""
    options.setdefault("min_size", 0)
    return PostgresStore(NOWHERE, **options)


# -- names ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "prefix", ['cf"; DROP TABLE cf_runs; --', "CF_", "1cf", "a" * 49, "", "cf-", "cf runs", "cf."]
)
def test_hostile_prefixes_are_refused_before_anything_opens(prefix: str) -> None:
    before = threading.active_count()
    with pytest.raises(cf.InvalidName, match="invalid table prefix"):
        PostgresStore(NOWHERE, table_prefix=prefix)
    assert threading.active_count() == before  # no pool, no worker thread


@pytest.mark.parametrize(
    "schema",
    [
        'jobs"; DROP SCHEMA public; --',
        "Jobs",
        "1jobs",
        "a" * 64,
        "",
        "jobs.x",
        "pg_jobs",
        "pg_catalog",
        "information_schema",
    ],
)
def test_hostile_schemas_are_refused_before_anything_opens(schema: str) -> None:
    before = threading.active_count()
    with pytest.raises(cf.InvalidName, match="invalid schema"):
        PostgresStore(NOWHERE, schema=schema)
    assert threading.active_count() == before


def test_tables_are_quoted_and_qualified() -> None:
    store = offline(schema="jobs", table_prefix="app_")
    try:
        assert store.tables.runs == '"jobs"."app_runs"'
        assert store.tables.steps == '"jobs"."app_steps"'
        assert store.table_names() == [
            "app_runs",
            "app_steps",
            "app_signals",
            "app_schedules",
            "app_ticks",
            "app_leaders",
            "app_pauses",
            "app_limits",
            "app_journal",
            "app_locks",
            "app_errors",
            "app_run_labels",
            "app_servers",
            "app_runs_archive",
            "app_steps_archive",
            "app_step_history",
            "app_lifecycle",
            "app_lifecycle_subs",
            "app_migrations",
        ]
    finally:
        store.close()


def test_exactly_one_of_dsn_and_pool() -> None:
    with pytest.raises(ValueError, match=r"exactly one of dsn= and pool="):
        PostgresStore()
    with pytest.raises(TypeError, match=r"psycopg_pool\.ConnectionPool"):
        PostgresStore(pool=object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_size", 0),
        ("min_size", -1),
        ("max_size", "3"),
        ("pool_timeout", 0),
        ("notify_debounce", -1.0),
        ("claims_size", 0),
        ("claims_size", "4"),
    ],
)
def test_bad_pool_options_are_refused(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        PostgresStore(NOWHERE, **{option: value})


# -- channels ---------------------------------------------------------------------------------
def test_channels_name_one_namespace_each_and_fit_postgres() -> None:
    names = {
        channel_name(None, "cf_"),
        channel_name(None, "app_"),
        channel_name("jobs", "cf_"),
        channel_name("jobs", "app_"),
        channel_name("jobs_cf", ""),
        channel_name("s" * 63, "p" * 48),
        channel_name("s" * 63, "q" * 48),
    }
    assert len(names) == 7
    assert all(len(n.encode()) <= 63 for n in names)
    assert channel_name(None, "cf_") == "cairnflow_cf_"
    assert channel_name("jobs", "app_") == "cairnflow_jobs.app_"
    assert re.fullmatch(r"cairnflow_[0-9a-f]{40}", channel_name("s" * 63, "p" * 48))


def test_the_store_channel_is_its_namespace() -> None:
    store = offline(schema="jobs", table_prefix="app_")
    try:
        assert store.channel == "cairnflow_jobs.app_"
    finally:
        store.close()


def test_migration_lock_keys_are_stable_64_bit_values() -> None:
    key = advisory_key("cairnflow_cf_")
    assert key == advisory_key("cairnflow_cf_")
    assert -(2**63) <= key < 2**63
    assert key != advisory_key("cairnflow_app_")
    # A release must never change the key: two releases would then migrate at once.
    assert key == 1814279742501677039


# -- URLs ---------------------------------------------------------------------------------------
def test_passwords_never_reach_a_report() -> None:
    assert redact("postgresql://app:s3cret@db:5433/orders?sslmode=require") == (
        "postgresql://app@db:5433/orders"
    )
    assert redact("host=db user=app password=s3cret dbname=orders") == "postgresql://app@db/orders"
    assert "s3cret" not in redact("postgresql://db/orders?password=s3cret")


def test_from_url_reads_store_options_from_the_query_and_keywords(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def fake_init(self: PostgresStore, dsn: str, **options: Any) -> None:
        seen.update(options, dsn=dsn)

    monkeypatch.setattr(PostgresStore, "__init__", fake_init)
    PostgresStore.from_url(
        "postgres://app@db/orders?sslmode=disable&table_prefix=x_&max_size=20&notify=off",
        schema="jobs",
        pool_timeout="2.5",
        notify_debounce="0",
    )
    assert seen == {
        "dsn": "postgresql://app@db/orders?sslmode=disable",
        "table_prefix": "x_",
        "max_size": 20,
        "notify": False,
        "schema": "jobs",
        "pool_timeout": 2.5,
        "notify_debounce": 0.0,
    }
    with pytest.raises(cf.CairnError, match="invalid value for option 'notify'"):
        PostgresStore.from_url("postgresql://db/x?notify=maybe")
    with pytest.raises(cf.CairnError, match=r"not a postgresql:// URL"):
        PostgresStore.from_url("mysql://db/x")


def test_from_url_keeps_libpq_parameters_as_libpq_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def fake_init(self: PostgresStore, dsn: str, **options: Any) -> None:
        seen.update(options, dsn=dsn)

    monkeypatch.setattr(PostgresStore, "__init__", fake_init)
    # A space sent on as "+" reached the server as "+search_path" (libpq does not read "+").
    PostgresStore.from_url("postgresql://db/x?options=-c%20search_path%3Dshop&table_prefix=a_")
    assert seen["dsn"] == "postgresql://db/x?options=-c%20search_path%3Dshop"
    assert conninfo_to_dict(seen["dsn"])["options"] == "-c search_path=shop"


def test_both_schemes_open_a_postgres_store() -> None:
    for scheme in ("postgresql", "postgres"):
        store = cf.open_store(
            f"{scheme}://nobody@127.0.0.1:1/nothing", min_size="0", pool_timeout="0.5"
        )
        try:
            assert isinstance(store, PostgresStore)
            assert store.describe().url == "postgresql://nobody@127.0.0.1:1/nothing"
        finally:
            store.close()


# -- capabilities --------------------------------------------------------------------------------
def test_declares_notify_transactional_enqueue_and_the_database_clock() -> None:
    store = offline()
    try:
        assert store.capabilities == POSTGRES_CAPABILITIES
        for cap in (
            cf.Cap.NOTIFY,
            cf.Cap.TRANSACTIONAL_ENQUEUE,
            cf.Cap.DATABASE_CLOCK,
            cf.Cap.MULTI_PROCESS,
            cf.Cap.LEASE,
            cf.Cap.DURABLE,
        ):
            assert cap in store.capabilities
        assert cf.Cap.CLOSURE not in store.capabilities
        assert isinstance(store.default_notifier(), PgNotifier)
    finally:
        store.close()
    quiet = offline(notify=False)
    try:
        assert cf.Cap.NOTIFY not in quiet.capabilities
        assert quiet.default_notifier() is None
    finally:
        quiet.close()


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (errors.UniqueViolation("dup"), "unique_violation"),
        (errors.DeadlockDetected("deadlock"), "retryable"),
        (errors.SerializationFailure("serialize"), "retryable"),
        (errors.LockNotAvailable("nowait"), "retryable"),
        (errors.AdminShutdown("terminating"), "unavailable"),
        (errors.CrashShutdown("crash"), "unavailable"),
        (errors.CannotConnectNow("starting"), "unavailable"),
        (errors.ConnectionFailure("08006"), "unavailable"),
        (errors.SqlclientUnableToEstablishSqlconnection("08001"), "unavailable"),
        (psycopg.OperationalError("server closed the connection unexpectedly"), "unavailable"),
        (psycopg.InterfaceError("the connection is closed"), "unavailable"),
        (PoolTimeout("no connection"), "unavailable"),
        (PoolClosed("closed"), "unavailable"),
        (errors.UndefinedTable("no table"), None),
        (errors.ForeignKeyViolation("fk"), None),
        (errors.QueryCanceled("statement timeout"), None),
        (ValueError("not a database error"), None),
    ],
)
def test_errors_are_classified_by_sqlstate(error: BaseException, kind: str | None) -> None:
    result = classify(error)
    flags = {
        "unique_violation": result.unique_violation,
        "retryable": result.retryable,
        "unavailable": result.unavailable,
    }
    assert [name for name, on in flags.items() if on] == ([kind] if kind else [])
    assert PostgresDialect().classify(error) == result


# -- the schema file ------------------------------------------------------------------------------
def _index_predicates() -> dict[str, str]:
    text = (resources.files("cairnflow_postgres") / "migrations" / "001_init.sql").read_text()
    found = re.findall(r'CREATE INDEX "\{p\}(\w+)" ON \{steps\} \(([^)]*)\)\s+WHERE ([^;]+);', text)
    return {name: " ".join(where.split()) for name, _columns, where in found}


def test_partial_indexes_match_the_queries_predicates_exactly() -> None:
    """The planner uses a partial index only when the query implies its predicate."""
    predicates = _index_predicates()
    assert predicates == {
        "steps_ready": "status = 'ready'",
        "steps_running": "status = 'running'",
        "steps_due": "status IN ('scheduled', 'sleeping', 'waiting')",
    }
    queries = Queries(Tables.build("cf_", None, PostgresDialect().quote), PostgresDialect())
    claim = queries.claim_plan(workflows=["w"], queue="default", limit=1, claimed=("s", 0, "n", 0))
    flat = " ".join(claim.update_returning[0].split())
    assert "WHERE status = 'ready' AND queue = ? AND workflow IN (?)" in flat  # ready: due
    assert "ORDER BY priority DESC, due_at, id" in flat
    assert "FOR UPDATE SKIP LOCKED" in flat
    expired = " ".join(queries.expired(0, ["w"], 1)[0].split())
    assert "WHERE status = 'running' AND lease_until < ?" in expired
    assert "ORDER BY lease_until" in expired
    due = " ".join(queries.due(0, ["w"], 1)[0].split())
    assert "WHERE status IN ('scheduled', 'sleeping', 'waiting') AND due_at <= ?" in due
    assert "ORDER BY due_at" in due


def test_portable_sql_becomes_psycopg_placeholders() -> None:
    dialect = PostgresDialect()
    assert dialect.sql("SELECT ? WHERE x LIKE '5%'") == "SELECT %s WHERE x LIKE '5%%'"


def test_a_batch_sends_a_column_of_one_value_as_that_value() -> None:
    """A batch's shared columns (its workflow, its steps' shape) go as one parameter each; the
    others as arrays, after them, in column order; a column of one row is never folded."""
    queries = Queries(Tables.build("cf_", None, PostgresDialect().quote), PostgresDialect())
    insert = queries.insert_runs
    width = len(insert.columns)
    rows = [
        ("r1", "w", "q", 0, b"1", None, None, "{}", 1, 5, 5, None, None),
        ("r2", "w", "q", 0, b"1", None, None, "{}", 1, 6, 5, None, None),
    ]
    assert len(rows[0]) == width
    sql, params = PostgresDialect().batch_insert(insert, rows)
    varying = [n for n, values in enumerate(zip(*rows, strict=True)) if len(set(values)) > 1]
    assert [insert.columns[n] for n in varying] == ["id", "created_at"]
    assert sql.count("[]") == len(varying)  # two arrays, the rest one value each
    assert sql.count("%b") == width
    assert params[: width - 2] == tuple(rows[0][n] for n in range(width) if n not in varying)
    assert params[width - 2 :] == (["r1", "r2"], [5, 6])
    assert 'AS batch ("id", "created_at")' in sql
    # One row: every column an array of one, the statement any row count shares.
    sql, params = PostgresDialect().batch_insert(insert, rows[:1])
    assert sql.count("[]") == width
    assert params == tuple([value] for value in rows[0])


# -- debouncing, on a fake pool ----------------------------------------------------------------
class _FakeConn:
    """Enough of a psycopg connection for the sender: a quiet socket, a log of statements."""

    def __init__(self, log: list[tuple[float, list[str]]], quiet: socket.socket) -> None:
        self.log = log
        self.autocommit = True
        self.closed = False
        self.pgconn = types.SimpleNamespace(status=ConnStatus.OK)
        self.info = types.SimpleNamespace(transaction_status=TransactionStatus.IDLE)
        self._quiet = quiet

    def fileno(self) -> int:
        return self._quiet.fileno()

    def execute(self, query: Any, params: Any = None) -> None:
        self.log.append((time.monotonic(), list(params[0])))


class _FakePool:
    max_size = 2

    def __init__(self) -> None:
        self.log: list[tuple[float, list[str]]] = []
        self._ends = socket.socketpair()

    def getconn(self, timeout: float | None = None) -> _FakeConn:
        return _FakeConn(self.log, self._ends[0])

    def putconn(self, conn: _FakeConn) -> None:
        pass

    def close(self) -> None:
        for end in self._ends:
            end.close()


def test_a_burst_of_hints_is_a_few_notifies_and_a_lone_hint_goes_at_once() -> None:
    pool = _FakePool()
    notifier = PgNotifier(pool, debounce=0.05)  # type: ignore[arg-type]
    try:
        asked = time.monotonic()
        notifier.notify("cairnflow_a_")
        deadline = time.monotonic() + 2
        while not pool.log and time.monotonic() < deadline:
            time.sleep(0.001)
        assert pool.log[0][0] - asked < 0.04  # the leading edge waits for no timer
        started = time.monotonic()
        while time.monotonic() - started < 0.5:
            notifier.notify("cairnflow_a_")
            notifier.notify("cairnflow_b_")
            time.sleep(0.0005)
        time.sleep(0.2)
        sends = pool.log
        # About one send per debounce window, however many hints: 0.5 s / 0.05 s, plus edges.
        assert 2 <= len(sends) <= 14, len(sends)
        assert sends[-1][1] == ["cairnflow_a_", "cairnflow_b_"]  # the trailing send covers both
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(sends)]
        assert min(gaps) >= 0.045
    finally:
        notifier.close()
        pool.close()
    spare = _FakePool()
    refusing = PgNotifier(spare, debounce=0)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValueError, match="at most 63 bytes"):
            refusing.notify("x" * 64)
    finally:
        refusing.close()
        spare.close()
