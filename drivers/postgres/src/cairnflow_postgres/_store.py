"""``postgresql://...``: the SQL store on PostgreSQL, for many workers on many machines."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import IsolationLevel
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from cairnflow import CairnError, Cap, InvalidName, StoreOpenError, Unavailable
from cairnflow.sql import (
    SQL_CAPABILITIES,
    ErrorClassifier,
    SQLStore,
    Tables,
    check_int,
    load_migrations,
)
from cairnflow.store import StoreInfo

from ._dialect import PostgresDialect, plan_for_claims
from ._notify import PgNotifier, channel_name, lend_alive
from ._version import __version__

__all__ = ["POSTGRES_CAPABILITIES", "PostgresStore"]

log = logging.getLogger("cairnflow.postgres")

POSTGRES_CAPABILITIES = SQL_CAPABILITIES | {
    Cap.NOTIFY,
    Cap.TRANSACTIONAL_ENQUEUE,
    Cap.DATABASE_CLOCK,
    Cap.STEP_HISTORY,
    Cap.RUN_TIMEOUT,
    Cap.LIFECYCLE,
}
"""Every capability of the SQL layer, plus LISTEN/NOTIFY wake-ups, enqueueing inside the
application's transaction, the server's clock, the step history its trigger records, and run
deadlines (read through its runs_overdue index), and the lifecycle outbox its triggers write."""

SCHEMES = ("postgresql", "postgres")

# Options from_url reads from keyword arguments and from the URL's query string (libpq would
# refuse them), converting the strings a command line gives.
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True}
_BOOL_WORDS |= {"0": False, "false": False, "no": False, "off": False}


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word not in _BOOL_WORDS:
        raise ValueError(f"expected a boolean (true/false, on/off, 1/0), got {value!r}")
    return _BOOL_WORDS[word]


_URL_OPTIONS: dict[str, Callable[[Any], Any]] = {
    "table_prefix": str,
    "schema": str,
    "min_size": int,
    "max_size": int,
    "claims_size": int,
    "pool_timeout": float,
    "notify": _to_bool,
    "notify_debounce": float,
    "tx_attempts": int,
}


def redact(conninfo: str) -> str:
    """``postgresql://user@host:port/dbname``: what a report may show (never a password)."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "postgresql://?"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "")
    port = f":{parts['port']}" if parts.get("port") else ""
    dbname = f"/{parts['dbname']}" if parts.get("dbname") else ""
    return f"postgresql://{user}{host}{port}{dbname}"


def _check_schema_name(schema: str | None) -> None:
    # The SQL layer's pattern already refuses quotes, dots and capitals; Postgres reserves these.
    if schema is not None and (schema.startswith("pg_") or schema == "information_schema"):
        raise InvalidName(
            f"invalid schema {schema!r}: names starting with pg_ and information_schema "
            f"belong to PostgreSQL"
        )


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Stated once per connection: psycopg then opens every transaction at this level, and
    # the dialect's begin() has nothing to send.
    conn.isolation_level = IsolationLevel.READ_COMMITTED


def _configure_for_claims(conn: psycopg.Connection[Any]) -> None:
    # The claims pool's: its sessions plan as a claim must (plan_for_claims), so a claim
    # sends no settings of its own, and one of a single statement goes alone. Only claims
    # run there: session-wide, enable_sort = off made the outcome batch's locking read
    # (ORDER BY r.id FOR UPDATE OF r) walk the runs' whole id index, 28 ms a batch.
    _configure(conn)
    plan_for_claims(conn)


class _PoolConnections:
    """The SQL layer's ``Connections`` over a psycopg pool (ours or the application's)."""

    def __init__(
        self, pool: ConnectionPool[Any], *, owned: bool, lent: str = "size it above workers + 2"
    ) -> None:
        self.pool = pool
        self.owned = owned
        self._lent = lent
        """What to do when every connection is lent, for the pool-timeout message."""
        self.server: str | None = None
        """``PostgreSQL 15.4``, learnt from the first connection lent (libpq reports it)."""
        self._probed_at = float("-inf")

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        try:
            conn = lend_alive(self.pool, self.pool.timeout if timeout is None else timeout)
        except PoolClosed as error:
            raise Unavailable(f"postgres store is unavailable: {error}") from error
        except PoolTimeout as error:
            raise Unavailable(
                f"postgres store is unavailable: {error} (the server does not answer, or all "
                f"{self.pool.max_size} connections of the pool are lent: {self._lent})"
            ) from error
        if self.server is None:
            self.server = _server_name(conn.info.server_version)
        try:
            yield conn
        finally:
            # The SQL layer commits or rolls back itself; this only guards the pool against
            # a connection handed back mid-transaction.
            open_transaction = conn.info.transaction_status in (
                TransactionStatus.INTRANS,
                TransactionStatus.INERROR,
            )
            if not conn.closed and conn.pgconn.status == ConnStatus.OK and open_transaction:
                with contextlib.suppress(Exception):
                    conn.rollback()
            self.pool.putconn(conn)

    def probe(self, timeout: float) -> str | None:
        """The server's name and version; asks a connection at most once a minute."""
        now = time.monotonic()
        if self.server is None and now - self._probed_at >= 60:
            self._probed_at = now
            with contextlib.suppress(Exception), self.connection(timeout):
                pass
        return self.server

    def close(self) -> None:
        if self.owned:
            self.pool.close()


def _server_name(version: int) -> str:
    # libpq's number: 150004 is 15.4 (Postgres 10 and newer), 90624 is 9.6.24.
    if version >= 100000:
        return f"PostgreSQL {version // 10000}.{version % 10000}"
    return f"PostgreSQL {version // 10000}.{version // 100 % 100}.{version % 100}"


_CONNECT_TIMEOUT = 5
"""Seconds a connection attempt may take, unless the DSN sets ``connect_timeout``."""

# SQLSTATE classes a connection attempt fails with that no retry will mend: invalid
# authorization (a role or password), an unknown database.
_NOT_TRANSIENT = ("28", "3D")


def _wait_for_first_connection(
    pool: ConnectionPool[Any], dsn: str, kwargs: dict[str, Any], shown: str, timeout: int
) -> None:
    """Wait until the pool's first connections are made, or fail with the server's reason.

    Without this, a wrong role, database or port surfaces as a pool timeout
    ("couldn't get a connection after 30 s") at first use, the cause only in
    the log. On a failure the pool is closed and the error of one direct
    connection attempt is raised: :class:`~cairnflow.StoreOpenError` for what
    no retry mends (authorization, an unknown database),
    :class:`~cairnflow.Unavailable` for a server that does not answer.
    """
    if pool.min_size < 1:
        return  # the pool connects on first use: nothing to wait for
    # Polled, not pool.wait(): psycopg_pool closes the pool when wait() times out, and a
    # short timeout runs out on a loaded machine before the first connection is made.
    deadline = time.monotonic() + timeout + 1.0
    while True:
        stats = pool.get_stats()
        if stats.get("pool_available", 0) >= 1:
            return  # a first connection was made (pool_size counts attempts under way too)
        if stats.get("connections_errors", 0) > 0 or time.monotonic() >= deadline:
            break  # a refused attempt is reported at once, not after the timeout
        time.sleep(0.02)
    pool.close()
    try:
        psycopg.connect(dsn, **kwargs).close()
    except psycopg.Error as error:
        sqlstate = getattr(error, "sqlstate", None) or ""
        reason = str(error).strip()
        if sqlstate.startswith(_NOT_TRANSIENT) or "does not exist" in reason:
            raise StoreOpenError(f"cannot open {shown}: {reason}") from error
        raise Unavailable(f"cannot connect to {shown}: {reason}") from error
    raise Unavailable(f"cannot connect to {shown}: no connection within {timeout}s")


class PostgresStore(SQLStore):
    """A store in PostgreSQL: durable, shared by every process of every machine.

    Give it a ``dsn`` (a ``postgresql://`` URL or a libpq ``key=value``
    string) and it opens a :class:`psycopg_pool.ConnectionPool` of
    ``min_size`` to ``max_size`` connections, waiting up to ``pool_timeout``
    seconds for a free one. Or give it the application's own ``pool`` (a
    ``psycopg_pool.ConnectionPool``): the store then opens no connection of its
    own and never closes that pool. Either way the pool must hold the client's
    ``workers``, plus one for the notification listener, plus one for the
    dispatcher and lease renewals. A store that opened its pool also keeps up to
    ``claims_size`` connections (2) for the claims of its clients' dispatchers
    (:attr:`claims_pool`): one per client of this store claiming at the same
    moment, so a process running more clients on one store raises it.

    ``schema`` (created by :meth:`migrate` when absent) and ``table_prefix``
    name the namespace; both are validated and quoted. ``notify`` (default on)
    wakes idle clients on other machines through LISTEN/NOTIFY, debounced by
    ``notify_debounce`` seconds; polling stays on underneath. Claims use
    ``FOR UPDATE SKIP LOCKED`` at READ COMMITTED.

    ``client.enqueue_tx(tx, ...)`` takes the application's psycopg connection
    (or a ``Transaction`` or cursor of it) with a transaction open or about to
    open: the runs are written in a savepoint of it and commit or roll back
    with it, and a :class:`~cairnflow.DuplicateRun` leaves it usable. With
    notifications on, the NOTIFY is queued in the same transaction: Postgres
    delivers it at commit, and drops it on rollback.
    """

    capabilities = POSTGRES_CAPABILITIES

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        schema: str | None = None,
        table_prefix: str = "cf_",
        min_size: int = 1,
        max_size: int = 10,
        claims_size: int = 2,
        pool_timeout: float = 30.0,
        notify: bool = True,
        notify_debounce: float = 0.01,
        error_classifier: ErrorClassifier | None = None,
        tx_attempts: int = 5,
    ) -> None:
        if (dsn is None) == (pool is None):
            raise ValueError("PostgresStore takes exactly one of dsn= and pool=")
        dialect = PostgresDialect()
        # Every identifier is checked before anything is opened: a refused name opens nothing.
        Tables.build(table_prefix, schema, dialect.quote)
        _check_schema_name(schema)
        check_int("min_size", min_size, minimum=0)
        check_int("max_size", max_size, minimum=0)
        if max_size < max(min_size, 1):
            raise ValueError(f"max_size must be >= max(min_size, 1), got {max_size!r}")
        check_int("claims_size", claims_size, minimum=1)
        if not pool_timeout > 0:
            raise ValueError(f"pool_timeout must be > 0 seconds, got {pool_timeout!r}")
        if not notify_debounce >= 0:
            raise ValueError(f"notify_debounce must be >= 0 seconds, got {notify_debounce!r}")
        if pool is not None:
            if not isinstance(pool, ConnectionPool):
                raise TypeError(
                    f"pool must be a psycopg_pool.ConnectionPool (not async), got {pool!r}"
                )
            owned = False
            claims = None  # the application's pool: claims keep their transactions
            shown = redact(str(pool.conninfo))
        else:
            assert dsn is not None
            shown = redact(dsn)
            extra: dict[str, Any] = {"autocommit": False}
            given: dict[str, Any] = {}
            with contextlib.suppress(Exception):
                given = conninfo_to_dict(dsn)
            if "application_name" not in given:
                extra["application_name"] = "cairnflow"
            # Each connection attempt gives up after a few seconds (libpq waits forever by
            # default), so a server that does not answer is reported, not waited on.
            connect_timeout = int(given.get("connect_timeout") or _CONNECT_TIMEOUT)
            if "connect_timeout" not in given:
                extra["connect_timeout"] = connect_timeout
            pool = ConnectionPool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                kwargs=extra,
                configure=_configure,
                timeout=pool_timeout,
                name=f"cairnflow-{table_prefix}",
                open=True,
            )
            owned = True
            _wait_for_first_connection(pool, dsn, extra, shown, connect_timeout)
            # A client's claims for its idle workers: one at a time (its dispatcher), on a
            # connection opened at the first claim and kept (SQLStore claim_connections);
            # clients of this store claiming at the same moment take one each.
            claims = _PoolConnections(
                ConnectionPool(
                    dsn,
                    min_size=0,
                    max_size=claims_size,
                    kwargs=extra,
                    configure=_configure_for_claims,
                    timeout=pool_timeout,
                    name=f"cairnflow-{table_prefix}-claims",
                    open=True,
                ),
                owned=True,
                lent=(
                    "the claims pool: more clients of this store claimed at once than it "
                    "holds; raise claims_size"
                ),
            )
        self.pool: ConnectionPool[Any] = pool
        """The pool the store (and its notifier) borrows connections from."""
        self.claims_pool: ConnectionPool[Any] | None = None if claims is None else claims.pool
        """The pool of a client's claims for its idle workers (at most ``claims_size``
        connections, opened at the first claim), whose sessions are set up for them; None on
        the application's pool, where a claim keeps its transaction."""
        self.schema = schema
        self.notifier: PgNotifier | None = (
            PgNotifier(pool, debounce=notify_debounce, pool_timeout=pool_timeout)
            if notify
            else None
        )
        """The store's LISTEN/NOTIFY notifier (None with ``notify=False``)."""
        self._lender = _PoolConnections(pool, owned=owned)
        self._pool_timeout = float(pool_timeout)
        super().__init__(
            self._lender,
            dialect,
            load_migrations("cairnflow_postgres"),
            info=StoreInfo(
                driver="postgres",
                distribution="cairnflow-postgres",
                version=__version__,
                url=shown,
                durable=True,
            ),
            table_prefix=table_prefix,
            schema=schema,
            error_classifier=error_classifier,
            tx_attempts=tx_attempts,
            notifier=self.notifier,
            claim_connections=claims,
        )
        # A Postgres channel is an identifier (63 bytes at most); the migration lock is keyed
        # on it too, so it must name exactly one namespace.
        self._channel = channel_name(schema, table_prefix)
        if not notify:
            self.capabilities = POSTGRES_CAPABILITIES - {Cap.NOTIFY}
        self._describe_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> PostgresStore:
        """Open ``postgresql://user@host:port/dbname`` (or ``postgres://``).

        The store's own options may be keyword arguments or query parameters
        (``?table_prefix=app_&schema=jobs&max_size=20``); strings, as a
        command line gives them, are converted. Every other query parameter is
        libpq's (``sslmode``, ``connect_timeout``, ``application_name``...).

        With ``pool=`` (the application's ``psycopg_pool.ConnectionPool``) the
        connections are the pool's: the URL only picks this driver and may carry
        the store's own options (``postgresql://?table_prefix=app_``; a host
        and database in it are ignored). A libpq parameter in it is refused,
        since the pool's connections would never see it.
        """
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in SCHEMES:
            raise CairnError(f"not a postgresql:// URL: {redact(url)!r}")
        parts = urlsplit(url)
        kept: list[tuple[str, str]] = []
        from_query: dict[str, Any] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in _URL_OPTIONS:
                from_query[key] = value
            else:
                kept.append((key, value))
        merged = {**from_query, **options}
        dsn: str | None = urlunsplit(
            # quote, not quote_plus: libpq reads "+" as itself (options=-c%20search_path%3Dx)
            ("postgresql", parts.netloc, parts.path, urlencode(kept, quote_via=quote), "")
        )
        if merged.get("pool") is not None:
            if kept:
                names = ", ".join(sorted({key for key, _ in kept}))
                raise CairnError(
                    f"the URL gives connection parameters ({names}) but pool= gives the "
                    "connections: set them on the pool, or drop pool="
                )
            dsn = None  # the pool's connections, not the URL's
        for key, convert in _URL_OPTIONS.items():
            if isinstance(merged.get(key), str):
                try:
                    merged[key] = convert(merged[key])
                except ValueError as error:
                    raise CairnError(f"invalid value for option {key!r}: {error}") from None
        return cls(dsn, **merged)

    # -- lifecycle ---------------------------------------------------------------------------
    def describe(self) -> StoreInfo:
        """What this store is. The server's version comes from the first connection made.

        It never waits long: error messages and reports call it, so on a server
        that cannot be reached it gives up after two seconds (once a minute)
        and leaves ``server`` empty.
        """
        if self._info.server is None:
            with self._describe_lock:
                server = self._lender.probe(min(2.0, self._pool_timeout))
                if server is not None and self._info.server is None:
                    self._info = dataclasses.replace(self._info, server=server)
        return self._info

    def close(self) -> None:
        """Stop the notifier and close the pool if the store opened it (never the app's)."""
        if self.notifier is not None:
            self.notifier.close()
        super().close()

    # -- schema --------------------------------------------------------------------------------
    def migration_scripts(self) -> list[tuple[str, str]]:
        """Every migration as SQL a DBA can apply by hand, the schema's creation included."""
        scripts = super().migration_scripts()
        if self.schema is not None:
            label, script = scripts[0]
            create = f"CREATE SCHEMA IF NOT EXISTS {self.dialect.quote(self.schema)};\n"
            scripts[0] = (label, create + script)
        return scripts
