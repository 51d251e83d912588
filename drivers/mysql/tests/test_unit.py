"""Without a server: versions, URLs, the error classifier, the dialect, options."""

from __future__ import annotations

import struct
from typing import Any

import pymysql
import pytest
from pymysql import err

import cairnflow as cf
from cairnflow.drivers import load_drivers
from cairnflow.sql import ClaimPlan, Queries, Tables
from cairnflow_mysql import (
    MySQLDialect,
    MySQLStore,
    ServerVersion,
    UnsupportedServer,
    check_server_version,
    classify_mysql_error,
    migration_lock_name,
    parse_server_version,
    parse_url,
)

UNREACHABLE = "mysql://nobody:secret@127.0.0.1:1/app"  # nothing listens on port 1


# -- server versions -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "flavor", "version"),
    [
        ("8.0.36", "mysql", (8, 0, 36)),
        ("8.4.2", "mysql", (8, 4, 2)),
        ("8.0.36-28", "mysql", (8, 0, 36)),  # Percona Server
        ("9.1.0-commercial", "mysql", (9, 1, 0)),
        ("10.6.0-MariaDB", "mariadb", (10, 6, 0)),
        ("10.11.19-MariaDB-0+deb12u1", "mariadb", (10, 11, 19)),
        ("5.5.5-10.6.12-MariaDB-log", "mariadb", (10, 6, 12)),  # MariaDB's handshake prefix
        ("11.4.2-MariaDB-ubu2404", "mariadb", (11, 4, 2)),
    ],
)
def test_supported_versions_are_accepted(raw: str, flavor: str, version: tuple[int, ...]) -> None:
    server = check_server_version(raw)
    assert (server.flavor, server.version, server.raw) == (flavor, version, raw)
    assert server.supported


@pytest.mark.parametrize(
    ("raw", "found"),
    [
        ("5.7.44", "MySQL 5.7.44"),
        ("5.7.44-log", "MySQL 5.7.44"),
        ("8.0.0-dmr", "MySQL 8.0.0"),
        ("10.5.22-MariaDB", "MariaDB 10.5.22"),
        ("5.5.5-10.5.1-MariaDB", "MariaDB 10.5.1"),
        ("10.1.48-MariaDB-0+deb9u2", "MariaDB 10.1.48"),
    ],
)
def test_older_servers_are_refused_naming_both_versions(raw: str, found: str) -> None:
    with pytest.raises(UnsupportedServer) as caught:
        check_server_version(raw, where="the server at mysql://db:3306/app")
    message = str(caught.value)
    assert f"the server at mysql://db:3306/app runs {found}" in message
    assert "needs MySQL 8.0.1 or newer, or MariaDB 10.6 or newer" in message
    assert "SKIP LOCKED" in message


@pytest.mark.parametrize("raw", ["", "MySQL", "vX", "TiDB"])
def test_an_unreadable_version_is_refused(raw: str) -> None:
    with pytest.raises(UnsupportedServer, match="cannot read the server version"):
        parse_server_version(raw)


@pytest.mark.parametrize(
    ("raw", "descending", "variable"),
    [
        ("8.0.36", True, "transaction_isolation"),
        ("8.4.2", True, "transaction_isolation"),
        ("10.6.17-MariaDB", False, "tx_isolation"),
        ("10.7.8-MariaDB", False, "tx_isolation"),
        ("10.8.1-MariaDB", True, "tx_isolation"),
        ("10.11.19-MariaDB", True, "tx_isolation"),
        ("11.1.2-MariaDB", True, "transaction_isolation"),
    ],
)
def test_what_differs_between_servers_is_read_from_the_version(
    raw: str, descending: bool, variable: str
) -> None:
    server = parse_server_version(raw)
    assert server.descending_indexes is descending
    assert server.isolation_variable == variable
    dialect = MySQLDialect(server)
    assert dialect.sorts_claims_in_index is descending
    assert dialect.server_version(None) == server.name


# -- URLs --------------------------------------------------------------------------------------
def test_urls_are_parsed_and_redacted() -> None:
    url = parse_url("mariadb://app:p%40ss%3Aw@db.internal:3307/orders?pool_size=4&read_timeout=5")
    assert (url.scheme, url.host, url.port, url.database) == (
        "mariadb",
        "db.internal",
        3307,
        "orders",
    )
    assert (url.user, url.password) == ("app", "p@ss:w")
    assert url.options == {"pool_size": "4", "read_timeout": "5"}
    assert url.redacted() == "mariadb://app:***@db.internal:3307/orders"
    assert "p@ss" not in repr(url)
    defaults = parse_url("mysql://localhost/app")
    assert (defaults.port, defaults.user, defaults.password) == (3306, None, None)
    assert parse_url("mysql://u@[::1]:3306/db").redacted() == "mysql://u@[::1]:3306/db"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@h/db", "not a MySQL URL"),
        ("mysql://u:secret@h:3306", "names no database"),
        ("mysql://u:secret@h:3306/", "names no database"),
        ("mysql://u:secret@h:notaport/db", "invalid MySQL URL"),
        ("mysql://u:secret@h/db?a=1&a=2", "appears twice"),
        ("mysql://u:secret@h/db#frag", "no #fragment"),
    ],
)
def test_bad_urls_are_refused_without_showing_the_password(url: str, message: str) -> None:
    with pytest.raises(cf.CairnError, match=message) as caught:
        parse_url(url)
    assert "secret" not in str(caught.value)


def test_options_are_checked_before_anything_connects() -> None:
    with pytest.raises(cf.CairnError, match="unknown option 'pool'"):
        MySQLStore(UNREACHABLE + "?pool=3")
    with pytest.raises(cf.CairnError, match="invalid value for option 'pool_size'"):
        MySQLStore(UNREACHABLE + "?pool_size=many")
    with pytest.raises(cf.CairnError, match="always connects with charset utf8mb4"):
        MySQLStore(UNREACHABLE + "?charset=latin1")
    with pytest.raises(cf.CairnError, match="connect_args may not set autocommit, client_flag"):
        MySQLStore(UNREACHABLE, connect_args={"client_flag": 0, "autocommit": True})
    with pytest.raises(ValueError, match="pool_size must be an int >= 1"):
        MySQLStore(UNREACHABLE, pool_size=0)
    with pytest.raises(ValueError, match="lock_wait_timeout must be an int >= 1"):
        MySQLStore(UNREACHABLE, lock_wait_timeout=0)
    with pytest.raises(ValueError, match="migration_lock_timeout must be >= 1"):
        MySQLStore(UNREACHABLE, migration_lock_timeout=0)


@pytest.mark.parametrize("prefix", ["cf`; DROP TABLE cf_runs; --", "CF_", "1cf", "a" * 49, ""])
def test_a_hostile_prefix_is_refused_before_connecting(prefix: str) -> None:
    # Port 1 answers nothing: the refusal comes before any connection is attempted.
    with pytest.raises(cf.InvalidName, match="invalid table prefix"):
        MySQLStore(UNREACHABLE, table_prefix=prefix)


def test_an_unreachable_server_is_unavailable_and_names_the_url_without_password() -> None:
    with pytest.raises(cf.Unavailable, match=r"cannot connect to mysql://nobody:\*\*\*@") as caught:
        MySQLStore(UNREACHABLE, connect_args={"connect_timeout": 2})
    assert "secret" not in str(caught.value)


def test_both_schemes_are_registered_with_driver_discovery() -> None:
    drivers = load_drivers(reload=True)
    assert drivers["mysql"].store_class is MySQLStore
    assert drivers["mariadb"].store_class is MySQLStore
    assert drivers["mysql"].distribution == "cairnflow-mysql"
    assert cf.Cap.TRANSACTIONAL_ENQUEUE in drivers["mysql"].capabilities
    assert cf.Cap.CLOSURE not in drivers["mysql"].capabilities
    assert cf.Cap.DATABASE_CLOCK in drivers["mysql"].capabilities


# -- errors ------------------------------------------------------------------------------------
def server_error(code: int, sqlstate: str, message: str) -> err.MySQLError:
    """The exception PyMySQL raises for an error packet the server sent."""
    packet = b"\xff" + struct.pack("<h", code) + b"#" + sqlstate.encode() + message.encode()
    try:
        err.raise_mysql_exception(packet)
    except err.MySQLError as error:
        return error
    raise AssertionError("raise_mysql_exception did not raise")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (server_error(1062, "23000", "Duplicate entry 'k' for key 'x'"), "unique"),
        (server_error(1213, "40001", "Deadlock found when trying to get lock"), "retryable"),
        (server_error(1205, "HY000", "Lock wait timeout exceeded"), "retryable"),
        (server_error(1020, "HY000", "Record has changed since last read"), "retryable"),
        (server_error(1927, "70100", "Connection was killed"), "unavailable"),
        (server_error(1053, "08S01", "Server shutdown in progress"), "unavailable"),
        (server_error(1040, "08004", "Too many connections"), "unavailable"),
        (
            server_error(4031, "HY000", "disconnected by the server because of inactivity"),
            "unavailable",
        ),
        (err.OperationalError(2006, "MySQL server has gone away"), "unavailable"),
        (err.OperationalError(2013, "Lost connection to MySQL server during query"), "unavailable"),
        (err.OperationalError(2003, "Can't connect to MySQL server on 'db'"), "unavailable"),
        (err.InterfaceError(0, ""), "unavailable"),
        (err.InternalError("Packet sequence number wrong - got 1 expected 0"), "unavailable"),
        (err.OperationalError("invalid connection"), "unavailable"),
        (ConnectionResetError(104, "Connection reset by peer"), "unavailable"),
        (server_error(1146, "42S02", "Table 'test.x' doesn't exist"), "neither"),
        (server_error(1064, "42000", "You have an error in your SQL syntax"), "neither"),
        (server_error(1406, "22001", "Data too long for column 'node'"), "refused"),
        (server_error(1264, "22003", "Out of range value for column 'due_at' at row 1"), "refused"),
        (server_error(1366, "22007", "Incorrect string value: '\\xF0' for column"), "refused"),
        (
            server_error(1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes"),
            "refused",
        ),
        (UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed"), "refused"),
        (ValueError("not a database error"), "neither"),
    ],
    ids=lambda value: str(getattr(value, "args", value))[:40],
)
def test_errors_are_classified_by_their_mysql_error_number(error: BaseException, kind: str) -> None:
    found = classify_mysql_error(error)
    assert (found.unique_violation, found.retryable, found.unavailable, found.refused) == (
        kind == "unique",
        kind == "retryable",
        kind == "unavailable",
        kind == "refused",
    )
    assert MySQLDialect().classify(error) == found


def test_pymysql_puts_mysql_sqlstates_on_its_errors() -> None:
    # Why the number decides: the SQLSTATE of a duplicate key is MySQL's generic 23000
    # and a lock wait timeout has HY000; neither is the Postgres code for the same thing.
    assert getattr(server_error(1062, "23000", "dup"), "sqlstate", None) in ("23000", None)


# -- the dialect ------------------------------------------------------------------------------
def queries(dialect: MySQLDialect) -> Queries:
    return Queries(Tables.build("cf_", None, dialect.quote), dialect)


def test_sql_uses_format_placeholders_and_looks_leases_up_by_primary_key() -> None:
    dialect = MySQLDialect()
    sql, params = queries(dialect).hand_back(7, [("s1", "t1"), ("s2", "t2")])
    converted = dialect.sql(sql)
    assert "((id = %s AND lease_token = %s) OR (id = %s AND lease_token = %s))" in converted
    assert "IN ((" not in converted
    assert params == (7, "s1", "t1", "s2", "t2")  # same parameters, same order
    assert dialect.sql("SELECT '100%' WHERE a = ?") == "SELECT '100%%' WHERE a = %s"
    assert dialect.quote("cf_runs") == "`cf_runs`"


def test_migration_lock_names_fit_mysql_and_name_the_namespace() -> None:
    first = migration_lock_name("cairnflow_mysql_" + "d" * 64 + "." + "p" * 48)
    assert len(first) <= 64
    assert first == migration_lock_name("cairnflow_mysql_" + "d" * 64 + "." + "p" * 48)
    assert migration_lock_name("cairnflow_mysql_a.cf_") != migration_lock_name(
        "cairnflow_mysql_b.cf_"
    )


class FakeCursor:
    """Answers the claim's statements from a list of ready ids and a set locked elsewhere."""

    def __init__(self, ready: list[str], locked: set[str], *, locking: bool = False) -> None:
        self.locking = locking
        self.ready = ready
        self.locked = locked
        self.statements: list[str] = []
        self._rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.statements.append(" ".join(sql.split()))
        text = self.statements[-1]
        if text.startswith("SELECT id FROM"):
            assert ("FOR UPDATE" in text) is self.locking  # candidates are read without locks
            self._rows = [(i,) for i in self.ready[: params[-1]]]
        elif text.startswith("SELECT id, run_id") and "SKIP LOCKED" in text:
            ids = [p for p in params if p not in self.locked]
            self._rows = [(i, "run", "step", "task", 1, 0, 0, "[]") for i in ids]
        elif text.startswith("UPDATE"):
            self._rows = []
        else:
            self._rows = [(i, "run", "step", "task", 1, 0, 0, "[]") for i in params]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows


def plan(dialect: MySQLDialect, limit: int) -> ClaimPlan:
    return queries(dialect).claim_plan(
        workflows=["wf"], queue="default", limit=limit, claimed=("secret", 2, "node", 1)
    )


def test_without_descending_indexes_the_claim_locks_only_its_candidates() -> None:
    dialect = MySQLDialect(parse_server_version("10.6.17-MariaDB"))
    cursor = FakeCursor(ready=["a", "b", "c", "d"], locked={"b"})
    rows = dialect.claim(cursor, plan(dialect, limit=3))
    assert [r[0] for r in rows] == ["a", "c"]  # b is held by another claim; d was not a candidate
    select, lock, update, _read = cursor.statements
    assert "ORDER BY priority DESC, due_at, id LIMIT %s" in select
    assert lock.endswith("AND status = 'ready' FOR UPDATE SKIP LOCKED")
    assert update.startswith("UPDATE `cf_steps` SET status = 'running'")


def test_with_descending_indexes_the_claim_is_one_locking_read() -> None:
    dialect = MySQLDialect(parse_server_version("10.11.19-MariaDB"))
    cursor = FakeCursor(ready=[], locked=set(), locking=True)
    assert dialect.claim(cursor, plan(dialect, limit=3)) == []
    (select,) = cursor.statements
    assert select.endswith("ORDER BY priority DESC, due_at, id LIMIT %s FOR UPDATE SKIP LOCKED")


def test_server_version_names() -> None:
    assert str(ServerVersion("mysql", (8, 4, 2), "8.4.2")) == "MySQL 8.4.2"
    assert ServerVersion("mariadb", (10, 6, 0), "10.6.0-MariaDB").name == "MariaDB 10.6.0"
    assert pymysql.err.MySQLError is err.MySQLError


def test_a_trigger_refused_for_binary_logging_says_how_to_migrate() -> None:
    # ER_BINLOG_CREATE_ROUTINE_NEED_SUPER (1419) cannot be had from this machine's MariaDB
    # (binary logging off, and servers are not restarted in the tests): the server's answer
    # is raised as PyMySQL raises it, and the migration step must say what to do.
    class Refusing:
        def execute(self, statement: str) -> None:
            raise err.OperationalError(
                1419,
                "You do not have the SUPER privilege and binary logging is enabled (you *might*"
                " want to use the less safe log_bin_trust_function_creators variable)",
            )

    dialect = MySQLDialect(parse_server_version("10.11.6-MariaDB"))
    with pytest.raises(cf.CairnError, match=r"SET GLOBAL log_bin_trust_function_creators = 1"):
        dialect.migration_statement(Refusing(), "CREATE TRIGGER t AFTER UPDATE ON x FOR EACH ROW")
