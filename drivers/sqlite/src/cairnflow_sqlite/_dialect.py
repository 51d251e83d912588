"""How SQLite differs: one writer, so no row locks and no SKIP LOCKED.

Every write transaction begins with ``BEGIN IMMEDIATE``: it takes the write
lock up front, waiting on ``busy_timeout``. A deferred transaction that
upgrades to a write gets SQLITE_BUSY at once, ignoring the timeout, which is
why it is never used for writes. A claim is then one conditional UPDATE.

Within one process, writers of a file also queue on a Python lock before
``BEGIN IMMEDIATE``: SQLite's busy handler waits by sleeping (1, 2, 5, 10 ms
...), so threads of one process contending through it spend most of their
time asleep. The lock hands the write over at once; ``BEGIN IMMEDIATE`` then
only ever waits for other processes.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from cairnflow import CairnError
from cairnflow.sql import Cursor, Dialect

from ._lifecycle import switch_statements

__all__ = ["SQLiteDialect"]


_WRITERS: dict[str, threading.Lock] = {}
_WRITERS_GUARD = threading.Lock()


def _writer_lock(path: str) -> threading.Lock:
    with _WRITERS_GUARD:
        return _WRITERS.setdefault(path, threading.Lock())


class SQLiteDialect(Dialect):
    """SQLite 3.35+ (``UPDATE ... RETURNING``) for the database file ``path``."""

    name = "sqlite"
    paramstyle = "qmark"
    for_update = ""
    skip_locked = ""
    lock_runs_joined = ""  # one writer: reading is enough
    greatest = "max"
    least = "min"
    limit_expressions = True
    gate_in_queue_key = True
    # 'now' is fixed for the whole statement, so the seconds and the milliseconds agree.
    now_sql = (
        "SELECT CAST(strftime('%s', 'now') AS INTEGER) * 1000000000"
        " + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER) * 1000000"
    )

    def __init__(self, path: str | None = None) -> None:
        # One lock per file and process (None: a private in-memory database).
        self._writer = _writer_lock(path) if path is not None else threading.Lock()

    def transaction_scope(self, *, write: bool) -> contextlib.AbstractContextManager[object]:
        """Write transactions of this process take turns on the file's writer lock."""
        return self._writer if write else contextlib.nullcontext()

    def begin(self, cursor: Cursor, *, write: bool) -> None:
        """``BEGIN IMMEDIATE`` for writes (the write lock up front), ``BEGIN`` for reads."""
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    switches_lifecycle = True  # the lifecycle triggers exist only while subscribed (._lifecycle)

    def switch_lifecycle(
        self, cursor: Cursor, tables: Mapping[str, str], channels: Collection[str]
    ) -> None:
        """Create the lifecycle triggers ``channels`` want, drop the others (``._lifecycle``)."""
        for statement in switch_statements(tables, channels):
            cursor.execute(statement)

    def begin_migration(self, cursor: Cursor) -> None:
        """Each migration file runs inside ``BEGIN IMMEDIATE``: migrators queue up on the file."""
        cursor.execute("BEGIN IMMEDIATE")

    def application_connection(self, tx: Any) -> sqlite3.Connection:
        """The application's ``sqlite3`` connection, if the runs can be written atomically on it.

        Refused: another object, and a connection in autocommit mode
        (``isolation_level=None``, or Python 3.12's ``autocommit=True``) with no
        transaction open, where each INSERT would commit on its own (SQLAlchemy's
        ``isolation_level="AUTOCOMMIT"``, a bare ``sqlite3.connect(...,
        isolation_level=None)`` before its ``BEGIN``).
        """
        if not isinstance(tx, sqlite3.Connection):
            raise TypeError(
                "enqueue_tx() on SQLiteStore takes the application's sqlite3.Connection, "
                f"got {type(tx).__qualname__}"
            )
        autocommit = tx.isolation_level is None or getattr(tx, "autocommit", None) is True
        if autocommit and not tx.in_transaction:
            raise CairnError(
                "enqueue_tx() needs the application's transaction, but this sqlite3 connection "
                "is in autocommit mode with none open: each INSERT would commit on its own; "
                "execute BEGIN first (or use the default isolation_level)"
            )
        return tx

    @contextlib.contextmanager
    def savepoint(self, cursor: Cursor) -> Iterator[None]:
        """No savepoint: the runs are written straight into the application's transaction.

        Python's ``sqlite3`` (in its default mode) opens the application's
        transaction only before its first INSERT, UPDATE or DELETE. A
        ``SAVEPOINT`` sent before that would open a transaction of its own, and
        its ``RELEASE`` would commit it, with whatever the application wrote:
        the enqueue would no longer roll back with the application.
        """
        yield
