"""How PostgreSQL differs: row locks, SKIP LOCKED, transactional DDL, advisory locks.

Transactions run at READ COMMITTED. psycopg opens them implicitly on a
connection with autocommit off (the store's own pool), so :meth:`begin` costs
nothing there; on a connection the application configured differently it
states the isolation level itself. A claim is the SQL layer's one
``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING ...``:
concurrent claims skip each other's rows instead of queueing behind them.

Migrations are serialised across processes by a session-level advisory lock
on a key hashed from the namespace, and every migration file runs in one
transaction (Postgres DDL is transactional: a file applies whole or not at all).

A value the server refuses for what it is (SQLSTATE classes 22 and 54: out of
range, an invalid byte sequence, too large for its type) is refused, never
retried; so is one psycopg cannot send (``DataError`` without a SQLSTATE).
A statement over 1 GiB is refused before it is sent (:data:`MESSAGE_LIMIT`):
the server would close the connection over it, without a SQLSTATE, which
looks like an outage.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import IsolationLevel
from psycopg.pq import PipelineStatus, TransactionStatus
from psycopg_pool import PoolClosed, PoolTimeout

from cairnflow import CairnError
from cairnflow.sql import (
    BatchInsert,
    ClaimedRow,
    ClaimPlan,
    Commit,
    Cursor,
    Dialect,
    ErrorClass,
    Recorded,
    Statement,
    StatementLimit,
    Tables,
    default_classifier,
)

__all__ = [
    "CLAIM_SETTINGS",
    "SESSION_SETTINGS",
    "PostgresDialect",
    "advisory_key",
    "classify",
    "plan_for_claims",
]

log = logging.getLogger("cairnflow.postgres")

UNIQUE = frozenset({"23505"})
"""unique_violation: an idempotency key (or an id) is already held."""
RETRYABLE = frozenset({"40001", "40P01", "55P03"})
"""serialization_failure, deadlock_detected, lock_not_available: run the transaction again."""
UNAVAILABLE = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now, and the server closing an idle session
(idle_session_timeout, idle_in_transaction_session_timeout); with class 08 (connection
exceptions): the session is gone, another connection may work."""

REFUSED_CLASSES = ("22", "54")
"""data_exception (out of range, an invalid byte sequence, ``\\u0000`` in text) and
program_limit_exceeded (a value too large for its type): the value is refused for what it is."""

MESSAGE_LIMIT = StatementLimit(
    (1 << 30) - (1 << 20),
    "PostgreSQL's 1 GiB limit on one message (less 1 MiB kept for its other fields)",
    expansion=4,
)
"""The server reads no protocol message over 1 GiB (``PQ_LARGE_MESSAGE_LIMIT``; a ``bytea``
value cannot be larger either) and closes the connection instead, with no SQLSTATE, as if
it were lost. psycopg sends bytes as they are (binary) and text in UTF-8 (up to 4 bytes a
character), which the default :meth:`~cairnflow.sql.Dialect.statement_size` counts; the
1 MiB kept aside covers the rest of the message (lengths, format codes)."""


# jit: a plan that cannot do without a sort (the keyed claim's keys, sorted by name) keeps
# it under enable_sort = off, costed at 10^10, far over jit_above_cost: the server then
# compiled the 0.3 ms statement for 350 ms on every claim (keyed W2: 24 runs/s; measured
# 2026-12-02). A claim's statements are small; none is worth compiling.
CLAIM_SETTINGS = (
    "SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),"
    " set_config('jit', 'off', true)"
)
"""What a claim's transaction sets before its statements (see :meth:`PostgresDialect.claim`)."""

SESSION_SETTINGS = CLAIM_SETTINGS.replace("true)", "false)")
"""The claim's settings for a whole session: what the connections of the store's claims pool
are given when the pool makes them (:func:`plan_for_claims`). Only claims run there: on the
store's main pool, session-wide, ``enable_sort = off`` made an outcome batch's locking read
(``ORDER BY r.id FOR UPDATE OF r``) walk the runs' whole id index instead of sorting its few
rows (28 ms a batch; W2 1,900 -> 550 runs/s, 2026-12-03). ``synchronous_commit`` stays on
here, though a claim's flush is a fifth of an idle worker's enqueue -> start (p50 3.12 ->
2.47 ms without it, 2026-12-05): a claim lost in a server crash would be handed out again
under the same attempt number, and a step that crashes the server would never use up its
attempts (docs/benchmarks.md, twentieth session)."""

_planned: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
"""Connections whose session has :data:`SESSION_SETTINGS`: a claim on them sends no
:data:`CLAIM_SETTINGS`, and one of a single statement goes alone (:meth:`claim_alone`)."""


def plan_for_claims(conn: psycopg.Connection[Any]) -> None:
    """Give ``conn``'s session the claim's settings (:data:`SESSION_SETTINGS`), committed.

    The store's claims pool calls this for every connection it makes. A claim on
    any other connection (the store's main pool, an application's) sets the
    claim's settings for its transaction (:data:`CLAIM_SETTINGS`), as before.
    """
    conn.execute(SESSION_SETTINGS)
    conn.commit()
    _planned.add(conn)


def _claim_settings(cursor: Cursor) -> None:
    """Set the claim's settings for the open transaction, unless the session has them."""
    conn = _connection(cursor)
    if conn not in _planned:
        conn.cursor().execute(CLAIM_SETTINGS)  # its own cursor: not the claim's result


def classify(error: BaseException) -> ErrorClass:
    """Sort a psycopg error by its SQLSTATE (see the module constants).

    Errors without a SQLSTATE that mean "no connection" are unavailable too: a
    connection lost mid-query (``OperationalError``), a connection already
    closed (``InterfaceError``), and a pool that had no connection to lend in
    time or was closed. Refused: a value the server refuses
    (:data:`REFUSED_CLASSES`) or psycopg cannot send (a ``DataError`` without a
    SQLSTATE: text with a NUL). Anything else falls back to
    :func:`cairnflow.sql.default_classifier`.
    """
    if isinstance(error, PoolTimeout | PoolClosed):
        return ErrorClass(unavailable=True)
    if isinstance(error, psycopg.Error):
        sqlstate = error.sqlstate
        if sqlstate is not None:
            if sqlstate in UNIQUE:
                return ErrorClass(unique_violation=True)
            if sqlstate in RETRYABLE:
                return ErrorClass(retryable=True)
            if sqlstate.startswith("08") or sqlstate in UNAVAILABLE:
                return ErrorClass(unavailable=True)
            if sqlstate.startswith(REFUSED_CLASSES):
                return ErrorClass(refused=True)
            return ErrorClass()
        if isinstance(error, psycopg.OperationalError):
            return ErrorClass(unavailable=True)
        if isinstance(error, psycopg.DataError):
            return ErrorClass(refused=True)
        if isinstance(error, psycopg.InterfaceError) and "closed" in str(error):
            return ErrorClass(unavailable=True)
        return ErrorClass()
    return default_classifier(error)


def advisory_key(namespace: str) -> int:
    """A signed 64-bit advisory lock key for ``namespace``, stable across releases."""
    digest = hashlib.sha256(f"cairnflow:migrate:{namespace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _connection(cursor: Cursor) -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] = cursor.connection
    return conn


PIPELINED_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
"""What the first pipeline of a :meth:`PostgresDialect.transaction` span opens its transaction
with: what psycopg sends itself on the store's connections (READ COMMITTED, read-write)."""


def _own_kind(conn: psycopg.Connection[Any]) -> bool:
    """True for a connection as the store lends it: idle, not in autocommit, READ COMMITTED,
    read-write (what may be put in autocommit for a transaction sent as statements)."""
    return (
        not conn.autocommit
        and conn.info.transaction_status == TransactionStatus.IDLE
        and conn.isolation_level == IsolationLevel.READ_COMMITTED
        and not conn.read_only
    )


def _leave_autocommit(conn: psycopg.Connection[Any]) -> None:
    """End a pipelined transaction's autocommit: roll back what a failure left open first.

    A connection that cannot (it broke) is closed, so its pool never lends it in
    autocommit: the pool drops a closed connection.
    """
    try:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.rollback()
        conn.autocommit = False
    except Exception:
        log.debug("a pipelined transaction's connection could not leave autocommit", exc_info=True)
        with contextlib.suppress(Exception):
            conn.close()


def _application_connection(tx: Any) -> psycopg.Connection[Any]:
    """The psycopg connection behind what the application passed to ``enqueue_tx``."""
    if isinstance(tx, psycopg.Connection):
        return tx
    conn = getattr(tx, "connection", None)
    if isinstance(tx, psycopg.Transaction | psycopg.Cursor) and isinstance(
        conn, psycopg.Connection
    ):
        return conn
    raise TypeError(
        "enqueue_tx() on Postgres takes the application's psycopg.Connection (or a "
        f"psycopg.Transaction or Cursor of it), got {type(tx).__qualname__}"
    )


def _async_application_connection(tx: Any) -> psycopg.AsyncConnection[Any]:
    """The async psycopg connection behind what the application passed to ``enqueue_tx``."""
    if isinstance(tx, psycopg.AsyncConnection):
        return tx
    conn = getattr(tx, "connection", None)
    if isinstance(tx, psycopg.AsyncTransaction | psycopg.AsyncCursor) and isinstance(
        conn, psycopg.AsyncConnection
    ):
        return conn
    raise TypeError(
        "an awaited enqueue_tx() on Postgres takes the application's psycopg.AsyncConnection "
        f"(or a psycopg.AsyncTransaction or AsyncCursor of it), got {type(tx).__qualname__}"
        + (": use client.enqueue_tx() for a sync connection" if _is_sync(tx) else "")
    )


def _is_sync(tx: Any) -> bool:
    return isinstance(tx, psycopg.Connection | psycopg.Transaction | psycopg.Cursor)


def _check_open(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], block: str) -> None:
    """Refuse an application connection no enqueue can be written on atomically."""
    status = conn.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise CairnError(
            "the application's transaction is aborted (an earlier statement failed): "
            "roll it back before enqueueing"
        )
    if status == TransactionStatus.ACTIVE:
        raise CairnError("the application's connection is busy running another statement")
    if conn.autocommit and status == TransactionStatus.IDLE:
        raise CairnError(
            "enqueue_tx() needs the application's transaction, but this autocommit "
            f"connection has none open: enqueue inside `{block}`"
        )


_ARRAY_TYPES = {"text": "text[]", "int": "bigint[]", "bytes": "bytea[]"}
"""The Postgres array type of each kind of :class:`~cairnflow.sql.BatchInsert` column."""


_SCALAR_TYPES = {"text": "text", "int": "bigint", "bytes": "bytea"}
"""The Postgres type of a column sent as one value for every row (:func:`_unnest_insert`)."""


@functools.lru_cache(maxsize=128)
def _unnest_insert(insert: BatchInsert, shared: tuple[bool, ...]) -> str:
    """The ``INSERT ... SELECT FROM unnest(...)`` of ``insert`` (psycopg's paramstyle): the same
    text for any number of rows.

    A column ``shared`` holds one value in every row of the batch, and is sent as that one
    value (``%b::text``), not as an array of it: the SELECT list's parameters, then the
    arrays of the other columns, in column order.
    """
    names = [f'"{column}"' for column in insert.columns]
    # %b: psycopg sends the arrays in binary. In text (%s) it quotes every element through a
    # regular expression, in Python: 58 ms against 40 ms for 1,000 runs and their steps
    # (/tmp bench of the statement alone, 2026-12-01, #20; executemany: 79 ms, COPY: 30 ms).
    arrays = ", ".join(
        f"%b::{_ARRAY_TYPES[kind]}"
        for kind, one in zip(insert.types, shared, strict=True)
        if not one
    )
    unnested = ", ".join(name for name, one in zip(names, shared, strict=True) if not one)
    selected = ", ".join(
        f"%b::{_SCALAR_TYPES[kind]}" if one else name
        for name, kind, one in zip(names, insert.types, shared, strict=True)
    )
    constant_columns = "".join(f', "{column}"' for column, _ in insert.constants)
    constants = "".join(f", {literal}" for _, literal in insert.constants)
    return (
        f"INSERT INTO {insert.table} ({', '.join(names)}{constant_columns})\n"
        f"SELECT {selected}{constants}\n"
        f"FROM unnest({arrays}) AS batch ({unnested})"
    )


class PostgresDialect(Dialect):
    """PostgreSQL 12 and newer, through psycopg 3."""

    name = "postgres"
    paramstyle = "format"
    quote_char = '"'
    for_update = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    # Lock only the run rows of a steps-to-runs join, in the query's order (the runs' ids),
    # so a batch of outcomes locks its runs in one round trip and never out of order.
    lock_runs_joined = " FOR UPDATE OF r"
    batch_statements = True
    pipelines = True
    key_arrays = True  # a claim's keys locked by one statement (LOCK_KEYS_ARRAY)
    claims_keyed_in_one = True  # a keyed claim of one queue: one statement (CLAIM_KEYED)
    limit_expressions = True
    # A batch enqueue's runs, then its steps, each as one INSERT ... SELECT FROM unnest(arrays)
    # (batch_insert). executemany, which psycopg pipelines, still runs the statement once per
    # row on the server; see batch_insert for what was measured.
    batch_inserts = True
    # 100 runs a statement: the server inserts a chunk while psycopg dumps the next one's
    # arrays (in Python). enqueue_many of 500, four rounds alternating: 27,400 -> 30,300
    # runs/s median (+10%; 64: level, 128: +8%), on one 2-core machine with the server on it
    # (2026-12-03, #20). A server on another machine has its own cores for the overlap.
    batch_chunk = 100
    statement_limit = MESSAGE_LIMIT
    # clock_timestamp() moves during a transaction (now() would not); microseconds, as integer
    # nanoseconds. EXTRACT returns numeric from Postgres 14 on, so the product is exact.
    now_sql = "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint * 1000"
    namespace_routines = ("record_step", "lifecycle_step", "lifecycle_run")
    """The trigger functions of migrations 017 and 021 (their triggers go with the tables)."""

    def __init__(self) -> None:
        self._lazy: set[int] = set()
        """Connections (by id) of open transaction spans whose BEGIN is not sent yet: the
        first :meth:`pipeline` of the span carries it."""
        self._statements: set[int] = set()
        """Connections (by id) put in autocommit by that pipeline: their transaction is
        sent as statements until the span ends."""

    def begin(self, cursor: Cursor, *, write: bool) -> None:
        """Make sure the transaction is at READ COMMITTED, as cheaply as the connection allows.

        The store's own pool configures every connection for it, so this sends
        nothing. An application's pool may lend autocommit connections (a
        ``BEGIN`` is needed, or every statement would commit alone) or ones at
        another isolation level (the claim's SKIP LOCKED is designed for READ
        COMMITTED); then the level is stated for this transaction only.
        """
        conn = _connection(cursor)
        if conn.info.transaction_status != TransactionStatus.IDLE:
            return
        if conn.autocommit:
            cursor.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        elif conn.isolation_level != IsolationLevel.READ_COMMITTED:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")

    @contextlib.contextmanager
    def transaction(self, cursor: Cursor, *, write: bool) -> Iterator[None]:
        """A transaction whose BEGIN may travel with its first pipeline (see the base class).

        psycopg opens a transaction with a ``BEGIN`` of its own and waits for it: a
        round trip before the first statement (in pipeline mode too: it syncs after
        the BEGIN to learn the transaction's status). On a connection of the
        store's own kind the first :meth:`pipeline` of the span, if it comes
        before any statement, puts the connection in autocommit (a Python
        attribute: no round trip while no transaction is open) and sends ``BEGIN``
        as its first statement; the rest of the transaction then goes as
        statements inside that explicit transaction block, and the span's end,
        after the COMMIT or the ROLLBACK, takes the connection out of autocommit
        again (rolling back first whatever a failure left open: a statement that
        fails aborts the transaction block, and the server skips the rest, COMMIT
        included, up to the pipeline's sync). A statement sent before any pipeline
        opens the transaction the usual way, and nothing changes: the span only
        ever saves the BEGIN's round trip. An enqueue (``pipelined_transaction``:
        this pipeline, with :meth:`commit_in_pipeline`) or a claim is one round
        trip; psycopg's own transaction took three (its BEGIN and a sync, the
        statements, its COMMIT and the pipeline's closing sync).
        """
        conn = _connection(cursor)
        key = id(conn)
        if _own_kind(conn):
            self._lazy.add(key)  # begin() would send nothing on it
        else:
            self.begin(cursor, write=write)
        try:
            yield
        finally:
            self._lazy.discard(key)
            if key in self._statements:
                self._statements.discard(key)
                _leave_autocommit(conn)

    def _at_span_start(self, conn: psycopg.Connection[Any]) -> bool:
        """True at the start of a :meth:`transaction` span on a connection of the store's
        own kind (marked when the span began, :func:`_own_kind`) with nothing sent since."""
        return id(conn) in self._lazy and conn.pgconn.transaction_status == TransactionStatus.IDLE

    def _in_statements(self, conn: psycopg.Connection[Any]) -> None:
        """Send the rest of the span as statements in autocommit; the span's end takes the
        connection out of it (:func:`_leave_autocommit`)."""
        key = id(conn)
        self._lazy.discard(key)
        conn.autocommit = True
        self._statements.add(key)

    @contextlib.contextmanager
    def pipeline(self, cursor: Cursor) -> Iterator[Callable[[], Cursor]]:
        """psycopg's pipeline mode: statements go out without waiting for each result.

        Every statement gets its own cursor, so each result stays readable after
        the block. A transaction the block opens starts inside it too: as the first
        pipeline of a :meth:`transaction` span, with a ``BEGIN`` sent as its first
        statement; otherwise with psycopg's own, which waits for its answer.
        """
        conn = _connection(cursor)
        if conn.pgconn.pipeline_status != PipelineStatus.OFF:
            # Within a pipeline already (a keyed claim's key locks, inside the claim's): a
            # nested block would end with a sync of its own, one round trip for nothing.
            yield conn.cursor
            return
        key = id(conn)
        if key in self._lazy:
            if _own_kind(conn):  # nothing sent before it in the span: this pipeline opens it
                self._in_statements(conn)
                with conn.pipeline():
                    conn.cursor().execute(PIPELINED_BEGIN)
                    yield conn.cursor
                return
            self._lazy.discard(key)  # a statement before it opened the span
        with conn.pipeline():
            yield conn.cursor

    def commit_in_pipeline(self, cursor: Cursor, commit: Commit) -> None:
        """COMMIT as a statement of the pipeline (see the base class): its answer comes
        with the block's closing sync, where psycopg's ``commit()`` syncs once for itself
        and leaves the closing sync an empty round trip. libpq learns from the server
        that no transaction is open, so the ``commit()`` the runner makes after the
        work sends nothing."""
        commit.sending()
        cursor.execute("COMMIT")

    writes_together = True

    def together(self, statements: Sequence[Statement]) -> Statement:
        """``WITH written_1 AS (<insert>), ... <last insert>``: every data-modifying
        statement of a ``WITH`` runs to completion, in the one statement's snapshot, and
        the statement commits or fails as a whole."""
        *first, (last, last_params) = statements
        parts = [f"written_{n} AS ({sql})" for n, (sql, _) in enumerate(first, 1)]
        head = f"WITH {', '.join(parts)}\n" if parts else ""
        params = [value for _, values in first for value in values]
        return head + last, (*params, *last_params)

    def commit_alone(self, cursor: Cursor, commit: Commit, statement: Statement) -> bool:
        """One statement in autocommit: its own transaction, one message and one round trip,
        where BEGIN, the inserts and COMMIT in a pipeline were four statements and a sync.

        A one-run enqueue (0.37 ms -> 0.33 ms for its SQL alone, measured with psycopg on
        a local server, 2026-12-02). A connection that is not the store's own kind
        takes the transaction, as in :meth:`transaction`.
        """
        conn = _connection(cursor)
        if not self._at_span_start(conn):
            return False
        self._in_statements(conn)
        commit.sending()
        cursor.execute(*statement)
        commit.sent()  # committed with its reply: the runner has no COMMIT to send
        return True

    def batch_insert(self, insert: BatchInsert, rows: Sequence[Sequence[Any]]) -> Statement:
        """``INSERT INTO t (...) SELECT ... FROM unnest(%b::text[], %b::bigint[], ...)``: one array
        per column, whatever the number of rows.

        Ten or thirteen parameters instead of one set per row: the server parses,
        plans and executes one statement for the whole batch, and a unique index
        refusing any row aborts all of them (an idempotency key is all-or-none).
        Measured (bench W1, 20,000 runs in batches of 1,000, 2026-12-01, #20): see
        docs/benchmarks.md, "Enqueue speed".

        A column holding one value in every row (a batch of one workflow: all but the
        ids and the payloads) is sent as that value, once: 26 arrays of a batch's runs
        and steps become 4. psycopg dumps an array element by element in Python (0.196 s
        of a profiled 10,000-run batch series, 0.052 s after), and the server unpacks
        fewer. enqueue_many of 500, alternating batch by batch in one process: 21,415 ->
        24,633 runs/s (docs/benchmarks.md, "A batch's shared values sent once"; #20).
        """
        columns = list(zip(*rows, strict=True))
        shared = [len(rows) > 1 and values.count(values[0]) == len(values) for values in columns]
        if all(shared):
            shared[0] = False  # unnest() needs an array
        scalars = [values[0] for values, one in zip(columns, shared, strict=True) if one]
        arrays = [list(values) for values, one in zip(columns, shared, strict=True) if not one]
        return _unnest_insert(insert, tuple(shared)), (*scalars, *arrays)

    def classify(self, error: BaseException) -> ErrorClass:
        """Sort a psycopg error by SQLSTATE (:func:`classify`)."""
        return classify(error)

    def claim(self, cursor: Cursor, plan: ClaimPlan) -> list[ClaimedRow]:
        """Claim through the ready index, in its order, whatever the statistics say.

        A queue table's statistics are stale after every burst: autovacuum has not
        analysed the thousands of steps just enqueued, the planner believes a few
        rows are ready, and it reads every one of them through a bitmap and sorts
        them, on every claim (21 ms at 10,000 ready steps, against 0.7 ms for the
        ordered index scan that stops after n rows). The claim is always that
        ordered scan, so its transaction turns the two alternatives off, locally.
        It keeps the pauses a claim reads (docs/claim.md) as probes too: a paused
        workflow is one primary-key probe per row visited, not a hash of every
        paused workflow joined to every ready row of the queue, then sorted.
        """
        return self.send_claim(cursor, plan)()

    def send_claim(self, cursor: Cursor, plan: ClaimPlan) -> Callable[[], list[ClaimedRow]]:
        """Send the claim (see :meth:`claim`); its rows are read when the caller asks."""
        _claim_settings(cursor)
        # UPDATE ... FROM returns the runs' payloads with the claimed steps: one statement.
        sql, params = plan.update_returning_runs
        cursor.execute(self.sql(sql), params)
        return lambda: list(cursor.fetchall())

    def claims_alone(self, cursor: Cursor) -> bool:
        """True on a connection of the store's claims pool (its session has the claim's
        settings, :func:`plan_for_claims`) at the start of a :meth:`transaction` span."""
        conn = _connection(cursor)
        return conn in _planned and self._at_span_start(conn)

    def claim_alone(self, cursor: Cursor, commit: Commit, plan: ClaimPlan) -> list[ClaimedRow]:
        """The claim's ``UPDATE`` in autocommit: its own transaction, one message (Bind,
        Execute, Sync) and one round trip, with no BEGIN, settings or COMMIT around it.

        Sent as four statements in a pipeline, the claim made an idle backend wake
        for each as it arrived: the same claim after 10 ms of quiet took 2.1 ms as
        the pipeline and 1.6 ms alone (p50 of 300 each, alternating, local server,
        2026-12-03, #20; docs/benchmarks.md, tenth session). The span stays in
        autocommit until it ends, so what the caller reads after it (the inputs
        of steps with parents) reads outside any transaction, as after a
        pipeline's COMMIT; the span's end takes the connection out of autocommit.
        """
        self._in_statements(_connection(cursor))
        commit.sending()
        sql, params = plan.update_returning_runs
        cursor.execute(self.sql(sql), params)
        return list(cursor.fetchall())

    def send_claim_keyed(
        self, cursor: Cursor, statement: Statement
    ) -> Callable[[], list[ClaimedRow]]:
        """Send a keyed claim of one queue, one statement (see :meth:`send_claim`)."""
        _claim_settings(cursor)
        sql, params = statement
        cursor.execute(self.sql(sql), params)
        return lambda: list(cursor.fetchall())

    def send_lease_ids(
        self, cursor: Cursor, plan: ClaimPlan, ids: Sequence[str]
    ) -> Callable[[], list[ClaimedRow]]:
        """Send the keyed claim's lease; its rows are read when the caller asks (in a
        pipeline: with the outcome batch's COMMIT, one round trip). One statement: the
        update returns the leased steps with their runs' columns, as :meth:`send_claim`'s."""
        sql, params = plan.mark_claimed_returning_runs(ids)
        cursor.execute(self.sql(sql), params)
        return lambda: list(cursor.fetchall())

    def lock_candidates(
        self, cursor: Cursor, ready: Statement, still_ready: Callable[[Sequence[str]], Statement]
    ) -> list[ClaimedRow]:
        """A keyed claim's candidates, read under the claim's settings (see :meth:`claim`)."""
        _claim_settings(cursor)
        return super().lock_candidates(cursor, ready, still_ready)

    def lock_candidates_and_keys(self, cursor: Cursor, statement: Statement) -> list[ClaimedRow]:
        """A keyed claim's candidates and keys, read under the claim's settings."""
        _claim_settings(cursor)
        return super().lock_candidates_and_keys(cursor, statement)

    def application_connection(self, tx: Any) -> psycopg.Connection[Any]:
        """The application's psycopg connection, with a transaction open or about to open.

        ``tx`` is a ``psycopg.Connection``, or a ``Transaction`` or ``Cursor`` of
        one. Refused: an aborted transaction, a connection busy with another
        statement, and an autocommit connection outside a transaction block
        (each INSERT would commit alone).
        """
        conn = _application_connection(tx)
        _check_open(conn, "with conn.transaction():")
        return conn

    def async_application_connection(self, tx: Any) -> psycopg.AsyncConnection[Any]:
        """The application's ``psycopg.AsyncConnection`` (or an ``AsyncTransaction`` or
        ``AsyncCursor`` of it), refused as :meth:`application_connection` refuses."""
        conn = _async_application_connection(tx)
        _check_open(conn, "async with conn.transaction():")
        return conn

    async def send_in_savepoint(self, conn: Any, statements: Sequence[Recorded]) -> None:
        """Await ``statements`` on ``conn`` in a savepoint, as :meth:`savepoint` runs them.

        In psycopg's pipeline mode, like the store's own enqueue: the savepoint,
        the inserts, the NOTIFY and the release go out in one round trip. A
        statement that fails aborts the rest of the pipeline; the transaction is
        then rolled back to the savepoint, usable again. So is one whose task was
        cancelled half way (a web client that went away): no part of the enqueue
        stays in the application's transaction. Should even that rollback fail, the
        transaction is left aborted, and the application's COMMIT writes nothing.
        """
        name = self.savepoint_name
        sent = False
        try:
            async with conn.pipeline(), conn.cursor() as cursor:
                await cursor.execute(f"SAVEPOINT {name}")
                sent = True
                for statement in statements:
                    if statement.many:
                        await cursor.executemany(statement.sql, statement.params)
                    else:
                        await cursor.execute(statement.sql, statement.params)
                await cursor.execute(f"RELEASE SAVEPOINT {name}")
        except BaseException:
            with contextlib.suppress(Exception):
                if sent or conn.info.transaction_status == TransactionStatus.INERROR:
                    await conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    await conn.execute(f"RELEASE SAVEPOINT {name}")
            raise

    @contextlib.contextmanager
    def savepoint(self, cursor: Cursor) -> Iterator[None]:
        """``SAVEPOINT``, rolled back to only if the block left the transaction aborted.

        A failed statement aborts a Postgres transaction: rolling back to the
        savepoint makes it usable again. An error that did not (one raised in
        Python) leaves the block's writes in place, as the block left them.
        """
        name = self.savepoint_name
        cursor.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                if _connection(cursor).info.transaction_status == TransactionStatus.INERROR:
                    cursor.execute(f"ROLLBACK TO SAVEPOINT {name}")
                cursor.execute(f"RELEASE SAVEPOINT {name}")
            raise
        cursor.execute(f"RELEASE SAVEPOINT {name}")

    def notify_in_transaction(self, cursor: Cursor, channel: str) -> None:
        """Queue a ``NOTIFY``: Postgres delivers it at commit, and drops it on rollback."""
        cursor.execute(*self.notify_statement(channel))

    def notify_statement(self, channel: str) -> Statement:
        """``SELECT pg_notify(channel, '')``: last in a one-run enqueue's ``WITH`` statement."""
        return "SELECT pg_notify(%s, '')", (channel,)

    @contextlib.contextmanager
    def migration_lock(self, cursor: Cursor, key: str) -> Iterator[None]:
        """Hold a session-level advisory lock on the namespace for the whole migration.

        The lock is taken and committed before the first migration transaction
        (a session lock outlives commits), and released in ``finally``. If the
        release itself fails on a live connection, the connection is closed so
        the pool never lends a session that still holds the lock.
        """
        conn = _connection(cursor)
        lock = advisory_key(key)
        cursor.execute("SELECT pg_advisory_lock(%s)", (lock,))
        if not conn.autocommit:
            conn.commit()
        try:
            yield
        finally:
            try:
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.rollback()
                cursor.execute("SELECT pg_advisory_unlock(%s)", (lock,))
                if not conn.autocommit:
                    conn.commit()
            except Exception:
                # A dead session released its locks with it; a live one must not go back
                # to the pool holding the lock.
                log.warning(
                    "could not release the migration lock; closing the connection", exc_info=True
                )
                with contextlib.suppress(Exception):
                    conn.close()

    def prepare_namespace(self, cursor: Cursor, tables: Tables) -> None:
        """Create the schema when it does not exist yet.

        Existence is checked first: ``CREATE SCHEMA IF NOT EXISTS`` checks the
        CREATE privilege on the database before it checks existence, so a role
        allowed to use an existing schema could not migrate into it otherwise.
        """
        if tables.schema is None:
            return
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (tables.schema,))
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {self.quote(tables.schema)}")
