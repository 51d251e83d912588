"""The one check of a statement's size before it is sent (:class:`~cairnflow.sql.StatementLimit`).

Every statement that carries a value goes out through
:meth:`~cairnflow.sql._transactions.Transactions.execute` or ``execute_many``,
which call :func:`check_statement` first: a statement the server would not take
is refused here with :class:`~cairnflow.PayloadTooLarge`, before a byte of it
is sent, so the transaction writes nothing and the connection stays usable.

What is compared is what is sent, not the value alone: a driver that writes
values into the SQL text (PyMySQL) escapes them, sends bytes as hex (twice
their length, PyMySQL 1.2) and carries the statement's other columns with
them. Measuring that exactly costs a copy of the statement, so a statement is
measured (:meth:`~cairnflow.sql.Dialect.statement_size`) only when it could be
too large: when its text and values, each byte counted at the most it can take
(:attr:`~cairnflow.sql.StatementLimit.expansion`), would not fit. Ordinary
statements pass on a sum of lengths. A value that is larger than the limit by
itself is refused without measuring (every byte of it takes at least a byte).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import PayloadTooLarge
from ._dialect import Cursor, Dialect

__all__ = ["check_statement"]

_QUOTING = 32
"""The most any one value adds as sent beyond its bytes times the expansion: quotes, a
prefix (``_binary``, ``X``), the digits of an integer, ``NULL``."""


def check_statement(dialect: Dialect, cursor: Cursor, sql: str, params: Sequence[Any]) -> None:
    """Refuse ``sql`` with ``params`` if it is larger than the dialect's statement limit.

    ``sql`` is in the dialect's paramstyle. Raises :class:`~cairnflow.PayloadTooLarge`
    naming the size, the limit and what sets it; returns at once without a limit.
    """
    limit = dialect.statement_limit
    if limit is None:
        return
    total = len(sql)
    largest = 0
    for value in params:
        if isinstance(value, bytes | bytearray | str):
            length = len(value)
            total += length
            largest = max(largest, length)
    if total * limit.expansion + _QUOTING * len(params) <= limit.size:
        return
    if largest > limit.size:
        raise PayloadTooLarge(
            largest, limit.size, "a value sent in one statement", limit_name=limit.setting
        )
    sent = dialect.statement_size(cursor, sql, params)
    if sent > limit.size:
        raise PayloadTooLarge(
            sent,
            limit.size,
            f"a statement carrying a value of {largest} bytes",
            limit_name=limit.setting,
        )
