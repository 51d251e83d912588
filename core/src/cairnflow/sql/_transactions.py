"""The transaction runner: every SPI operation is one transaction, run here.

A transaction that loses a lock race (a deadlock, a busy database) is not an
error the engine should see: :meth:`Transactions.run` runs the whole of it
again, with a short random backoff, up to ``attempts`` times. A connection
lost before COMMIT was sent rolled the work back, so that is retried too; a
connection lost *during* COMMIT leaves the outcome unknown, and is reported
as :class:`cairnflow.Unavailable` rather than guessed at. Every database error
is sorted by the store's :data:`~cairnflow.sql.ErrorClassifier`, here and only
here: a unique index refusing a write becomes :class:`UniqueViolation` (the
enqueue turns it into :class:`~cairnflow.DuplicateRun`), an outage becomes
:class:`~cairnflow.Unavailable` (:func:`unavailable`, the one wording of it),
and a value the database refuses for what it is becomes
:class:`~cairnflow.ValueRefused` (:func:`refused`), never retried. A statement
larger than the server takes is refused before it is sent
(:func:`~cairnflow.sql._limits.check_statement`, in :meth:`Transactions.execute`
and :meth:`Transactions.execute_many`, which every statement carrying a value
goes through).

The application's own transaction (``enqueue_tx``) is never retried, committed
or rolled back here (:meth:`Transactions.in_application`): that is the
application's to do. What its error left for the dialect to repair (MariaDB's
broken cached trigger) is repaired on a connection of the store's own, in the
background, once the application's transaction lets it
(:meth:`Transactions.application_error`).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .. import _faults
from .._errors import CairnError, Unavailable, ValueRefused
from ._dialect import BatchInsert, Commit, Connections, Cursor, Dialect
from ._errors import ErrorClassifier
from ._limits import check_statement, fitting_rows

__all__ = [
    "CountingCursor",
    "Rollback",
    "StoreStats",
    "Transactions",
    "UniqueViolation",
    "close_quietly",
    "refused",
    "rollback_quietly",
    "unavailable",
]

T = TypeVar("T")
log = logging.getLogger("cairnflow.sql")


class StoreStats:
    """Counts of what a SQL store sent to its database (for benchmarks and tuning), and
    of the enqueues it found had landed before."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.transactions = 0
        self.statements = 0
        self.retries = 0
        self.landed = 0
        """Enqueues that found their runs written already: a client's retry of a write
        whose commit outcome it never learned, which had landed."""

    def count(
        self, *, transactions: int = 0, statements: int = 0, retries: int = 0, landed: int = 0
    ) -> None:
        """Add to the counters."""
        with self._lock:
            self.transactions += transactions
            self.statements += statements
            self.retries += retries
            self.landed += landed

    def snapshot(self) -> dict[str, int]:
        """The counters now."""
        with self._lock:
            return {
                "transactions": self.transactions,
                "statements": self.statements,
                "retries": self.retries,
                "landed": self.landed,
            }


class UniqueViolation(Exception):
    """A unique index refused a write (raised inside the SQL layer only)."""


class Rollback(Exception):
    """Raised by a transaction's work to end it writing nothing, though no error occurred.

    The runner rolls back and raises it again as it is: never sorted, never retried
    (a compare-and-swap that did not apply: a tick another node recorded first).
    """


def unavailable(driver: str, error: BaseException) -> Unavailable:
    """The :class:`~cairnflow.Unavailable` a store raises for ``error`` (raise it ``from`` it)."""
    return Unavailable(f"{driver} store is unavailable: {error}")


def refused(driver: str, error: BaseException) -> ValueRefused:
    """The :class:`~cairnflow.ValueRefused` a store raises for ``error`` (raise it ``from`` it)."""
    return ValueRefused(f"{driver} store refused a value: {type(error).__name__}: {error}")


class _Commit:
    """The :class:`~cairnflow.sql.Commit` of one attempt of :meth:`Transactions.committing`."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.committing = False
        """A COMMIT was sent, or is on its way: a lost connection leaves the outcome unknown."""
        self.committed = False
        """The work committed (the runner does not)."""
        self.ended = False
        """The work's own COMMIT ended the transaction and nothing was sent after it
        (:meth:`sent`): the runner sends nothing, not even the ``commit()`` that closes a
        read made after an early COMMIT."""

    def __call__(self) -> None:
        self.committing = True
        self._conn.commit()  # after sending(): a no-op, the transaction is over
        self.committed = True

    def sending(self) -> None:
        self.committing = True

    def sent(self) -> None:
        self.committing = True
        self.committed = True
        self.ended = True


class CountingCursor:
    """A cursor that counts the statements a dialect runs on it."""

    def __init__(self, cursor: Cursor, stats: StoreStats) -> None:
        self._cursor = cursor
        self._stats = stats

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self._stats.count(statements=1)
        return self._cursor.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def rollback_quietly(conn: Any) -> None:
    """Roll ``conn`` back; a connection that cannot is already broken (the pool drops it)."""
    try:
        conn.rollback()
    except Exception:
        log.debug("rollback failed", exc_info=True)


def close_quietly(cursor: Any) -> None:
    """Close ``cursor``, ignoring a connection that broke."""
    try:
        cursor.close()
    except Exception:
        log.debug("closing a cursor failed", exc_info=True)


class Transactions:
    """Runs a store's transactions on ``connections``, and counts what they send in ``stats``.

    ``driver`` names the store in :class:`~cairnflow.Unavailable` messages.
    """

    def __init__(
        self,
        connections: Connections,
        dialect: Dialect,
        classify: ErrorClassifier,
        *,
        attempts: int,
        driver: str,
        stats: StoreStats,
    ) -> None:
        self.connections = connections
        self.dialect = dialect
        self.classify = classify
        self.attempts = attempts
        self.driver = driver
        self.stats = stats
        self._repairing = threading.Lock()
        """Held by the thread of :meth:`recover_later` while its repair runs."""

    def execute(self, cursor: Cursor, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one portable statement on ``cursor``; return the cursor, to read it.

        A statement larger than the server takes is refused before it is sent.
        """
        dialect = self.dialect
        text, values = dialect.sql(sql), tuple(params)
        check_statement(dialect, cursor, text, values)
        self.stats.count(statements=1)
        cursor.execute(text, values)
        return cursor

    def execute_many(self, cursor: Cursor, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """One statement for many rows (one round trip where the driver pipelines it).

        Every row is checked before any is sent, as the statement it makes alone: a
        driver sends the rows one statement each, or joins them into statements of a
        size it bounds (PyMySQL: about 1 MB, below any default packet limit, or one row
        alone where that is larger).
        """
        if not rows:
            return 0
        dialect = self.dialect
        text = dialect.sql(sql)
        values = [tuple(row) for row in rows]
        if dialect.statement_limit is not None:  # no call per row of a batch without a limit
            for row in values:
                check_statement(dialect, cursor, text, row)
        self.stats.count(statements=1)
        if len(values) == 1:
            cursor.execute(text, values[0])
        else:
            cursor.executemany(text, values)
        return int(cursor.rowcount)

    def insert_many(
        self, cursor: Cursor, insert: BatchInsert, rows: Sequence[Sequence[Any]]
    ) -> None:
        """Insert ``rows`` in the fewest statements the dialect makes (``batch_insert``).

        The rows are split into groups whose statements fit the statement limit
        (:func:`~cairnflow.sql._limits.fitting_rows`); a row too large for any group
        is checked alone, as its one-row statement, before anything is sent. One
        row, or a dialect without :attr:`~Dialect.batch_inserts`: the one-row
        statement through :meth:`execute_many`.
        """
        dialect = self.dialect
        if len(rows) < 2 or not dialect.batch_inserts:
            self.execute_many(cursor, insert.single, rows)
            return
        per_row = 3 * len(insert.columns) + sum(len(v) + 2 for _, v in insert.constants) + 4
        groups = list(fitting_rows(dialect, insert, rows, text_per_row=per_row))
        single = dialect.sql(insert.single)
        for group, fits in groups:
            if not fits:
                check_statement(dialect, cursor, single, tuple(group[0]))
        for group, fits in groups:
            self.stats.count(statements=1)
            if fits and len(group) > 1:
                cursor.execute(*dialect.batch_insert(insert, group))
            else:
                cursor.execute(single, tuple(group[0]))

    def run(self, work: Callable[[Cursor], T], *, write: bool = True) -> T:
        """Run ``work(cursor)`` in one transaction, retrying it on retryable errors."""
        return self.committing(lambda cursor, _commit: work(cursor), write=write)

    def committing(
        self,
        work: Callable[[Cursor, Commit], T],
        *,
        write: bool = True,
        repeatable: bool = False,
    ) -> T:
        """Run ``work(cursor, commit)`` in one transaction, retrying it on retryable errors.

        ``work`` may call ``commit()`` itself, inside a pipeline, so the COMMIT
        travels with its last statements, or send a COMMIT of its own after
        ``commit.sending()`` (:meth:`Dialect.pipelined_transaction`); otherwise
        it is committed on return.

        A connection lost once the COMMIT was on its way leaves the outcome
        unknown: reported (:class:`~cairnflow.Unavailable`), not run again,
        unless ``repeatable`` says that running the work again is harmless even
        if it had committed (a claim: what a landed claim leased, nobody runs,
        and it is taken back after its lease).
        """
        for attempt in range(1, self.attempts + 1):
            self.stats.count(transactions=1, retries=1 if attempt > 1 else 0)
            with (
                self.dialect.transaction_scope(write=write),
                self.connections.connection() as conn,
            ):
                cursor = conn.cursor()
                commit = _Commit(conn)
                # The dialect's span ends after the COMMIT or the ROLLBACK (entered and
                # exited by hand: an ExitStack was 1% of a one-run enqueue's instructions).
                span: contextlib.AbstractContextManager[None] | None = None
                try:
                    transaction = self.dialect.transaction(cursor, write=write)
                    transaction.__enter__()
                    span = transaction
                    result = work(cursor, commit)
                    if not commit.committed:
                        commit()
                    elif not commit.ended:
                        # Reads after an early COMMIT (immutable rows: a claim's inputs)
                        # may have opened a transaction of their own: end it.
                        conn.commit()
                    if write and _faults.plan is not None:
                        _faults.fire(_faults.SQL_AFTER_COMMIT)  # raise: COMMIT's reply lost
                    return result
                except (CairnError, Rollback):
                    rollback_quietly(conn)
                    raise
                except Exception as error:
                    rollback_quietly(conn)
                    kind = self.classify(error)
                    if kind.unique_violation:
                        raise UniqueViolation(str(error)) from error
                    if kind.refused:  # the same values would be refused again
                        raise refused(self.driver, error) from error
                    # A lost connection before COMMIT was sent rolled the work back:
                    # safe to run again. During COMMIT the outcome is unknown: report it.
                    again = kind.retryable or (
                        kind.unavailable and (repeatable or not commit.committing)
                    )
                    if again and attempt < self.attempts:
                        if kind.retryable:
                            self.dialect.recover(cursor, error)
                        time.sleep(random.uniform(0.002, 0.02) * attempt)
                        continue
                    if kind.unavailable:
                        raise unavailable(self.driver, error) from error
                    raise
                finally:
                    if span is not None:
                        span.__exit__(None, None, None)
                    close_quietly(cursor)
        raise AssertionError("unreachable")  # pragma: no cover

    def upsert(self, work: Callable[[Cursor], T]) -> T:
        """:meth:`run` ``work``, which inserts a row it did not find; once more if refused.

        Two callers that find no row both insert it, and the unique index refuses
        the second: the row is there now, so the second run finds it, and updates
        or reads it like any caller that came later.
        """
        try:
            return self.run(work)
        except UniqueViolation:
            return self.run(work)

    def in_application(self, conn: Any, work: Callable[[Cursor], T]) -> T:
        """Run ``work(cursor)`` on the application's connection ``conn``, in its transaction.

        Nothing is retried, committed or rolled back: the transaction is the
        application's. Errors are sorted as in :meth:`committing`.
        """
        cursor = conn.cursor()
        try:
            return work(cursor)
        except CairnError:
            raise
        except Exception as error:
            sorted_error = self.application_error(error)
            if sorted_error is error:
                raise
            raise sorted_error from error
        finally:
            close_quietly(cursor)

    def application_error(self, error: Exception) -> Exception:
        """What to raise for ``error`` from the application's transaction (raise it ``from``
        ``error`` unless it is ``error`` itself): sorted as in :meth:`committing`, never
        retried. The async ``enqueue_tx`` sorts its driver's errors here too.

        A retryable error the dialect repairs (:meth:`Dialect.recovers`) is still the
        application's to retry, but a retry alone would meet it again: the repair
        starts here, in the background (:meth:`recover_later`)."""
        kind = self.classify(error)
        if kind.retryable and self.dialect.recovers(error):
            self.recover_later(error)
        if kind.unique_violation:
            return UniqueViolation(str(error))
        if kind.refused:
            return refused(self.driver, error)
        if kind.unavailable:
            return unavailable(self.driver, error)
        return error

    def recover_later(self, error: BaseException) -> threading.Thread | None:
        """Run :meth:`Dialect.recover` for ``error`` on a connection of the store's own, in a
        thread; return it (None: a repair is already under way, and covers this error, or no
        thread could be started).

        Not on the application's connection: its transaction is the application's, and
        a repair may end a transaction (MariaDB's ``FLUSH TABLES`` commits). The repair
        may wait for that transaction (the flush waits for every statement using its
        tables), so it never runs in the caller's thread. What it raises is logged.
        """
        if not self._repairing.acquire(blocking=False):
            return None

        def repair() -> None:
            try:
                with self.connections.connection() as conn:
                    cursor = conn.cursor()
                    try:
                        self.dialect.recover(cursor, error)
                    finally:
                        close_quietly(cursor)
                        rollback_quietly(conn)
            except Exception:
                log.exception("the repair after an error in an application's transaction failed")
            finally:
                self._repairing.release()

        thread = threading.Thread(target=repair, name="cairnflow-recover", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread (interpreter shutdown, no resources)
            # Free the flag, so a later error can start the repair; the caller's own error
            # is what it reports, not this one.
            self._repairing.release()
            log.warning("the repair after an error could not start", exc_info=True)
            return None
        return thread

    def read(self, work: Callable[[Cursor], T]) -> T:
        """Run ``work(cursor)`` in one read-only transaction."""
        return self.run(work, write=False)

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one SELECT in its own read transaction."""

        def work(cur: Cursor) -> list[tuple[Any, ...]]:
            return list(self.execute(cur, sql, params).fetchall())

        return self.read(work)

    def change(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one write statement in its own transaction; return the rows it changed."""

        def work(cur: Cursor) -> int:
            return int(self.execute(cur, sql, params).rowcount)

        return self.run(work)
