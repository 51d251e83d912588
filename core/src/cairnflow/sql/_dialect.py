"""What differs between SQL engines, and nothing else.

:class:`~cairnflow.sql.SQLStore` is one DB-API 2.0 implementation of the Store
SPI written in portable SQL with ``?`` placeholders. A :class:`Dialect` says
how one engine differs: its placeholder style, identifier quoting, how a
transaction begins, how rows are locked, how a claim is made, which errors
mean what, how migrations are serialised across processes, and how runs are
written in the application's own transaction (which connections it accepts,
its savepoint, a notification sent at its commit), and how large a statement
its server takes (:class:`StatementLimit`). A third party
adds an engine (CockroachDB, DuckDB, ...) by writing a dialect, a way to get
connections and its migration files.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from ._errors import ErrorClass, default_classifier
from ._tables import Tables

__all__ = [
    "BatchInsert",
    "ClaimPlan",
    "ClaimedRow",
    "Commit",
    "Connections",
    "Cursor",
    "Dialect",
    "Recorded",
    "Statement",
    "StatementLimit",
    "values_rows",
]

log = logging.getLogger("cairnflow.sql")

Cursor = Any
"""A DB-API 2.0 cursor."""

ClaimedRow = tuple[Any, ...]
"""A row a claim returns, as the DB-API driver returned it: ``(id, run_id, name, kind,
attempt, failures, reclaims, parents)`` of a claimed step, followed by ``(run id, workflow,
queue, payload, labels)`` of its run when the claim returned them
(:attr:`ClaimPlan.update_returning_runs`). The store reads it as a
:class:`~cairnflow.sql.ClaimedStep`."""

Statement = tuple[str, tuple[Any, ...]]
"""Portable SQL (``?`` placeholders) and its parameters."""


class Recorded(NamedTuple):
    """One statement as the SQL layer would have sent it, kept to be sent on an async
    connection: its text in the dialect's paramstyle, and its parameters (a sequence of
    rows when ``many``: one ``executemany``)."""

    sql: str
    params: Sequence[Any]
    many: bool


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """One claim, as statements a dialect chooses from (all in portable SQL)."""

    update_returning: Statement
    """``UPDATE steps SET <claimed> WHERE id IN (SELECT ... <skip_locked>) RETURNING ...``."""
    update_returning_runs: Statement
    """The same, ``FROM runs`` and returning the runs' columns too (Postgres)."""
    select_ready: Statement
    """``SELECT id FROM steps WHERE <ready> ORDER BY ... LIMIT n <skip_locked>``."""
    mark_claimed: Callable[[Sequence[str]], Statement]
    """``UPDATE steps SET <claimed> WHERE id IN (ids) AND status = 'ready'``."""
    mark_claimed_returning_runs: Callable[[Sequence[str]], Statement]
    """The same, ``FROM runs`` and returning what ``claimed_rows_runs`` reads (Postgres)."""
    claimed_rows: Callable[[Sequence[str]], Statement]
    """``SELECT <claimed columns> FROM steps WHERE id IN (ids)``."""
    claimed_rows_runs: Callable[[Sequence[str]], Statement]
    """The same joined to the runs, with the runs' columns (what a claim returns)."""


@dataclass(frozen=True, slots=True)
class BatchInsert:
    """An ``INSERT`` of many rows into one table, for :meth:`Dialect.batch_insert` to send.

    A row gives a value for each of ``columns``, in order; ``constants`` are set
    to the same SQL literal in every row. ``single`` inserts one row (portable SQL,
    the columns then the constants in the order of its own column list): what the
    portable default sends through ``executemany``.
    """

    table: str
    """The table as it is written in SQL: qualified and quoted."""
    columns: tuple[str, ...]
    """The columns the rows give values for (plain identifiers, never quoted)."""
    types: tuple[Literal["text", "int", "bytes"], ...]
    """What each column holds: ``text``, ``int`` (64-bit) or ``bytes``; any may be NULL."""
    constants: tuple[tuple[str, str], ...]
    """``(column, SQL literal)``: what every row sets without a value of its own."""
    single: str
    """The one-row ``INSERT ... VALUES (?, ...)`` of the same rows."""


def values_rows(insert: BatchInsert, count: int) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...), (?, ...)`` for ``count`` rows (portable).

    A dialect whose driver sends one statement per row of ``executemany`` can send
    this instead, with the rows' values flattened in order (MySQL).
    """
    names = ", ".join([*insert.columns, *(column for column, _ in insert.constants)])
    row = "(" + ", ".join(["?"] * len(insert.columns) + [v for _, v in insert.constants]) + ")"
    return f"INSERT INTO {insert.table} ({names}) VALUES " + ", ".join([row] * count)


@dataclass(frozen=True, slots=True)
class StatementLimit:
    """The most bytes one statement may take as its driver sends it to the server.

    A server that drops the connection over a larger statement (MySQL's
    ``max_allowed_packet``, PostgreSQL's 1 GiB message limit) would otherwise
    be taken for an outage, and the write retried until its lease ran out. The
    SQL layer refuses such a statement before sending it, with
    :class:`~cairnflow.PayloadTooLarge` naming ``setting``
    (:func:`~cairnflow.sql._limits.check_statement`).
    """

    size: int
    """The most bytes one statement may take, as :meth:`Dialect.statement_size` counts them."""
    setting: str
    """What sets the limit, as the error names it: ``"MariaDB's max_allowed_packet"``."""
    expansion: int
    """The most bytes one byte (or character) of a value can take in the statement as sent,
    quoting aside: a statement whose values, times this, fit in ``size`` is not measured
    (PyMySQL: 4, a character of text in UTF-8; bytes travel as hex, 2)."""


class Commit(Protocol):
    """How the work of :meth:`Transactions.committing` commits before the runner would."""

    def __call__(self) -> None:
        """COMMIT now (inside a :meth:`Dialect.pipeline`: with the statements queued in it)."""
        ...

    def sending(self) -> None:
        """Say that a COMMIT the work sent as a statement of its own is on its way.

        From then on a lost connection leaves the outcome unknown (reported, never
        retried), as during :meth:`__call__`; once the COMMIT is through, calling
        the commit does nothing more.
        """
        ...

    def sent(self) -> None:
        """Say that the COMMIT announced by :meth:`sending` went through: the runner
        sends no COMMIT of its own after the work (a driver whose ``commit()`` always
        makes a round trip, PyMySQL's, would otherwise send one for nothing)."""
        ...


class Connections(Protocol):
    """Where a SQL store gets DB-API connections: usually a pool.

    ``connection()`` lends one connection for the ``with`` block, exclusively,
    with no transaction open; it takes the connection back afterwards (and
    discards it if it broke). ``close()`` releases what the pool opened.
    """

    def connection(self) -> contextlib.AbstractContextManager[Any]:
        """Lend a connection for one ``with`` block."""
        ...

    def close(self) -> None:
        """Close every connection this pool opened."""
        ...


class Dialect:
    """The portable defaults; each engine's dialect overrides what differs."""

    name = "generic"
    paramstyle: Literal["qmark", "format"] = "qmark"
    quote_char = '"'
    for_update = " FOR UPDATE"
    """Appended to a SELECT that locks the rows it reads; "" where the engine has one writer."""
    skip_locked = " FOR UPDATE SKIP LOCKED"
    """Appended to the claim's SELECT: lock the rows, skip those another claim holds."""
    lock_runs_joined: str | None = None
    """Appended to a SELECT joining steps ``s`` to their runs ``r`` so that it locks the run
    rows only, in the query's order (Postgres: ``" FOR UPDATE OF r"``; an engine with one
    writer: ``""``). None: lock each run with its own statement instead."""
    keep_existing = " ON CONFLICT DO NOTHING"
    """Appended to an ``INSERT`` so that a row whose primary key exists is left as it is, with
    no error (Postgres, SQLite; MySQL: a no-op ``ON DUPLICATE KEY UPDATE``)."""
    now_sql: str | None = None
    """A SELECT of the server's time in Unix nanoseconds (``Cap.DATABASE_CLOCK``); None: none."""
    namespace_routines: tuple[str, ...] = ()
    """The functions a namespace's migrations create beside its tables (without arguments,
    named by the prefix and these names: Postgres's trigger functions), which dropping its
    tables does not drop; ``drop_tables`` drops them after the tables. Triggers themselves
    go with their tables on every engine."""
    batch_statements = False
    """True: a batch of successes is one ``UPDATE`` (a ``CASE`` on the step id), one round
    trip to a server. False: the single-row statement through ``executemany`` (an embedded
    engine, where a statement costs no round trip)."""

    greatest = "GREATEST"
    """The engine's function for the largest of its arguments (SQLite: ``max``)."""
    least = "LEAST"
    """The engine's function for the smallest of its arguments (SQLite: ``min``)."""
    forced_ready = "f.queue = ? AND f.status = 'ready' AND f.forced = 1"
    """The claim's gate: the forced ready steps of one queue (``f``, the queue a parameter), as
    the engine's index of them is read (Postgres, SQLite: a partial index; MySQL: an indexed
    generated column)."""
    gate_in_queue_key = False
    """True when a ``WHERE`` condition that names no column of the scan is evaluated for every
    row visited, not once before it (SQLite): the claim's queue gate is then folded into the
    index key (``queue = CASE WHEN <gate> THEN ? END``)."""
    limit_expressions = False
    """True when a ``LIMIT`` may be an expression with a subquery: a globally limited queue's
    claim then counts the queue's running attempts in its own statement (``ROOM_LIMIT``) rather
    than in a statement read first (MySQL and MariaDB take only a number there)."""
    key_arrays = False
    """The engine takes a list as an array parameter (``?::text[]``, ``unnest``): a claim's
    concurrency keys are locked by one statement, whatever their number (LOCK_KEYS_ARRAY;
    Postgres through psycopg)."""
    claims_keyed_in_one = False
    """A keyed claim of one queue is one statement (CLAIM_KEYED, :meth:`send_claim_keyed`):
    the engine runs data-modifying ``WITH`` clauses in one statement, and a row locked there
    after waiting for it is read as its holder committed it (Postgres, READ COMMITTED).
    Requires :attr:`key_arrays`. Elsewhere the claim reads its candidates and their keys,
    admits them (:meth:`Keys.admit`) and sends the lease: a round trip more."""
    pipelines = False
    """True when :meth:`pipeline` sends statements without waiting for each one's result."""

    batch_inserts = False
    """True: rows of one table inserted together (a batch enqueue's runs, then its steps)
    go out as the statements :meth:`batch_insert` makes, split under the
    :attr:`statement_limit`. False, the portable default: the one-row statement through
    ``executemany``, which an embedded engine runs without a round trip per row (SQLite)."""

    batch_chunk: int | None = None
    """Runs per statement of a batch enqueue, where :attr:`pipelines` sends a statement
    without waiting for the one before: the server inserts one chunk of runs and their
    steps while the client encodes the next, in the same transaction. None: every run of
    the batch in one statement per table (an engine that waits for each statement gains
    nothing from chunks, and pays a statement more for each)."""

    statement_limit: StatementLimit | None = None
    """The largest statement the server takes, as the dialect learned it (MySQL: when its
    store connected). None, the portable default: no limit the SQL layer checks; the
    database refuses what it cannot store with an error of its own (:meth:`classify`)."""

    def statement_size(self, cursor: Cursor, sql: str, params: Sequence[Any]) -> int:
        """How many bytes ``sql`` (in this dialect's paramstyle) with ``params`` takes as sent.

        Asked only under a :attr:`statement_limit`, and only for a statement too large to
        pass without measuring. The default counts the SQL text and each value's bytes (text
        in UTF-8, other values as their text), which is what a driver that sends values as
        bound parameters (psycopg, in binary) sends; a driver that writes values into the
        SQL text measures that text (MySQL).
        """
        size = len(sql.encode())
        for value in params:
            if isinstance(value, bytes | bytearray):
                size += len(value)
            elif isinstance(value, str):
                size += len(value.encode("utf-8", "surrogatepass"))
            else:
                size += len(str(value))
        return size

    def batch_insert(self, insert: BatchInsert, rows: Sequence[Sequence[Any]]) -> Statement:
        """One statement inserting every row of ``rows``, in this dialect's paramstyle.

        Asked only where :attr:`batch_inserts` is true, for rows that fit the
        statement limit together (counted before: every character of every value
        at the limit's :attr:`~StatementLimit.expansion`, the statement's text at
        most 4,096 characters plus 3 a column and the constants per row). The
        default is one multi-row ``VALUES`` (:func:`values_rows`), the values
        flattened in row order.
        """
        sql = self.sql(values_rows(insert, len(rows)))
        return sql, tuple(value for row in rows for value in row)

    @contextlib.contextmanager
    def pipeline(self, cursor: Cursor) -> Iterator[Callable[[], Cursor]]:
        """Send the statements of the block together where the engine can (one round trip).

        Yields a factory of cursors on ``cursor``'s connection, one per statement
        whose result is read: inside the block results are read once every
        statement was sent (a read sends what is queued and waits), and a
        statement that fails raises by the end of the block at the latest. The
        default sends each statement at once, on ``cursor`` itself.
        """
        yield lambda: cursor

    @contextlib.contextmanager
    def pipelined_transaction(self, cursor: Cursor, commit: Commit) -> Iterator[Cursor]:
        """The block's statements between the transaction's BEGIN and its COMMIT, sent together.

        Yields the cursor to write on. The transaction is committed by the end of
        the block. A statement whose answer is read after the block needs a cursor
        of its own (a :meth:`pipeline` inside the block gives one per statement:
        the COMMIT goes on the yielded cursor); one read inside the block waits for
        its answer there, inside the transaction. The block inside :meth:`pipeline`,
        and :meth:`commit_in_pipeline` inside it where the engine pipelines (on
        Postgres one round trip: the pipeline carries the :meth:`transaction`'s
        BEGIN).
        """
        with self.pipeline(cursor) as cursors:
            yield cursors()
            if self.pipelines:
                self.commit_in_pipeline(cursors(), commit)

    def commit_in_pipeline(self, cursor: Cursor, commit: Commit) -> None:
        """COMMIT as the last statement of an open :meth:`pipeline`, read with the rest.

        Called only where :attr:`pipelines`. The default calls ``commit()``; on
        Postgres psycopg's own COMMIT syncs there and the block's end syncs again,
        an empty round trip, so the dialect sends the COMMIT as a statement.
        """
        commit()

    def quote(self, identifier: str) -> str:
        """Quote an identifier that was already validated."""
        q = self.quote_char
        return f"{q}{identifier.replace(q, q + q)}{q}"

    @functools.lru_cache(maxsize=512)  # noqa: B019 - dialects live as long as the process
    def sql(self, text: str) -> str:
        """Turn portable SQL with ``?`` placeholders into this driver's paramstyle."""
        if self.paramstyle == "qmark":
            return text
        return _in_format_style(text)

    def transaction_scope(self, *, write: bool) -> contextlib.AbstractContextManager[object]:
        """Held around a whole transaction, from begin to commit (default: nothing).

        An engine with a single writer can serialise this process's writers
        here, so they queue on a lock instead of spinning in the database.
        """
        return contextlib.nullcontext()

    def begin(self, cursor: Cursor, *, write: bool) -> None:
        """Open a transaction on ``cursor``'s connection (default: the driver opens one itself)."""

    @contextlib.contextmanager
    def transaction(self, cursor: Cursor, *, write: bool) -> Iterator[None]:
        """The span of one transaction of ``Transactions.committing``: :meth:`begin` it, and
        undo whatever the dialect set up for it once it has committed or rolled back.

        The block ends after the COMMIT or the ROLLBACK (or with the connection
        broken). The default only calls :meth:`begin`. Postgres lets the first
        :meth:`pipeline` of the span carry its BEGIN (see the Postgres dialect).
        """
        self.begin(cursor, write=write)
        yield

    def classify(self, error: BaseException) -> ErrorClass:
        """Sort a database error (see :func:`~cairnflow.sql.default_classifier`)."""
        return default_classifier(error)

    def recover(self, cursor: Cursor, error: BaseException) -> None:
        """Repair what ``error`` left that a retry alone would meet again (default: nothing).

        Called on the failed transaction's connection, rolled back, before a
        retryable ``error`` is retried. A dialect that cannot repair it raises a
        :class:`~cairnflow.CairnError` naming what the operator must do.
        """

    def recovers(self, error: BaseException) -> bool:
        """Whether :meth:`recover` repairs something after ``error`` (default: never).

        The application's own transaction (``enqueue_tx``) is neither run again
        nor repaired on its connection: the application gets ``error`` and
        decides. When this returns True, the SQL layer runs :meth:`recover` on a
        connection of the store's own in the background, so the application's
        next try finds the repair made (see
        :meth:`~cairnflow.sql.Transactions.application_error`).
        """
        return False

    def claim(self, cursor: Cursor, plan: ClaimPlan) -> list[ClaimedRow]:
        """Lease the steps ``plan`` describes in the open transaction; return their rows.

        The default is one conditional ``UPDATE ... WHERE id IN (SELECT ... LIMIT n
        [FOR UPDATE SKIP LOCKED]) RETURNING ...`` (Postgres, SQLite). An engine
        without ``UPDATE ... RETURNING`` selects the ids with a locking read and
        updates them by primary key in the same transaction (see
        :meth:`claim_in_three_statements`).
        """
        sql, params = plan.update_returning
        cursor.execute(self.sql(sql), params)
        return list(cursor.fetchall())

    def send_claim(self, cursor: Cursor, plan: ClaimPlan) -> Callable[[], list[ClaimedRow]]:
        """Send the claim; return how to read its rows (inside a :meth:`pipeline`, later).

        The default claims at once with :meth:`claim`; an engine that pipelines
        sends the statements and reads the rows when asked.
        """
        rows = self.claim(cursor, plan)
        return lambda: rows

    def claim_in_three_statements(self, cursor: Cursor, plan: ClaimPlan) -> list[ClaimedRow]:
        """Claim with a locking SELECT, an UPDATE by primary key, and a SELECT of the rows."""
        sql, params = plan.select_ready
        cursor.execute(self.sql(sql), params)
        ids = [step_id for (step_id,) in cursor.fetchall()]
        if not ids:
            return []
        return self.lease_ids(cursor, plan, ids)

    def lock_candidates(
        self, cursor: Cursor, ready: Statement, still_ready: Callable[[Sequence[str]], Statement]
    ) -> list[ClaimedRow]:
        """A keyed claim's candidates (``ready``, its first column the step id), locked.

        The default reads them with :attr:`skip_locked` appended; an engine whose
        locking read would lock every row it sorts reads them plainly and locks
        those ``still_ready`` by id (MySQL, as :meth:`claim`).
        """
        sql, params = ready
        cursor.execute(self.sql(sql + self.skip_locked), params)
        return list(cursor.fetchall())

    # -- one statement, committed alone ---------------------------------------------------------
    writes_together = False
    """True where :meth:`together` makes one statement of inserts into several tables, and
    :meth:`commit_alone` sends it as a transaction of its own (Postgres; MySQL, as one
    query of several statements)."""

    def together(self, statements: Sequence[Statement]) -> Statement:
        """One statement doing what ``statements`` (inserts, each into its own table, in
        this dialect's paramstyle) do, all or nothing (Postgres: a ``WITH`` of
        data-modifying statements; MySQL: the statements ``;``-separated, one query,
        committed by :meth:`commit_alone`). Called only where :attr:`writes_together`."""
        raise NotImplementedError(f"{type(self).__name__} does not write inserts together")

    def commit_alone(self, cursor: Cursor, commit: Commit, statement: Statement) -> bool:
        """Send ``statement`` as a transaction of its own, ``commit.sending()`` first (its
        outcome is unknown if the connection is lost before its reply); False, sending
        nothing, where the connection cannot (the default)."""
        return False

    def claims_alone(self, cursor: Cursor) -> bool:
        """True where :meth:`claim_alone` can send a claim on ``cursor``'s connection now:
        at the start of a :meth:`transaction` span, before anything was sent in it.

        A claim of one queue without a global limit, a rate or concurrency keys is
        one statement, which is its own transaction where the engine commits a
        statement alone: one message, where a transaction's BEGIN and COMMIT are
        more. The default is False: the claim keeps its transaction.
        """
        return False

    def claim_alone(self, cursor: Cursor, commit: Commit, plan: ClaimPlan) -> list[ClaimedRow]:
        """Send the claim ``plan`` as a transaction of its own, ``commit.sending()`` first
        (its outcome is unknown if the connection is lost before its reply); return the
        rows it leased, as :meth:`claim`. Called only where :meth:`claims_alone` said so;
        what the caller reads afterwards in the span, it reads outside any transaction."""
        raise NotImplementedError(f"{type(self).__name__} does not claim alone")

    def send_claim_keyed(
        self, cursor: Cursor, statement: Statement
    ) -> Callable[[], list[ClaimedRow]]:
        """Send a keyed claim of one queue (CLAIM_KEYED); return how to read the rows it
        leased (inside a :meth:`pipeline`, later). Called only where
        :attr:`claims_keyed_in_one`."""
        raise NotImplementedError(f"{type(self).__name__} does not claim keyed in one statement")

    def lock_candidates_and_keys(self, cursor: Cursor, statement: Statement) -> list[ClaimedRow]:
        """A keyed claim's candidates and their keys' rows, locked by one statement.

        Only where :attr:`key_arrays` (READY_KEYED_WITH_KEYS, which carries its
        own locking clauses); a dialect that sets the claim's session settings
        first (Postgres) does so here as in :meth:`lock_candidates`.
        """
        sql, params = statement
        cursor.execute(self.sql(sql), params)
        return list(cursor.fetchall())

    def lease_ids(self, cursor: Cursor, plan: ClaimPlan, ids: Sequence[str]) -> list[ClaimedRow]:
        """Mark the ready steps ``ids`` (already locked) claimed; read them with their runs."""
        sql, params = plan.mark_claimed(ids)
        cursor.execute(self.sql(sql), params)
        sql, params = plan.claimed_rows_runs(ids)
        cursor.execute(self.sql(sql), params)
        return list(cursor.fetchall())

    def send_lease_ids(
        self, cursor: Cursor, plan: ClaimPlan, ids: Sequence[str]
    ) -> Callable[[], list[ClaimedRow]]:
        """Send :meth:`lease_ids`; return how to read its rows (inside a :meth:`pipeline`, later).

        The default leases at once; an engine that pipelines sends the statements
        and reads the rows when asked, as :meth:`send_claim` does.
        """
        rows = self.lease_ids(cursor, plan, ids)
        return lambda: rows

    # -- enqueueing in the application's transaction (Cap.TRANSACTIONAL_ENQUEUE) --------------
    savepoint_name = "cairnflow_enqueue"
    """The savepoint :meth:`savepoint` holds in the application's transaction."""

    def application_connection(self, tx: Any) -> Any:
        """The DB-API connection behind what the application passed to ``enqueue_tx``.

        A dialect refuses here what it cannot enqueue on atomically (another
        driver's object, autocommit, an aborted transaction), with an error
        that says what to pass instead. The default takes ``tx`` as it is.
        """
        return tx

    @contextlib.contextmanager
    def savepoint(self, cursor: Cursor) -> Iterator[None]:
        """Hold the block's writes in a savepoint of the application's transaction.

        If the block raises (a duplicate key), its writes are rolled back and the
        application's own writes stay, its transaction usable. The default is
        standard SQL: ``SAVEPOINT``, ``ROLLBACK TO SAVEPOINT`` on an error,
        ``RELEASE SAVEPOINT``. A rollback that fails is ignored: the error that
        ended the block already ended the transaction (a deadlock, on InnoDB),
        and that error is raised.
        """
        name = self.savepoint_name
        cursor.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            try:
                cursor.execute(f"ROLLBACK TO SAVEPOINT {name}")
            except Exception:
                log.debug("rolling back to the enqueue savepoint failed", exc_info=True)
            raise
        cursor.execute(f"RELEASE SAVEPOINT {name}")

    def async_application_connection(self, tx: Any) -> Any:
        """The async connection behind what the application passed to an awaited ``enqueue_tx``.

        Like :meth:`application_connection`, for the async connection of the
        driver's library (``psycopg.AsyncConnection``). The default refuses
        every ``tx``: this engine's dialect sends nothing on an async connection.
        """
        raise TypeError(
            f"enqueue_tx() on an async connection is not supported by {type(self).__name__}, "
            f"got {type(tx).__qualname__}: this engine's driver library has no async "
            "connection the store writes on (only psycopg's, on Postgres); enqueue with "
            "client.enqueue_tx() on the driver's sync connection (from async code, in a "
            "thread: asyncio.to_thread)"
        )

    async def send_in_savepoint(self, conn: Any, statements: Sequence[Recorded]) -> None:
        """Send ``statements`` on the application's async connection ``conn``, in a savepoint.

        The async counterpart of :meth:`savepoint` (same rule: a failed block is
        rolled back to the savepoint, the application's writes and transaction
        left usable). Asked only with what :meth:`async_application_connection`
        returned; the default has no async connection to send on.
        """
        raise TypeError(f"{type(self).__name__} sends nothing on an async connection")

    def notify_in_transaction(self, cursor: Cursor, channel: str) -> None:
        """Queue the wake-up of an enqueue in the application's transaction (default: none).

        Called after the inserts, inside the savepoint, by a store with a
        notifier: an engine that delivers notifications at commit (Postgres's
        ``NOTIFY``) sends it then, and never after a rollback. Also called in
        the store's own enqueue for an :class:`~cairnflow.notify.InlineNotifier`.
        """

    def notify_statement(self, channel: str) -> Statement:
        """:meth:`notify_in_transaction`'s statement, to send as part of another
        (:meth:`together`). Requires an engine that delivers notifications at commit;
        the default has none and refuses."""
        raise TypeError(f"{type(self).__name__} has no statement that notifies at commit")

    @contextlib.contextmanager
    def migration_lock(self, cursor: Cursor, key: str) -> Iterator[None]:
        """Hold a lock, across processes, for the whole of a migration (default: none).

        ``key`` names the namespace. Engines whose DDL is transactional may lock
        per file in :meth:`begin_migration` instead.
        """
        yield

    def prepare_namespace(self, cursor: Cursor, tables: Tables) -> None:
        """Create what must exist before the ledger (a Postgres schema); default nothing."""

    def begin_migration(self, cursor: Cursor) -> None:
        """Open the transaction one migration file runs in."""
        self.begin(cursor, write=True)

    def migration_statement(self, cursor: Cursor, statement: str) -> None:
        """Run one statement of a migration file; by default, as it is.

        An engine whose DDL commits on its own (MySQL) may let a statement that
        finds its work done already succeed (a column a migrator added before it
        died, without its ledger row), where its SQL has no ``IF NOT EXISTS``.
        """
        cursor.execute(statement)

    switches_lifecycle = False
    """True: the lifecycle triggers exist only while a subscription wants them
    (:meth:`switch_lifecycle`). False, the portable default: they are permanent and
    look up ``lifecycle_subs`` at every transition."""

    def switch_lifecycle(
        self, cursor: Cursor, tables: Mapping[str, str], channels: Collection[str]
    ) -> None:
        """Create or drop the lifecycle triggers so they match ``channels``, the channels
        ``lifecycle_subs`` holds a subscription of (``Cap.LIFECYCLE``).

        Requires :attr:`switches_lifecycle`, and a role that may run DDL at any time.
        Called in the transaction that changed the subscriptions, so a transition
        commits either before it (no subscriber yet) or after it (the triggers
        exist), and after every ``migrate``. ``tables`` holds the namespace's
        placeholders (:meth:`Tables.template`). The default does nothing.
        """

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


@functools.lru_cache(maxsize=1024)
def _in_format_style(text: str) -> str:
    """``text`` with ``?`` placeholders as ``%s`` (and ``%`` doubled), each text turned once.

    The statements are a few hundred texts, turned at every execution before: two passes
    over a claim's 1,500 characters at each claim (Postgres, MySQL).
    """
    return text.replace("%", "%%").replace("?", "%s")
