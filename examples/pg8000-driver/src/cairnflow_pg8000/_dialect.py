"""How PostgreSQL through pg8000 differs from the SQL layer's portable defaults.

The engine is Postgres, so the dialect says what the server does (row locks,
``SKIP LOCKED``, ``UPDATE ... FROM ... RETURNING``, advisory locks); the client
library is pg8000, so it also says what pg8000 does: ``%s`` placeholders, a
transaction opened by the library before the first statement, errors whose
SQLSTATE is in ``args[0]["C"]`` (which :func:`cairnflow.sql.default_classifier`
reads) and network failures raised as ``InterfaceError`` without one (which it
cannot know, so :meth:`Pg8000Dialect.classify` adds them).

What is left at the layer's default, on purpose: no pipelining (pg8000 sends
one statement at a time), no savepoint or application connection (this driver
does not declare ``TRANSACTIONAL_ENQUEUE``), no notification, no clock.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import pg8000.dbapi

from cairnflow.sql import ClaimedRow, ClaimPlan, Cursor, Dialect, ErrorClass, default_classifier

__all__ = ["Pg8000Dialect", "advisory_key", "classify"]


def classify(error: BaseException) -> ErrorClass:
    """The layer's classifier, plus pg8000's network errors (no SQLSTATE: the session is gone)."""
    if isinstance(error, pg8000.dbapi.InterfaceError):
        return ErrorClass(unavailable=True)
    return default_classifier(error)


def advisory_key(namespace: str) -> int:
    """A signed 64-bit advisory lock key for ``namespace``."""
    digest = hashlib.sha256(f"cairnflow-pg8000:migrate:{namespace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Pg8000Dialect(Dialect):
    """PostgreSQL 12 and newer, through pg8000's DB-API module."""

    name = "pg8000"
    paramstyle = "format"  # pg8000.dbapi.paramstyle: %s, with %% for a literal %
    quote_char = '"'
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    # A batch of outcomes reads its steps joined to their runs and locks only the run rows,
    # in id order, in one statement.
    lock_runs_joined = " FOR UPDATE OF r"
    # One UPDATE for a batch of successes: every statement is a round trip to the server.
    batch_statements = True

    def classify(self, error: BaseException) -> ErrorClass:
        """Sort an error (see :func:`classify`)."""
        return classify(error)

    def claim(self, cursor: Cursor, plan: ClaimPlan) -> list[ClaimedRow]:
        """One ``UPDATE ... FROM runs ... RETURNING``: the steps and their runs' columns."""
        sql, params = plan.update_returning_runs
        cursor.execute(self.sql(sql), params)
        return [tuple(row) for row in cursor.fetchall()]

    @contextlib.contextmanager
    def migration_lock(self, cursor: Cursor, key: str) -> Iterator[None]:
        """A session-level advisory lock on the namespace, for the whole migration.

        It must be committed as soon as it is taken: the SQL layer then runs
        each migration file in its own transaction on this connection, and a
        session lock outlives their commits. ``COMMIT`` and ``ROLLBACK`` are
        sent as statements (pg8000 follows the server's transaction status, and
        ``cursor.connection`` is a DB-API extension it warns about). A release
        that fails raises: the pool then discards the connection rather than
        lend a session that may still hold the lock.
        """
        lock = advisory_key(key)
        cursor.execute("SELECT pg_advisory_lock(%s)", (lock,))
        cursor.execute("COMMIT")
        try:
            yield
        finally:
            cursor.execute("ROLLBACK")
            cursor.execute("SELECT pg_advisory_unlock(%s)", (lock,))
            cursor.execute("COMMIT")
