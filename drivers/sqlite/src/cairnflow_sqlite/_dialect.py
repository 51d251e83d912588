"""How SQLite differs: one writer, so no row locks and no SKIP LOCKED.

Every write transaction begins with ``BEGIN IMMEDIATE``: it takes the write
lock up front, waiting on ``busy_timeout``. A deferred transaction that
upgrades to a write gets SQLITE_BUSY at once, ignoring the timeout, which is
why it is never used for writes. A claim is then one conditional UPDATE.
"""

from __future__ import annotations

import sqlite3

from cairnflow.sql import Cursor, Dialect

__all__ = ["SQLiteDialect"]


class SQLiteDialect(Dialect):
    """SQLite 3.35+ (``UPDATE ... RETURNING``)."""

    name = "sqlite"
    paramstyle = "qmark"
    for_update = ""
    skip_locked = ""

    def begin(self, cursor: Cursor, *, write: bool) -> None:
        """``BEGIN IMMEDIATE`` for writes (the write lock up front), ``BEGIN`` for reads."""
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def begin_migration(self, cursor: Cursor) -> None:
        """Each migration file runs inside ``BEGIN IMMEDIATE``: migrators queue up on the file."""
        cursor.execute("BEGIN IMMEDIATE")

    def server_version(self, cursor: Cursor) -> str | None:
        """``SQLite 3.x.y``."""
        return f"SQLite {sqlite3.sqlite_version}"
