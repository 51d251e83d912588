"""Creating runs in the application's *async* transaction (an awaited ``enqueue_tx``).

An async driver (``psycopg.AsyncConnection``) needs every statement awaited, so
the synchronous :class:`~cairnflow.sql._enqueue.Enqueue` cannot run on it. Its
statements are not written a second time here: :meth:`Enqueue.prepare` builds
the rows and :meth:`Enqueue.insert` "sends" them to a :class:`StatementRecorder`,
which keeps each statement (text in the dialect's paramstyle, parameters,
checked against the statement limit like any other) instead of running it.
The recorded statements are then awaited on the application's connection, in a
savepoint, by the dialect (:meth:`Dialect.send_in_savepoint`). So one enqueue
writes the same rows, through the same statements, sync or async; everything
that can refuse an enqueue (a key given twice, a payload too large) refuses it
before anything is sent.

The enqueue's inserts only write (nothing read back), which is what makes
recording them possible. After a unique index refused them, finding the run
that holds the key reads through the store's own connections: that read runs
in a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .._errors import CairnError
from ..store import NewRun
from ._dialect import Recorded
from ._enqueue import Enqueue
from ._parts import Context, Part
from ._transactions import UniqueViolation

__all__ = ["AsyncEnqueue", "StatementRecorder"]


class StatementRecorder:
    """A cursor that keeps the statements it is given instead of sending them."""

    rowcount = -1
    """Nothing was run: no row count (what DB-API says for "not known")."""

    def __init__(self) -> None:
        self.statements: list[Recorded] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> StatementRecorder:
        self.statements.append(Recorded(sql, tuple(params), many=False))
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.statements.append(Recorded(sql, list(rows), many=True))


class AsyncEnqueue(Part):
    """``create_runs_in_async``: :class:`Enqueue`'s statements, awaited on the app's connection."""

    def __init__(self, context: Context, enqueue: Enqueue) -> None:
        super().__init__(context)
        self._enqueue = enqueue

    async def create_runs_in(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """Insert ``runs`` in the application's open async transaction ``tx`` (never committed)."""
        if not runs:
            return []
        enqueue, dialect, context = self._enqueue, self._dialect, self.context
        rows = enqueue.prepare(runs)
        conn = dialect.async_application_connection(tx)
        recorder = StatementRecorder()
        run_ids = enqueue.insert(recorder, rows)
        if context.notifier is not None:
            dialect.notify_in_transaction(recorder, context.channel)
        try:
            await dialect.send_in_savepoint(conn, recorder.statements)
        except CairnError:
            raise
        except Exception as error:
            sorted_error = self._tx.application_error(error)
            if isinstance(sorted_error, UniqueViolation):
                raise await asyncio.to_thread(enqueue.duplicate, runs) from None
            if sorted_error is error:
                raise
            raise sorted_error from error
        return run_ids
