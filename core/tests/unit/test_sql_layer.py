"""The shared SQL layer's pure parts: statement splitting, names, migrations files, the pool,
statements and rows, the default savepoint, error sorting, the statement limit."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.sql import (
    ClaimedRun,
    ClaimedStep,
    Dialect,
    ErrorClass,
    Migration,
    Queries,
    QueuePool,
    RunRow,
    StatementLimit,
    StepRow,
    Tables,
    _statements,
    default_classifier,
    load_migrations,
    split_statements,
)
from cairnflow.sql._limits import check_statement
from cairnflow.sql._rows import LeaderRow, ScheduleRow, TickRow


def test_split_statements_respects_quotes_and_comments() -> None:
    sql = """
    -- a comment; with a semicolon
    CREATE TABLE a (x TEXT DEFAULT 'semi;colon');
    /* block; comment */
    INSERT INTO a VALUES ("q;uoted");
    ;
    SELECT 1
    """
    assert split_statements(sql) == [
        "-- a comment; with a semicolon\n    CREATE TABLE a (x TEXT DEFAULT 'semi;colon')",
        '/* block; comment */\n    INSERT INTO a VALUES ("q;uoted")',
        "SELECT 1",
    ]


def test_tables_are_validated_and_quoted() -> None:
    dialect = Dialect()
    tables = Tables.build("app_", None, dialect.quote)
    assert (tables.runs, tables.steps, tables.migrations) == (
        '"app_runs"',
        '"app_steps"',
        '"app_migrations"',
    )
    with_schema = Tables.build("cf_", "jobs", dialect.quote)
    assert with_schema.runs == '"jobs"."cf_runs"'
    for bad in ['x"; drop', "Upper_", "9x"]:
        with pytest.raises(cf.InvalidName):
            Tables.build(bad, None, dialect.quote)
    with pytest.raises(cf.InvalidName, match="invalid schema"):
        Tables.build("cf_", 'public"; --', dialect.quote)


def test_format_paramstyle_escapes_percent_signs() -> None:
    class Format(Dialect):
        paramstyle = "format"

    assert (
        Format().sql("SELECT '100%' WHERE a = ? AND b = ?")
        == "SELECT '100%%' WHERE a = %s AND b = %s"
    )
    assert Dialect().sql("a = ?") == "a = ?"


def test_migrations_must_be_numbered_without_gaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fake_driver"
    (package / "migrations").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "migrations" / "001_init.sql").write_text("CREATE TABLE {runs} (x INTEGER);")
    (package / "migrations" / "003_later.sql").write_text("SELECT 1;")
    (package / "migrations" / "notes.txt").write_text("ignored")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(cf.CairnError, match="found 003_later where 002 was expected"):
        load_migrations("fake_driver")
    (package / "migrations" / "003_later.sql").rename(package / "migrations" / "002_later.sql")
    found = load_migrations("fake_driver")
    assert [m.label for m in found] == ["001_init", "002_later"]
    tables = Tables.build("x_", None, Dialect().quote)
    assert found[0].statements(tables) == ['CREATE TABLE "x_runs" (x INTEGER)']
    assert found[0].checksum == Migration(1, "init", "CREATE TABLE {runs} (x INTEGER);").checksum


def test_default_classifier_knows_sqlite_errors(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.execute("CREATE TABLE t (k TEXT UNIQUE)")
    conn.execute("INSERT INTO t VALUES ('a')")
    with pytest.raises(sqlite3.IntegrityError) as unique:
        conn.execute("INSERT INTO t VALUES ('a')")
    assert default_classifier(unique.value) == ErrorClass(unique_violation=True)
    assert default_classifier(sqlite3.OperationalError("database is locked")).retryable
    assert default_classifier(ConnectionResetError()).unavailable
    assert default_classifier(ValueError("x")) == ErrorClass()
    with pytest.raises(sqlite3.OperationalError) as missing:
        conn.execute("SELECT * FROM nope")
    assert default_classifier(missing.value) == ErrorClass()


def test_the_default_classifier_sorts_values_the_database_refuses(tmp_path: Path) -> None:
    refused = ErrorClass(refused=True)
    for value, raised in [
        (b"x" * 101, sqlite3.DataError),  # SQLITE_TOOBIG: "string or blob too big"
        (2**63, OverflowError),  # "Python int too large to convert to SQLite INTEGER"
        ("bad \udc80", UnicodeEncodeError),  # no UTF-8 for a lone surrogate
    ]:
        # A connection each: sqlite3 reports a failed bind with the previous error's text.
        conn = sqlite3.connect(tmp_path / "r.db")
        conn.execute("CREATE TABLE IF NOT EXISTS t (v)")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100)
        with pytest.raises(raised) as caught:
            conn.execute("INSERT INTO t VALUES (?)", (value,))
        conn.close()
        assert default_classifier(caught.value) == refused, value
    # Postgres's data_exception and program_limit_exceeded, from any driver with SQLSTATEs.
    assert default_classifier(_PgcodeError("22003")) == refused  # bigint out of range
    assert default_classifier(_PgcodeError("22P05")) == refused  # \u0000 in text or jsonb
    assert default_classifier(_PgcodeError("54000")) == refused  # too large for its type
    assert default_classifier(_PgcodeError("42P01")) == ErrorClass()


class FakeConnection:
    """A stand-in DB-API connection that only records being closed."""

    opened = 0

    def __init__(self) -> None:
        FakeConnection.opened += 1
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_pool_lends_each_connection_to_one_block_and_discards_broken_ones() -> None:
    pool = QueuePool(
        FakeConnection, max_size=2, timeout=0.2, broken=lambda e: isinstance(e, ConnectionError)
    )
    with pool.connection() as a, pool.connection() as b:
        assert a is not b
        with (
            pytest.raises(cf.Unavailable, match=r"no connection free after 0\.2s"),
            pool.connection(),
        ):
            pass
    with pool.connection() as again:
        assert again in (a, b)
    with pytest.raises(ConnectionError), pool.connection() as doomed:
        raise ConnectionError("server went away")
    assert doomed.closed
    with pool.connection() as fresh:
        assert fresh is not doomed
    pool.close()
    with pytest.raises(cf.Unavailable, match="closed"), pool.connection():
        pass


def test_pool_waiters_get_a_connection_when_one_returns() -> None:
    pool = QueuePool(FakeConnection, max_size=1, timeout=5)
    got: list[Any] = []
    with pool.connection() as held:
        waiter = threading.Thread(target=lambda: got.append(pool.connection().__enter__()))
        waiter.start()
        waiter.join(0.1)
        assert not got
    waiter.join(5)
    assert got == [held]


def test_pool_replaces_a_connection_that_fails_its_check() -> None:
    def check(conn: FakeConnection) -> None:
        if conn.closed:
            raise ConnectionError("dead")

    pool = QueuePool(FakeConnection, max_size=1, check=check)
    with pool.connection() as first:
        pass
    first.close()  # the server dropped it while it was idle
    with pool.connection() as second:
        assert second is not first


class _DictArgsError(Exception):
    """What pg8000 raises: the server's error fields as a dict in ``args[0]``."""


class _PgcodeError(Exception):
    """What psycopg2 raises: the SQLSTATE on ``pgcode``."""

    def __init__(self, pgcode: str) -> None:
        super().__init__("error")
        self.pgcode = pgcode


def test_the_default_classifier_reads_the_sqlstate_of_every_common_postgres_driver() -> None:
    from cairnflow.sql import ErrorClass, default_classifier

    unique = _DictArgsError({"S": "ERROR", "C": "23505", "M": "duplicate key value"})
    assert default_classifier(unique).unique_violation
    assert default_classifier(_DictArgsError({"C": "40P01", "M": "deadlock"})).retryable
    assert default_classifier(_DictArgsError({"C": "57P01", "M": "terminating"})).unavailable
    assert default_classifier(_PgcodeError("23505")).unique_violation
    assert default_classifier(_PgcodeError("08006")).unavailable
    neither = ErrorClass()
    assert default_classifier(_DictArgsError({"C": "42P01", "M": "no such table"})) == neither
    assert default_classifier(ValueError("no sqlstate at all")) == neither


@pytest.mark.parametrize(
    ("columns", "row"),
    [
        (_statements.RUN_COLUMNS, RunRow),
        (_statements.STEP_COLUMNS, StepRow),
        (_statements.CLAIMED_COLUMNS, ClaimedStep),
        (_statements.CLAIM_RUN_COLUMNS, ClaimedRun),
        (_statements.SCHEDULE_COLUMNS, ScheduleRow),
        (_statements.TICK_COLUMNS, TickRow),
        (_statements.LEADER_COLUMNS, LeaderRow),
    ],
)
def test_each_column_list_is_its_row_types_fields(columns: str, row: type[Any]) -> None:
    # Not columns: a claimed step's run, and whether a schedule's last run is finished.
    fields = [f for f in row._fields if f not in ("run", "last_run_finished")]
    assert [c.strip() for c in columns.split(",")] == fields


def test_statements_render_the_namespace_and_leave_the_lists_for_later() -> None:
    dialect = Dialect()
    queries = Queries(Tables.build("app_", None, dialect.quote), dialect)
    assert queries.lock_run == 'SELECT state, steps_left FROM "app_runs" WHERE id = ? FOR UPDATE'
    sql, params = queries.cancel_steps(7, ["s1", "s2"])
    assert "{" not in sql
    expected = """UPDATE "app_steps" SET status = 'cancelled', finished_at = ?, due_at = NULL
        WHERE id IN (?, ?)"""
    assert sql.split() == expected.split()
    assert params == (7, "s1", "s2")


class _Recorder:
    def __init__(self) -> None:
        self.statements: list[str] = []

    def execute(self, sql: str, params: Any = ()) -> None:
        self.statements.append(sql)


def test_the_default_savepoint_rolls_back_only_the_block() -> None:
    dialect, cursor = Dialect(), _Recorder()
    with dialect.savepoint(cursor):
        cursor.execute("INSERT")

    def refused() -> None:
        with dialect.savepoint(cursor):
            cursor.execute("INSERT")
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        refused()
    assert cursor.statements == [
        "SAVEPOINT cairnflow_enqueue",
        "INSERT",
        "RELEASE SAVEPOINT cairnflow_enqueue",
        "SAVEPOINT cairnflow_enqueue",
        "INSERT",
        "ROLLBACK TO SAVEPOINT cairnflow_enqueue",
    ]


class _Measuring(Dialect):
    """The portable dialect under a statement limit, counting how often it measures."""

    def __init__(self, size: int | None) -> None:
        if size is not None:
            self.statement_limit = StatementLimit(size, "the test's limit", expansion=2)
        self.measured = 0

    def statement_size(self, cursor: Any, sql: str, params: Any) -> int:
        self.measured += 1
        return super().statement_size(cursor, sql, params)


_UPDATE = "UPDATE steps SET output = ? WHERE id = ?"


def test_an_ordinary_statement_passes_the_limit_on_a_length_compare() -> None:
    dialect = _Measuring(10_000)
    check_statement(dialect, None, _UPDATE, (b"x" * 100, "step-1"))
    check_statement(_Measuring(None), None, _UPDATE, (b"x" * 10**6, "step-1"))  # no limit
    assert dialect.measured == 0


def test_a_statement_near_the_limit_is_measured_and_passes_if_it_fits() -> None:
    dialect = _Measuring(1000)
    value = b"x" * (1000 - len(_UPDATE) - len("step-1"))  # exactly the limit, as sent
    check_statement(dialect, None, _UPDATE, (value, "step-1"))
    assert dialect.measured == 1


def test_a_statement_over_the_limit_is_refused_naming_its_value_the_size_and_the_setting() -> None:
    dialect = _Measuring(1000)
    value = b"x" * (1001 - len(_UPDATE) - len("step-1"))
    with pytest.raises(cf.PayloadTooLarge) as caught:
        check_statement(dialect, None, _UPDATE, (value, "step-1"))
    assert str(caught.value) == (
        f"a statement carrying a value of {len(value)} bytes is 1001 bytes encoded, "
        "over the test's limit of 1000 bytes"
    )
    assert (caught.value.size, caught.value.limit) == (1001, 1000)


def test_a_value_over_the_limit_by_itself_is_refused_without_measuring() -> None:
    dialect = _Measuring(1000)
    with pytest.raises(cf.PayloadTooLarge, match="a value sent in one statement is 1001 bytes"):
        check_statement(dialect, None, _UPDATE, (b"x" * 1001, "step-1"))
    assert dialect.measured == 0


def test_the_default_statement_size_counts_text_in_utf8_and_numbers_as_their_digits() -> None:
    size = Dialect().statement_size(None, "SELECT ?, ?, ?", ("é", b"\x00\x01", 12345))
    assert size == len("SELECT ?, ?, ?") + 2 + 2 + 5
