"""How MySQL and MariaDB differ from the portable SQL of the shared layer.

* ``%s`` placeholders and backtick quoting.
* No ``UPDATE ... RETURNING`` and no ``LIMIT`` inside an ``IN`` subquery, so a
  claim is a locking ``SELECT ... FOR UPDATE SKIP LOCKED`` of the ready ids, an
  ``UPDATE`` of those ids by primary key and a ``SELECT`` of the claimed rows,
  in one transaction at READ COMMITTED (set on every connection).
* DDL commits implicitly, so migrations cannot be transactional: each file is
  one statement, and migrators are serialised with ``GET_LOCK``.
* Error numbers, not SQLSTATEs, say what an error means
  (:func:`~cairnflow_mysql.classify_mysql_error`).
* The server drops the connection over a statement larger than its
  ``max_allowed_packet``, so the store reads that setting when it connects and
  the SQL layer refuses a larger statement before sending it
  (:func:`packet_limit`, :meth:`MySQLDialect.statement_size`).

What differs between the two servers is decided from the version the server
reports when the store connects (:class:`~cairnflow_mysql.ServerVersion`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import pymysql
from pymysql.constants import CLIENT

from cairnflow import CairnError
from cairnflow.sql import (
    ClaimedRow,
    ClaimPlan,
    Commit,
    Cursor,
    Dialect,
    ErrorClass,
    Statement,
    StatementLimit,
)

from ._errors import broken_trigger, classify_mysql_error, error_code
from ._server import ServerVersion

__all__ = ["MySQLDialect", "migration_lock_name", "packet_limit"]

log = logging.getLogger("cairnflow.mysql")
retry_log = logging.getLogger("cairnflow.mysql.retry")

_LOCK_NAME_MAX = 64  # MySQL refuses longer user-lock names


DUPLICATE_COLUMN = 1060
"""ER_DUP_FIELDNAME: an ``ADD COLUMN`` of a column the table has."""


def migration_lock_name(key: str) -> str:
    """The ``GET_LOCK`` name of a namespace: at most 64 characters, whatever ``key`` is.

    User locks are server-wide, so ``key`` must name the database as well as
    the table prefix; a digest keeps it short.
    """
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"cairnflow_migrate_{digest}"[:_LOCK_NAME_MAX]


def packet_limit(server: ServerVersion, max_allowed_packet: int) -> StatementLimit:
    """The statement limit of ``server``, whose ``max_allowed_packet`` is that many bytes.

    A character of text takes up to 4 bytes as sent (UTF-8), a byte of a value 2
    (hex, or an escape), so a statement whose text and values fit in a quarter of
    the packet is not measured.
    """
    product = "MariaDB" if server.flavor == "mariadb" else "MySQL"
    return StatementLimit(max_allowed_packet, f"{product}'s max_allowed_packet", expansion=4)


_APPLIED_ALREADY = frozenset({1060, 1061})
"""ER_DUP_FIELDNAME, ER_DUP_KEYNAME: an ``ALTER TABLE ... ADD`` that ran before."""

_TRIGGER_NEEDS_SUPER = 1419
"""ER_BINLOG_CREATE_ROUTINE_NEED_SUPER: a trigger created with binary logging on, by a user
without SUPER, while ``log_bin_trust_function_creators`` is off (the triggers of the step
history and of lifecycle events, 025, 031, 034 and 035)."""
_TRIGGER_REFUSED = (
    "this migration creates a trigger, and the server logs binary: MySQL lets a user without "
    "the SUPER privilege create one only with log_bin_trust_function_creators=1. Run "
    "'SET GLOBAL log_bin_trust_function_creators = 1' as an administrator (or set it in the "
    "server's configuration), or migrate as a user with SUPER, then run cairn migrate again; "
    "what was applied is kept ({error})"
)


FLUSH_WAIT = 30
"""Seconds a ``FLUSH TABLES`` of a broken trigger's tables waits for statements using them."""
_NO_RELOAD = frozenset({1227, 1044, 1045})
"""ER_SPECIFIC_ACCESS_DENIED_ERROR (RELOAD missing), ER_DBACCESS_DENIED_ERROR,
ER_ACCESS_DENIED_ERROR."""
_FLUSH_REFUSED = (
    "a cached copy of one of {tables} holds a trigger that a killed connection left unparsed "
    "({error}); the trigger is intact, but every statement given that copy fails until it "
    "leaves the server's table cache. Grant this user the RELOAD privilege, so the store runs "
    "FLUSH TABLES {tables} itself when this happens, or run it as an administrator now"
)


class MySQLDialect(Dialect):
    """MySQL 8.0.1+ and MariaDB 10.6+, through PyMySQL.

    ``server`` is what the store read when it connected (None before that:
    the choices then are the ones every supported server accepts).
    ``migration_lock_timeout`` is how many seconds a migrator waits for
    another one to finish. ``database`` is the store's: an application
    connection given to ``enqueue_tx`` must be on it (None: not checked).
    """

    name = "mysql"
    trigger_tables: tuple[str, ...] = ()
    """The quoted names of the store's tables that have triggers (set by the store), which
    :meth:`recover` flushes from the table cache."""
    paramstyle: Literal["qmark", "format"] = "format"
    quote_char = "`"
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    keep_existing = " ON DUPLICATE KEY UPDATE running = running"
    # A batch of outcomes locks its runs with a SELECT ... FOR UPDATE of the runs table alone,
    # by their unique id index, in id order. MariaDB cannot lock only one table of a join (no
    # FOR UPDATE OF); MySQL 8 can, but InnoDB locks rows as the join reads them, not in the
    # ORDER BY's order, so two batches could lock the same runs in different orders.
    lock_runs_joined = None
    forced_ready = "f.forced_ready = ?"  # a generated column, indexed (029_forced_ready)
    batch_statements = True
    # A batch enqueue's runs, then its steps, as multi-row INSERT ... VALUES statements under
    # max_allowed_packet (Dialect.batch_insert's default). PyMySQL's executemany joins rows
    # into one statement only for an INSERT whose VALUES are all placeholders, which ours
    # (with 'active' and 0 in them) are not: it sent one statement, one round trip, per row.
    batch_inserts = True
    # Pure UTC arithmetic: neither the session time zone nor a DST fold can shift it.
    now_sql = "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) * 1000"

    def __init__(
        self,
        server: ServerVersion | None = None,
        *,
        migration_lock_timeout: int = 300,
        database: str | None = None,
    ) -> None:
        if isinstance(migration_lock_timeout, bool) or migration_lock_timeout < 1:
            raise ValueError(
                f"migration_lock_timeout must be >= 1 second, got {migration_lock_timeout!r}"
            )
        self.server = server
        self.migration_lock_timeout = int(migration_lock_timeout)
        self.database = database

    @property
    def sorts_claims_in_index(self) -> bool:
        """True when the claim index gives the claim's order (descending index parts).

        MySQL 8 and MariaDB 10.8+ honour ``priority DESC`` in the index, so the
        claim reads the index in order and stops after ``limit`` rows.
        """
        return self.server is None or self.server.descending_indexes

    def classify(self, error: BaseException) -> ErrorClass:
        """Sort an error by its MySQL error number (see :func:`classify_mysql_error`).

        Each retryable error (a deadlock, a lock wait timeout) is logged at DEBUG on
        ``cairnflow.mysql.retry``: the SQL layer runs the transaction again, and
        this log is the only trace of it.
        """
        found = classify_mysql_error(error)
        if found.retryable:
            retry_log.debug("retryable error %s: the transaction runs again", error)
        return found

    def recovers(self, error: BaseException) -> bool:
        """True for a broken cached trigger (:meth:`recover` flushes its tables)."""
        return bool(self.trigger_tables) and broken_trigger(error)

    def recover(self, cursor: Cursor, error: BaseException) -> None:
        """Evict the store's trigger tables from the table cache if a copy holds a broken trigger.

        A connection killed while the server parsed a table's triggers leaves
        that copy of the table in the cache unusable, though the triggers are
        intact (:func:`~cairnflow_mysql.broken_trigger`; measured on MariaDB
        10.11: a ``KILL`` during the open of ``steps`` made every later write
        that took that copy fail until a ``FLUSH``). ``FLUSH TABLES`` of the
        store's tables that have triggers (:attr:`trigger_tables`) drops every
        cached copy, so the retry opens and parses them again. It waits at most
        ``FLUSH_WAIT`` seconds for statements using them, and needs the RELOAD
        privilege: without it, a :class:`~cairnflow.CairnError` says so, since
        no retry can succeed until the copy leaves the cache.
        """
        if not self.recovers(error):
            return
        tables = ", ".join(self.trigger_tables)
        log.warning(
            "a cached copy of a table holds a trigger left unparsed by a killed connection "
            "(%s): FLUSH TABLES %s, then the transaction runs again",
            error,
            tables,
        )
        try:
            cursor.execute(f"SET SESSION lock_wait_timeout = {FLUSH_WAIT:d}")
            try:
                cursor.execute(f"FLUSH TABLES {tables}")
            finally:
                cursor.execute("SET SESSION lock_wait_timeout = DEFAULT")
        except pymysql.err.MySQLError as flush_error:
            if error_code(flush_error) in _NO_RELOAD:
                raise CairnError(_FLUSH_REFUSED.format(tables=tables, error=error)) from error
            log.warning(
                "FLUSH TABLES %s failed (%s); the transaction runs again", tables, flush_error
            )

    writes_together = True

    def together(self, statements: Sequence[Statement]) -> Statement:
        """The statements one after the other, ``;``-separated: one query, sent at once where
        the connection takes several statements in one (:meth:`commit_alone`)."""
        sql = ";\n".join(text for text, _ in statements)
        return sql, tuple(value for _, values in statements for value in values)

    def commit_alone(self, cursor: Cursor, commit: Commit, statement: Statement) -> bool:
        """``statement`` and its ``COMMIT`` as one query: one round trip for a one-run enqueue,
        where its run, its steps and the COMMIT were three.

        Needs a connection opened with ``CLIENT.MULTI_STATEMENTS`` (the store's own); the
        server runs the statements in order and stops at the first that fails, whose error
        PyMySQL raises when it reads that statement's result (``nextset``), so the
        transaction is rolled back as for any refused insert. False on any other connection.
        """
        conn = cursor.connection
        if not conn.client_flag & CLIENT.MULTI_STATEMENTS:
            return False
        sql, params = statement
        commit.sending()
        cursor.execute(f"{sql};\nCOMMIT", params)
        while cursor.nextset():
            pass
        commit.sent()
        return True

    def statement_size(self, cursor: Cursor, sql: str, params: Sequence[Any]) -> int:
        """The packet PyMySQL sends for ``sql`` with ``params``, plus one byte.

        PyMySQL writes the values into the SQL text: text escaped (quotes and
        backslashes doubled), bytes as hex since PyMySQL 1.2 (twice their
        length; escaped like text before). The text is made here as PyMySQL makes
        it (``cursor.mogrify``), so this counts what is sent whatever its
        version: the text in the connection's encoding after the command byte.
        And one byte more, since the server takes a packet only if it is smaller
        than ``max_allowed_packet`` (MariaDB 10.11 refuses one of exactly that
        size). Asked only for a statement near the limit (see
        :class:`~cairnflow.sql.StatementLimit`).
        """
        text: str = cursor.mogrify(sql, tuple(params))
        return len(text.encode(cursor.connection.encoding, "surrogateescape")) + 2

    def claim(self, cursor: Cursor, plan: ClaimPlan) -> list[ClaimedRow]:
        """Lease the most urgent ready steps: a locking SELECT, an UPDATE by id, a SELECT.

        Where the server ignores descending index parts (MariaDB before 10.8),
        the claim's ``ORDER BY`` needs a sort, and a locking read that sorts
        locks every row it reads before the ``LIMIT`` applies: one claim would
        hold every ready step and the others would skip them all. There the
        candidates are chosen by a plain read first, then locked by primary key
        with ``SKIP LOCKED`` (see :meth:`claim_by_candidates`).
        """
        if self.sorts_claims_in_index:
            return self.claim_in_three_statements(cursor, plan)
        return self.claim_by_candidates(cursor, plan)

    def claim_by_candidates(self, cursor: Cursor, plan: ClaimPlan) -> list[ClaimedRow]:
        """Claim with a plain read of the candidates, then lock those still ready by id.

        The plain read sees the most urgent ready steps at that instant; the
        locking read keeps those no other claim holds and that are still ready
        (READ COMMITTED reads the latest committed version), so two claims
        never lease one step. Candidates another claim took are simply not
        claimed this time.
        """
        sql, params = plan.select_ready
        if not sql.endswith(self.skip_locked):
            raise AssertionError(f"the claim's SELECT does not end with {self.skip_locked!r}")
        cursor.execute(self.sql(sql[: -len(self.skip_locked)]), params)
        candidates = [row[0] for row in cursor.fetchall()]
        if not candidates:
            return []
        sql, params = plan.claimed_rows(candidates)
        cursor.execute(self.sql(f"{sql} AND status = 'ready'{self.skip_locked}"), params)
        ids = {row[0] for row in cursor.fetchall()}
        locked = [step_id for step_id in candidates if step_id in ids]  # keep the claim's order
        if not locked:
            return []
        return self.lease_ids(cursor, plan, locked)

    def lock_candidates(
        self, cursor: Cursor, ready: Statement, still_ready: Callable[[Sequence[str]], Statement]
    ) -> list[ClaimedRow]:
        """A keyed claim's candidates, locked as :meth:`claim` locks its own (see there)."""
        if self.sorts_claims_in_index:
            return super().lock_candidates(cursor, ready, still_ready)
        sql, params = ready
        cursor.execute(self.sql(sql), params)
        rows = list(cursor.fetchall())
        if not rows:
            return []
        sql, params = still_ready([row[0] for row in rows])
        cursor.execute(self.sql(sql), params)
        locked = {row[0] for row in cursor.fetchall()}
        return [row for row in rows if row[0] in locked]

    def migration_statement(self, cursor: Cursor, statement: str) -> None:
        """Run a migration's statement; an ``ADD COLUMN``, ``ADD INDEX`` or ``CREATE INDEX``
        found applied is done.

        DDL commits on its own, so a migrator can die after a statement and before
        its ledger row, and MySQL 8 has no ``ADD COLUMN IF NOT EXISTS``. One
        ``ALTER TABLE`` is atomic (all its columns and indexes, or none), so when
        it is refused because its first column exists (1060) or its index does
        (1061), an earlier run of it applied all of it; so did one of a ``CREATE
        INDEX`` refused because its index exists (1061).
        """
        try:
            cursor.execute(statement)
        except pymysql.err.MySQLError as error:
            code = error.args[0] if error.args else None
            ddl = re.sub(r"--[^\n]*", "", statement).strip().upper()  # the file's comments
            added = ddl.startswith("ALTER TABLE") and ("ADD COLUMN" in ddl or "ADD INDEX" in ddl)
            if code in _APPLIED_ALREADY and (added or ddl.startswith("CREATE INDEX")):
                log.info("a migration statement was applied already: %s", error)
                return
            if code == _TRIGGER_NEEDS_SUPER:
                raise CairnError(_TRIGGER_REFUSED.format(error=error)) from error
            raise

    def application_connection(self, tx: Any) -> pymysql.connections.Connection[Any]:
        """The application's PyMySQL connection, if the runs can be written atomically on it.

        Refused: another object, autocommit on (each INSERT would commit on its
        own), a charset other than utf8mb4, and a current database other than
        the store's. The runs are then written in a savepoint (the standard
        one, :meth:`Dialect.savepoint`).
        """
        if not isinstance(tx, pymysql.connections.Connection):
            raise TypeError(
                f"enqueue_tx() on MySQLStore takes the application's PyMySQL "
                f"connection (pymysql.connections.Connection), got {type(tx).__name__}"
            )
        if tx.get_autocommit():
            raise CairnError(
                "enqueue_tx() needs a connection with autocommit off: with autocommit on, "
                "each INSERT would commit on its own instead of with your transaction"
            )
        if tx.charset != "utf8mb4":
            raise CairnError(
                f"enqueue_tx() needs a connection with charset utf8mb4, got {tx.charset!r}: "
                f"labels and keys are utf8mb4"
            )
        if self.database is not None:
            with tx.cursor() as cursor:
                cursor.execute("SELECT DATABASE()")
                row = cursor.fetchone()
            current = row[0] if row else None
            if current != self.database:
                raise CairnError(
                    f"enqueue_tx(): the connection's current database is {current!r}, but "
                    f"this store's tables are in {self.database!r}"
                )
        return tx

    @contextlib.contextmanager
    def migration_lock(self, cursor: Cursor, key: str) -> Iterator[None]:
        """Hold ``GET_LOCK`` on the namespace's lock name while migrating.

        The lock belongs to the connection: a migrator that dies releases it
        with its connection, so a crash never wedges the next migrate.
        """
        name = migration_lock_name(key)
        cursor.execute("SELECT GET_LOCK(%s, %s)", (name, self.migration_lock_timeout))
        row = cursor.fetchone()
        if row is None or row[0] != 1:
            raise CairnError(
                f"could not take the migration lock {name!r} within "
                f"{self.migration_lock_timeout}s: another process is still migrating this "
                f"namespace ({key}); try again when it has finished"
            )
        try:
            yield
        finally:
            try:
                cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
                cursor.fetchall()
            except Exception:
                # The connection is broken: the server released the lock with it.
                log.debug("releasing the migration lock %s failed", name, exc_info=True)

    def server_version(self, cursor: Cursor) -> str | None:
        """``MariaDB 10.11.9`` or ``MySQL 8.4.2`` (None before the store connected)."""
        return self.server.name if self.server is not None else None

    def __repr__(self) -> str:
        server = f" on {self.server.name}" if self.server is not None else ""
        return f"<MySQLDialect{server}>"
