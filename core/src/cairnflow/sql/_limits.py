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

A batch insert (:meth:`~cairnflow.sql.Dialect.batch_insert`: a multi-row
``VALUES``, or arrays of values) carries many rows in one statement: its rows
are split into groups that pass by that same count, every byte of every value
at the expansion (:func:`fitting_rows`), so a group's statement needs no
measuring. A row that fits no group is checked alone, as its one-row
statement, before anything is sent: refused here as it always was.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

from .._errors import PayloadTooLarge
from ._dialect import BatchInsert, Cursor, Dialect

__all__ = ["check_statement", "fitting_rows"]

_SIZED = (bytes, bytearray, str)
"""The values counted by their length (the others, numbers and NULL, by :data:`_QUOTING`)."""

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
    # Called for every statement that carries a value: the lengths in one comprehension.
    # A union of types and a max() per value were 9% of a one-run enqueue's instructions
    # on Postgres (628,000 -> 571,000 a call, callgrind, 2026-12-04, #20).
    lengths = [len(value) for value in params if isinstance(value, _SIZED)]
    if (len(sql) + sum(lengths)) * limit.expansion + _QUOTING * len(params) <= limit.size:
        return
    largest = max(lengths, default=0)
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


def fitting_rows(
    dialect: Dialect, insert: BatchInsert, rows: Sequence[Sequence[Any]], *, text_per_row: int
) -> Iterator[tuple[Sequence[Sequence[Any]], bool]]:
    """``rows`` in consecutive groups, each with whether its statement surely fits the limit.

    A row counts as :func:`check_statement` counts a statement's values (each
    character or byte at the limit's expansion, plus quoting per value), plus
    ``text_per_row`` characters of SQL text (a row's ``(?, ?, ...)``); 4,096
    characters more are kept for the statement's head. A group closes before
    the row that would overflow it. A row that does not fit alone is a group
    alone, marked as not surely fitting: check it with :func:`check_statement`.
    Without a limit every row is in one group. The whole batch is counted
    column by column first (``sum`` of ``len`` over the text and bytes columns,
    no loop in Python): a batch that fits, the usual case, is one group at once.
    """
    limit = dialect.statement_limit
    if limit is None:
        yield rows, True
        return
    budget = limit.size - 4096 * limit.expansion
    sized = [i for i, kind in enumerate(insert.types) if kind != "int"]
    quoting = _QUOTING * len(insert.columns) + text_per_row * limit.expansion
    total = sum(sum(map(len, filter(None, map(itemgetter(i), rows)))) for i in sized)
    if total * limit.expansion + quoting * len(rows) <= budget:
        yield rows, True
        return
    start, used = 0, 0
    for index, row in enumerate(rows):
        cost = sum(len(row[i]) for i in sized if row[i] is not None) * limit.expansion + quoting
        if cost > budget:  # too large alone: a group of its own, to check
            if index > start:
                yield rows[start:index], True
            yield rows[index : index + 1], False
            start, used = index + 1, 0
            continue
        if used + cost > budget:
            yield rows[start:index], True
            start, used = index, 0
        used += cost
    if start < len(rows):
        yield rows[start:], True
