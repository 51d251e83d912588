"""Sorting PyMySQL's errors: duplicate keys, deadlocks, lost connections, refused values.

PyMySQL raises the server's error number as ``exc.args[0]``; since PyMySQL
1.1 the exception also carries the server's SQLSTATE in ``exc.sqlstate``
(``'23000'`` for a duplicate key, ``'HY000'`` for a lock wait timeout).
Those are MySQL SQLSTATEs, not PostgreSQL ones, so the error number decides
here, before the shared :func:`~cairnflow.sql.default_classifier` (which reads
``sqlstate`` the Postgres way) sees the error.
"""

from __future__ import annotations

import re

from pymysql import err

from cairnflow.sql import ErrorClass, default_classifier

__all__ = [
    "PACKET_TOO_LARGE",
    "REFUSED",
    "RETRYABLE",
    "UNAVAILABLE",
    "UNIQUE",
    "broken_trigger",
    "classify_mysql_error",
    "error_code",
]

UNIQUE = frozenset(
    {
        1062,  # ER_DUP_ENTRY: Duplicate entry 'x' for key 'y'
        1586,  # ER_DUP_ENTRY_WITH_KEY_NAME
    }
)
RETRYABLE = frozenset(
    {
        1205,  # ER_LOCK_WAIT_TIMEOUT (only the statement was rolled back: we roll back the rest)
        1213,  # ER_LOCK_DEADLOCK (InnoDB rolled the whole transaction back)
        1020,  # ER_CHECKREAD: MariaDB's "Record has changed since last read" (snapshot isolation)
        1412,  # ER_TABLE_DEF_CHANGED: "Table definition has changed, please retry transaction"
    }
)
UNAVAILABLE = frozenset(
    {
        1040,  # ER_CON_COUNT_ERROR: too many connections
        1053,  # ER_SERVER_SHUTDOWN
        1152,  # ER_ABORTING_CONNECTION
        1927,  # ER_CONNECTION_KILLED (MariaDB: this connection was killed)
        2002,  # CR_CONNECTION_ERROR (socket)
        2003,  # CR_CONN_HOST_ERROR
        2005,  # CR_UNKNOWN_HOST (a name that does not resolve, e.g. during a failover)
        2006,  # CR_SERVER_GONE_ERROR
        2013,  # CR_SERVER_LOST
        2055,  # CR_SERVER_LOST_EXTENDED
        3032,  # ER_SERVER_OFFLINE_MODE (MySQL)
        4031,  # ER_CLIENT_INTERACTION_TIMEOUT (MySQL: disconnected after wait_timeout)
    }
)

PACKET_TOO_LARGE = 1153
"""ER_NET_PACKET_TOO_LARGE: a statement over ``max_allowed_packet``; the server closes the
connection after it. The store refuses such a statement before sending it
(:class:`~cairnflow.sql.StatementLimit`), so this is seen only if the setting shrank since."""
REFUSED = frozenset(
    {
        PACKET_TOO_LARGE,
        1264,  # ER_WARN_DATA_OUT_OF_RANGE: out of the column's range (strict mode)
        1301,  # ER_WARN_ALLOWED_PACKET_OVERFLOWED: a function's result over max_allowed_packet
        1366,  # ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: "Incorrect string value"
        1406,  # ER_DATA_TOO_LONG: "Data too long for column" (strict mode)
    }
)
"""The server refused a value for what it is: the same values would be refused again."""

PARSE_ERROR = 1064
"""ER_PARSE_ERROR, also what a table whose trigger did not parse when it was opened reports."""
_BROKEN_TRIGGER = re.compile(r"(Unknown trigger|Trigger '.*?') has an error in its body", re.S)


def broken_trigger(error: BaseException) -> bool:
    """True for a statement refused because its table's cached copy holds an unparsed trigger.

    The server parses a table's triggers each time it opens the table into its
    table cache. A connection killed during that parse (MariaDB 10.11 does it
    within a tenth of a millisecond of a ``KILL``) leaves the copy in the cache
    with the trigger marked unparseable, and every later statement that opens
    that copy is refused with ``ER_PARSE_ERROR`` and this message, until the
    copy leaves the cache. The trigger itself is intact: a retry after
    ``FLUSH TABLES`` of the table succeeds (:meth:`MySQLDialect.recover`).
    """
    return (
        isinstance(error, err.MySQLError)
        and error_code(error) == PARSE_ERROR
        and _BROKEN_TRIGGER.match(str(error.args[1]) if len(error.args) > 1 else "") is not None
    )


_LOST_PROTOCOL = ("packet sequence number wrong", "invalid connection", "connection is closed")


def error_code(error: BaseException) -> int | None:
    """The MySQL error number PyMySQL put in ``error.args[0]``, if any."""
    args = getattr(error, "args", ())
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        return args[0]
    return None


def classify_mysql_error(error: BaseException) -> ErrorClass:
    """Sort an exception raised through PyMySQL (others go to the shared classifier).

    Unique violation: 1062 (and 1586). Retryable: 1213 (deadlock), 1205 (lock
    wait timeout), 1020, 1412, and a table whose cached copy holds a trigger a
    killed connection left unparsed (:func:`broken_trigger`). Unavailable:
    every ``InterfaceError`` (PyMySQL's "the connection is closed"), lost or
    refused connections (2002, 2003, 2006, 2013, 2055, ...), a killed
    connection (1927), a server shutting down (1053), too many connections
    (1040), and a protocol out of step after a connection died mid-packet.
    Refused: a value the server will not store (:data:`REFUSED`).
    """
    if not isinstance(error, err.MySQLError):
        return default_classifier(error)
    code = error_code(error)
    if code in UNIQUE:
        return ErrorClass(unique_violation=True)
    if code in RETRYABLE or broken_trigger(error):
        return ErrorClass(retryable=True)
    if code in UNAVAILABLE or isinstance(error, err.InterfaceError):
        return ErrorClass(unavailable=True)
    if code in REFUSED:
        return ErrorClass(refused=True)
    text = str(error).lower()
    if isinstance(error, err.InternalError | err.OperationalError) and any(
        marker in text for marker in _LOST_PROTOCOL
    ):
        return ErrorClass(unavailable=True)
    return ErrorClass()
