"""Sorting database errors: who won a race, what to retry, what is an outage, what is refused.

The SQL layer's correctness guards are unique indexes (an idempotency key held
twice) and some transactions lose lock races, so every database error is
sorted by an :data:`ErrorClassifier` into an :class:`ErrorClass`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ErrorClass", "ErrorClassifier", "default_classifier"]


@dataclass(frozen=True, slots=True)
class ErrorClass:
    """What an error means to the SQL layer. The zero value, "neither", is the safe answer.

    ``unique_violation``: a unique constraint refused the write ("someone else
    won the race"). ``retryable``: a deadlock, serialization failure or busy
    database; the whole transaction runs again. ``unavailable``: the server
    cannot be reached; raised as :class:`cairnflow.Unavailable`. ``refused``:
    the database or its driver refused a value for what it is (too large, out
    of its column's range, text it cannot encode); raised as
    :class:`cairnflow.ValueRefused` with the database's reason, never retried:
    the same values would be refused again.
    """

    unique_violation: bool = False
    retryable: bool = False
    unavailable: bool = False
    refused: bool = False


ErrorClassifier = Callable[[BaseException], ErrorClass]
"""Sorts an exception raised by a DB-API driver. Custom classifiers usually
check their own error forms and fall back to :func:`default_classifier`."""

NEITHER = ErrorClass()
REFUSED = ErrorClass(refused=True)

# PostgreSQL SQLSTATEs (psycopg puts them on ``exc.sqlstate``).
_PG_UNIQUE = frozenset({"23505"})
_PG_RETRYABLE = frozenset({"40001", "40P01", "55P03"})
_PG_UNAVAILABLE_EXACT = frozenset({"57P01", "57P02", "57P03"})
_PG_REFUSED_CLASSES = ("22", "54")
"""data_exception (a value out of range, an invalid byte sequence, ``\\u0000`` in text) and
program_limit_exceeded (a value too large for its type)."""

# MySQL / MariaDB error codes (PyMySQL puts them in ``exc.args[0]``).
_MY_UNIQUE = frozenset({1062})
_MY_RETRYABLE = frozenset({1205, 1213})
_MY_UNAVAILABLE = frozenset({1040, 1053, 1927, 2002, 2003, 2006, 2013, 2055, 4031})
_MY_REFUSED = frozenset({1153, 1264, 1301, 1366, 1406})


def _sqlite(exc: sqlite3.Error) -> ErrorClass:
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE constraint failed" in text:
        return ErrorClass(unique_violation=True)
    if isinstance(exc, sqlite3.DataError):  # SQLITE_TOOBIG: "string or blob too big"
        return REFUSED
    code = getattr(exc, "sqlite_errorname", "") or ""
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text:
        return ErrorClass(retryable=True)
    if "database table is locked" in text:
        return ErrorClass(retryable=True)
    return NEITHER


def _pymysql(exc: BaseException) -> ErrorClass:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if code in _MY_UNIQUE:
        return ErrorClass(unique_violation=True)
    if code in _MY_RETRYABLE:
        return ErrorClass(retryable=True)
    if code in _MY_UNAVAILABLE or type(exc).__name__ == "InterfaceError":
        return ErrorClass(unavailable=True)
    if code in _MY_REFUSED:
        return REFUSED
    return NEITHER


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE a DB-API driver put on ``exc``, wherever it keeps it.

    psycopg 3 (``exc.sqlstate``), psycopg2 (``exc.pgcode``), pg8000 and other
    drivers that pass the server's error fields as a dict (``exc.args[0]["C"]``).
    """
    for attribute in ("sqlstate", "pgcode"):
        value = getattr(exc, attribute, None)
        if isinstance(value, str) and value:
            return value
    if exc.args and isinstance(exc.args[0], dict):
        code = exc.args[0].get("C")
        if isinstance(code, str) and code:
            return code
    return None


def default_classifier(exc: BaseException) -> ErrorClass:
    """Knows the errors of sqlite3, PyMySQL (by error number) and every Postgres driver
    that exposes the SQLSTATE (psycopg 3, psycopg2, pg8000: see :func:`_sqlstate`).

    It recognises the drivers by the shape of their exceptions, so the core
    imports none of them. Connection errors of any driver (``OSError``,
    ``ConnectionError``) are unavailable. A value a driver cannot send is
    refused (``OverflowError``: an integer too large for a 64-bit column;
    ``UnicodeEncodeError``: text it cannot encode), and so is one the database
    refuses: sqlite3's ``DataError`` (a string or blob too big), SQLSTATE
    classes 22 and 54, and MySQL's 1153 and 1301 (over ``max_allowed_packet``),
    1264 (out of range), 1366 (an incorrect string value) and 1406 (data too
    long). A driver whose errors carry neither gives the store its own
    classifier (``error_classifier=``), falling back to this one.
    """
    if isinstance(exc, OverflowError | UnicodeEncodeError):
        return REFUSED
    if isinstance(exc, sqlite3.Error):
        return _sqlite(exc)
    module = type(exc).__module__
    if module.startswith("pymysql"):
        # Before the SQLSTATE: PyMySQL >= 1.1 sets exc.sqlstate too, but to MySQL's states
        # ('23000' for a duplicate key, 'HY000' for a lock wait timeout), not Postgres's.
        return _pymysql(exc)
    sqlstate = _sqlstate(exc)
    if isinstance(sqlstate, str):
        if sqlstate in _PG_UNIQUE:
            return ErrorClass(unique_violation=True)
        if sqlstate in _PG_RETRYABLE:
            return ErrorClass(retryable=True)
        if sqlstate.startswith("08") or sqlstate in _PG_UNAVAILABLE_EXACT:
            return ErrorClass(unavailable=True)
        if sqlstate.startswith(_PG_REFUSED_CLASSES):
            return REFUSED
        return NEITHER
    if module.startswith("psycopg") and type(exc).__name__ == "OperationalError":
        # psycopg raises OperationalError without a SQLSTATE for a lost connection.
        return ErrorClass(unavailable=True)
    if isinstance(exc, ConnectionError | TimeoutError) or (
        isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError | PermissionError)
    ):
        return ErrorClass(unavailable=True)
    return NEITHER
