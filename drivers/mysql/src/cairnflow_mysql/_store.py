"""``mysql://`` and ``mariadb://``: the SQL store on MySQL 8.0+ or MariaDB 10.6+ through PyMySQL."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from cairnflow import CairnError, Cap, StoreOpenError, Unavailable
from cairnflow.notify import LOCAL, Notifier
from cairnflow.sql import (
    SQL_CAPABILITIES,
    ErrorClassifier,
    SQLStore,
    Tables,
    check_int,
    load_migrations,
)
from cairnflow.store import StoreInfo

from ._dialect import MySQLDialect, packet_limit
from ._errors import classify_mysql_error
from ._pool import MySQLPool
from ._server import ServerVersion, check_server_version
from ._url import MySQLURL, parse_url
from ._version import __version__

__all__ = ["MYSQL_CAPABILITIES", "SQL_MODE", "MySQLStore"]

log = logging.getLogger("cairnflow.mysql")

MYSQL_CAPABILITIES = SQL_CAPABILITIES | {
    Cap.TRANSACTIONAL_ENQUEUE,
    Cap.DATABASE_CLOCK,
    Cap.STEP_HISTORY,  # recorded by its trigger (migration 021)
    Cap.RUN_TIMEOUT,  # the runs_overdue index (migration 022)
    Cap.LIFECYCLE,  # the outbox its triggers write (migrations 030-033)
}
"""The SQL layer's capabilities, plus enqueueing on the application's own connection and
the server's clock (read in UTC, whatever the session's time zone)."""

SQL_MODE = (
    "STRICT_TRANS_TABLES,STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,ONLY_FULL_GROUP_BY"
)
"""Every connection's ``sql_mode``: strict (an over-long value is an error, never truncated),
and without ``ANSI_QUOTES`` or ``NO_BACKSLASH_ESCAPES``, whatever the server's default."""

# Options that may come from the URL's query string (as text) or as keyword arguments.
_STORE_OPTIONS: dict[str, Callable[[str], Any]] = {
    "table_prefix": str,
    "pool_size": int,
    "pool_timeout": float,
    "ping_interval": float,
    "tx_attempts": int,
    "lock_wait_timeout": int,
    "migration_lock_timeout": int,
}


def _flag(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


# Connection settings the URL may carry, passed on to pymysql.connect().
_CONNECT_OPTIONS: dict[str, Callable[[str], Any]] = {
    "unix_socket": str,
    "connect_timeout": float,
    "read_timeout": float,
    "write_timeout": float,
    "ssl_ca": str,
    "ssl_cert": str,
    "ssl_key": str,
    "ssl_verify_cert": _flag,
    "ssl_verify_identity": _flag,
    "ssl_disabled": _flag,
    "charset": str,
}
# What the driver decides for every connection; connect_args may not change it.
_OWNED = frozenset(
    {"host", "port", "user", "password", "passwd", "database", "db", "charset", "autocommit"}
    | {"client_flag", "cursorclass", "sql_mode", "conv", "defer_connect"}
)


class MySQLStore(SQLStore):
    """The store on MySQL 8.0.1+ or MariaDB 10.6+: many processes, many machines.

    ``url`` is ``mysql://user:password@host:port/database`` (or ``mariadb://``);
    the tables live in that database, named by ``table_prefix``. Every keyword
    option may also come from the URL's query string; a keyword argument wins.

    Opening the store connects once: a server older than the minimum is
    refused with :class:`~cairnflow_mysql.UnsupportedServer` naming both
    versions, an unreachable one with :class:`cairnflow.Unavailable`. Every
    connection reads the server's ``max_allowed_packet``: a statement larger
    than that (an oversized payload, output, signal or progress value) is
    refused before it is sent, with :class:`cairnflow.PayloadTooLarge` naming
    the setting, instead of making the server drop the connection.

    Every connection is utf8mb4, READ COMMITTED, strict, autocommit off and
    reports *matched* rows for UPDATE (``CLIENT.FOUND_ROWS``), so a fenced
    write that changes nothing still counts as applied. Deadlocks and lock
    wait timeouts retry the whole transaction (``tx_attempts``).

    ``pool_size`` caps this store's connections (opened on demand);
    ``pool_timeout`` is how long a thread waits for one. A connection idle for
    ``ping_interval`` seconds is pinged before use and replaced if dead.
    ``lock_wait_timeout`` sets the session's ``innodb_lock_wait_timeout``
    (default: the server's). ``migration_lock_timeout`` is how long a migrator
    waits for another. ``connect_args`` go to ``pymysql.connect()`` (for
    example ``init_command`` or an ``ssl`` dict); the driver's own settings
    (charset, autocommit, client flags, sql_mode) cannot be overridden.

    Clients in one process wake each other at once; across processes they
    find work by polling, unless the store is given a ``notifier`` that
    reaches other processes (``cairnflow_redis.RedisNotifier``,
    ``cairnflow_nats.NatsNotifier``): then the store declares ``Cap.NOTIFY``
    and closes that notifier when it is closed.

    ``client.enqueue_tx(conn, ...)`` takes the application's open PyMySQL
    connection (autocommit off, utf8mb4, on this store's database): the runs
    are written inside a savepoint of its transaction, never committed here.
    If the enqueue fails (a duplicate key raises :class:`cairnflow.DuplicateRun`)
    the savepoint is rolled back, so the application's own writes stay as they
    were and its transaction can go on. A deadlock rolls the application's
    whole transaction back (InnoDB's rule): that error is raised for the
    application to retry its transaction.
    """

    capabilities = MYSQL_CAPABILITIES

    def __init__(
        self,
        url: str,
        *,
        table_prefix: str | None = None,
        pool_size: int | None = None,
        pool_timeout: float | None = None,
        ping_interval: float | None = None,
        tx_attempts: int | None = None,
        lock_wait_timeout: int | None = None,
        migration_lock_timeout: int | None = None,
        error_classifier: ErrorClassifier | None = None,
        connect_args: Mapping[str, Any] | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        target = parse_url(url)
        given = {
            "table_prefix": table_prefix,
            "pool_size": pool_size,
            "pool_timeout": pool_timeout,
            "ping_interval": ping_interval,
            "tx_attempts": tx_attempts,
            "lock_wait_timeout": lock_wait_timeout,
            "migration_lock_timeout": migration_lock_timeout,
        }
        store_options, connect_options = _split_options(target)
        opts = {**store_options, **{k: v for k, v in given.items() if v is not None}}
        prefix: str = opts.get("table_prefix", "cf_")
        # Refuse a bad prefix before anything touches the server.
        Tables.build(prefix, None, MySQLDialect().quote)
        size = check_int("pool_size", opts.get("pool_size", 16), minimum=1)
        wait = opts.get("lock_wait_timeout")
        if wait is not None:
            wait = check_int("lock_wait_timeout", wait, minimum=1)
        self.url = target
        self.database = target.database
        self.lock_wait_timeout: int | None = wait
        self._connect_kwargs = _connect_kwargs(target, connect_options, connect_args)
        dialect = MySQLDialect(
            migration_lock_timeout=opts.get("migration_lock_timeout", 300),
            database=target.database,
        )
        self._mysql_dialect = dialect
        self._server: ServerVersion | None = None
        pool = MySQLPool(
            self._connect,
            max_size=size,
            timeout=float(opts.get("pool_timeout", 30.0)),
            ping_interval=float(opts.get("ping_interval", 1.0)),
        )
        super().__init__(
            pool,
            dialect,
            load_migrations("cairnflow_mysql"),
            info=StoreInfo(
                driver="mysql",
                distribution="cairnflow-mysql",
                version=__version__,
                url=target.redacted(),
                durable=True,
            ),
            table_prefix=prefix,
            error_classifier=error_classifier,
            # Deadlocks are rare here, but cheap to retry: retry more than the default.
            tx_attempts=opts.get("tx_attempts", 10),
            notifier=LOCAL if notifier is None else notifier,
        )
        dialect.trigger_tables = (self.tables.runs, self.tables.steps)  # 031, 034, 035
        # User locks (the migration lock) are server-wide: name the database too.
        self._channel = f"cairnflow_mysql_{self.database}.{prefix}"
        try:
            with pool.connection():
                pass  # connect now: check the server, learn what it is
        except BaseException:
            pool.close()
            raise
        self._info = dataclasses.replace(self._info, server=self.server.name)

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> MySQLStore:
        """Open ``mysql://user:password@host:port/database?option=value`` (or ``mariadb://``).

        Options given as strings (from the command line) are converted.
        """
        converted: dict[str, Any] = {}
        for name, value in options.items():
            convert = _STORE_OPTIONS.get(name)
            if isinstance(value, str) and convert is not None:
                try:
                    converted[name] = convert(value)
                except ValueError as error:
                    raise CairnError(f"invalid value for option {name!r}: {error}") from None
            else:
                converted[name] = value
        return cls(url, **converted)

    # -- connections ---------------------------------------------------------------------------
    @property
    def server(self) -> ServerVersion:
        """The server this store talks to, as it reported itself when the store connected."""
        if self._server is None:
            raise CairnError("the store has not connected yet")
        return self._server

    def _connect(self) -> Any:
        """A new connection, set up for the SQL layer, to a server checked again."""
        where = self.url.redacted()
        try:
            conn = pymysql.connect(**self._connect_kwargs)
        except pymysql.err.MySQLError as error:
            if classify_mysql_error(error).unavailable:
                raise Unavailable(f"cannot connect to {where}: {error}") from error
            raise StoreOpenError(f"cannot connect to {where}: {error}") from error
        try:
            with conn.cursor() as cursor:
                raw, packet = _select_server(cursor)
                server = check_server_version(raw, where=f"the server at {where}")
                settings = [
                    "SESSION sql_mode = %s",
                    f"SESSION {server.isolation_variable} = 'READ-COMMITTED'",
                ]
                params: list[Any] = [SQL_MODE]
                if self.lock_wait_timeout is not None:
                    settings.append("SESSION innodb_lock_wait_timeout = %s")
                    params.append(self.lock_wait_timeout)
                cursor.execute("SET " + ", ".join(settings), params)
            conn.commit()
        except BaseException as error:
            conn.close()
            if isinstance(error, pymysql.err.MySQLError):
                if classify_mysql_error(error).unavailable:
                    raise Unavailable(f"cannot set up a connection to {where}: {error}") from error
                raise CairnError(f"cannot set up a connection to {where}: {error}") from error
            raise
        dialect = self._mysql_dialect
        if self._server is None:
            self._server = server
            dialect.server = server
        elif server.flavor != self._server.flavor or server.version != self._server.version:
            log.warning("%s now reports %s (was %s)", where, server.name, self._server.name)
        # The newest connection's: a session keeps the value the server had when it began,
        # and connections are replaced when they fail, so the store follows a change.
        limit = packet_limit(server, packet)
        if dialect.statement_limit is not None and dialect.statement_limit != limit:
            log.info("%s: max_allowed_packet is now %d bytes", where, packet)
        dialect.statement_limit = limit
        return conn

    def __repr__(self) -> str:
        return f"<MySQLStore {self.url.redacted()} prefix={self.tables.prefix!r}>"


def _select_server(cursor: Any) -> tuple[str, int]:
    """What the server says it is (a proxy may lie in the handshake), and the largest packet
    it takes (the session's ``max_allowed_packet``, the server's when the session began)."""
    cursor.execute("SELECT VERSION(), @@max_allowed_packet")
    row = cursor.fetchone()
    if row is None:
        raise CairnError("the server answered SELECT VERSION(), @@max_allowed_packet with no row")
    version, packet = row
    return str(version), int(packet)


def _split_options(target: MySQLURL) -> tuple[dict[str, Any], dict[str, Any]]:
    """The URL's query string as store options and connection settings, converted."""
    store: dict[str, Any] = {}
    connect: dict[str, Any] = {}
    for name, value in target.options.items():
        convert = _STORE_OPTIONS.get(name) or _CONNECT_OPTIONS.get(name)
        if convert is None:
            known = ", ".join(sorted({*_STORE_OPTIONS, *_CONNECT_OPTIONS}))
            raise CairnError(f"unknown option {name!r} in the MySQL URL; known: {known}")
        try:
            converted = convert(value)
        except ValueError as error:
            raise CairnError(f"invalid value for option {name!r} in the URL: {error}") from None
        (store if name in _STORE_OPTIONS else connect)[name] = converted
    return store, connect


def _connect_kwargs(
    target: MySQLURL, options: Mapping[str, Any], extra: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The keyword arguments of ``pymysql.connect()`` for every connection of the store."""
    charset = options.get("charset", "utf8mb4")
    if charset != "utf8mb4":
        raise CairnError(f"cairnflow-mysql always connects with charset utf8mb4, not {charset!r}")
    owned = _OWNED & set(extra or {})
    if owned:
        raise CairnError(
            f"connect_args may not set {', '.join(sorted(owned))}: the URL and the driver decide "
            f"those"
        )
    kwargs: dict[str, Any] = {
        "host": target.host,
        "port": target.port,
        "user": target.user,
        "password": target.password or "",
        "database": target.database,
        "connect_timeout": 10,
        **{k: v for k, v in options.items() if k != "charset"},
        **(extra or {}),
        "charset": "utf8mb4",
        "autocommit": False,
        # UPDATE reports the rows it matched, not the rows whose values changed: the SQL
        # layer reads rowcount to know whether a fenced write applied. Several statements
        # in one query: a one-run enqueue, its inserts and its COMMIT, is one round trip
        # (MySQLDialect.commit_alone). Every value is escaped by PyMySQL and every
        # identifier validated and quoted, as for single statements.
        "client_flag": CLIENT.FOUND_ROWS | CLIENT.MULTI_STATEMENTS,
    }
    return kwargs
