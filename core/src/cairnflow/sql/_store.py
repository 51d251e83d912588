"""One DB-API 2.0 implementation of the Store SPI, over a :class:`Dialect`.

Every SPI operation is one transaction (sleeps and reclaims are one small
transaction per step, so no transaction locks more than one run). Every
transition of a run locks the run row first, then its steps: one lock order,
so no two transitions of a run deadlock, and fan-in, signal delivery and run
completion are serialised per run. Attempts are fenced by their lease: the
token the engine holds is ``<step id>:<secret>`` and every write of an
attempt is ``UPDATE ... WHERE id = ? AND lease_token = ? AND status = 'running'``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar, cast

from .. import ids
from .._caps import Cap
from .._errors import (
    CairnError,
    DuplicateRun,
    RunNotFound,
    SchemaNotReady,
    SchemaTooNew,
    StepTimeout,
    Unavailable,
)
from .._models import ErrorInfo, Status, StepKind, StepStatus
from .._version import SPI_VERSION
from ..notify import Notifier
from ..store import (
    ACTIVE,
    AdvanceResult,
    AttemptState,
    ClaimedAttempt,
    ClaimRequest,
    ExpiredAttempt,
    Failed,
    FinishResult,
    NewRun,
    Outcome,
    ReclaimResult,
    RenewResult,
    RunPage,
    RunQuery,
    RunSummary,
    SignalResult,
    SleepUntil,
    Snoozed,
    StoredRun,
    StoredStep,
    StoreInfo,
    Succeeded,
    WaitFor,
)
from ._dialect import ClaimedRow, Connections, Cursor, Dialect
from ._errors import ErrorClassifier
from ._migrations import Migration
from ._queries import Queries
from ._tables import TABLES, Tables

__all__ = ["SQL_CAPABILITIES", "SQLStore", "StoreStats"]

T = TypeVar("T")
log = logging.getLogger("cairnflow.sql")

SQL_CAPABILITIES = frozenset(
    {
        Cap.DURABLE,
        Cap.MULTI_PROCESS,
        Cap.LEASE,
        Cap.RESULT,
        Cap.RETRY,
        Cap.STEP_TIMEOUT,
        Cap.SLEEP,
        Cap.SIGNAL,
        Cap.CANCEL,
        Cap.IDEMPOTENCY,
        Cap.DELAYED_START,
        Cap.BATCH_ENQUEUE,
        Cap.NODE_IDENTITY,
        Cap.PAYLOAD_LIMIT,
        Cap.SNOOZE,
        Cap.HEARTBEAT,
        Cap.PROGRESS,
        Cap.RUN_QUERY,
    }
)
"""What every SQL store built on this layer implements; drivers add their own."""

_HELD = FinishResult(AttemptState.HELD)
_RUN_SUCCEEDED = FinishResult(AttemptState.HELD, run_status=Status.SUCCEEDED)
"""The two most common results, shared (results are immutable)."""
_KINDS = {kind.value: kind for kind in StepKind}

_SECRET = 32  # hex characters of a lease secret
_CHUNK = 200  # values per IN list
_BATCH_ROWS = 64  # rows per one-statement batch of successes (four values each)


class StoreStats:
    """Counts of what a SQL store sent to its database (for benchmarks and tuning)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.transactions = 0
        self.statements = 0
        self.retries = 0

    def count(self, *, transactions: int = 0, statements: int = 0, retries: int = 0) -> None:
        """Add to the counters."""
        with self._lock:
            self.transactions += transactions
            self.statements += statements
            self.retries += retries

    def snapshot(self) -> dict[str, int]:
        """The counters now."""
        with self._lock:
            return {
                "transactions": self.transactions,
                "statements": self.statements,
                "retries": self.retries,
            }


class _Redo(CairnError):
    """A batched write met an attempt whose lease was lost: redo the batch one at a time."""


class _RunTally:
    """The steps left of the runs a transaction locked, and the run writes it owes them.

    Successes are counted here and written once per run at :meth:`flush` (one
    ``executemany`` for all the runs of a batch), rather than once per step.
    """

    @classmethod
    def of(cls, run_id: str, steps_left: int) -> _RunTally:
        """A tally of one locked run."""
        tally = cls()
        tally.left[run_id] = steps_left
        return tally

    def __init__(self) -> None:
        self.left: dict[str, int] = {}
        self._done: Counter[str] = Counter()
        self._finished: list[str] = []

    def succeeded(self, run_id: str) -> bool:
        """Count a success of ``run_id``; True when it was the run's last step."""
        self.left[run_id] -= 1
        if self.left[run_id] > 0:
            self._done[run_id] += 1
            return False
        self._done.pop(run_id, None)
        self._finished.append(run_id)
        return True

    def flush(self, store: SQLStore, cur: Cursor, now: int) -> None:
        """Write the counts and end the runs whose every step succeeded."""
        q = store._queries
        if self._done:
            store._execute_many(
                cur, q.count_steps_done, [(n, run) for run, n in self._done.items()]
            )
        for chunk in _chunks(self._finished):
            store._execute(cur, *q.runs_succeeded(now, chunk))
            store._execute(cur, *q.drop_signals_of(chunk))
        self._done.clear()
        self._finished.clear()


class _UniqueViolation(Exception):
    """A unique index refused a write (raised inside the SQL layer only)."""


def _token(step_id: str, secret: str) -> str:
    return f"{step_id}:{secret}"


def _split_token(token: str) -> tuple[str, str] | None:
    if len(token) <= _SECRET + 1 or token[-_SECRET - 1] != ":":
        return None
    return token[: -_SECRET - 1], token[-_SECRET:]


def _chunks(items: Sequence[T], size: int = _CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"expected bytes from the database, got {type(value).__name__}")


def _text(value: Any) -> str:
    if type(value) is str:  # what most drivers return: the hot path
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode()
    return str(value)


def _json(value: Any) -> Any:
    """A JSON column's value; the empty list and object (most parents, children, labels)
    without the parser."""
    text = _text(value)
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def _error(value: Any) -> ErrorInfo | None:
    return None if value is None else ErrorInfo.from_json(_text(value))


class SQLStore:
    """The Store SPI on any DB-API 2.0 driver; a driver supplies the dialect and connections.

    ``table_prefix`` (default ``cf_``) and ``schema`` name the namespace; both
    are validated and quoted. ``id_generator`` makes run and step ids.
    ``error_classifier`` overrides the dialect's. Retryable errors (deadlocks,
    busy databases) retry the whole transaction up to ``tx_attempts`` times;
    unavailable ones are raised as :class:`cairnflow.Unavailable`.
    """

    capabilities: frozenset[Cap] = SQL_CAPABILITIES
    spi_version = SPI_VERSION

    def __init__(
        self,
        connections: Connections,
        dialect: Dialect,
        migrations: Sequence[Migration],
        *,
        info: StoreInfo,
        table_prefix: str = "cf_",
        schema: str | None = None,
        id_generator: ids.IdGenerator = ids.default_id_generator,
        error_classifier: ErrorClassifier | None = None,
        tx_attempts: int = 5,
        notifier: Notifier | None = None,
    ) -> None:
        if isinstance(tx_attempts, bool) or not isinstance(tx_attempts, int) or tx_attempts < 1:
            raise ValueError(f"tx_attempts must be an int >= 1, got {tx_attempts!r}")
        self.tables = Tables.build(table_prefix, schema, dialect.quote)
        self.dialect = dialect
        self.migrations = tuple(migrations)
        self._connections = connections
        self._queries = Queries(self.tables, dialect)
        self._info = info
        self._id_generator = id_generator
        self._classify = error_classifier or dialect.classify
        self._tx_attempts = tx_attempts
        self._notifier = notifier
        self.stats = StoreStats()
        """Transactions, statements and retries sent so far."""
        where = f"{schema}." if schema else ""
        self._channel = f"cairnflow_{dialect.name}_{where}{table_prefix}"

    # -- lifecycle ---------------------------------------------------------------
    def describe(self) -> StoreInfo:
        """What this store is (the server version is read once, lazily)."""
        return self._info

    @property
    def channel(self) -> str:
        """``cairnflow_<engine>_<schema>.<prefix>``: one channel per namespace."""
        return self._channel

    def default_notifier(self) -> Notifier | None:
        """The notifier the driver chose (None: polling only)."""
        return self._notifier

    def close(self) -> None:
        """Close the connections this store opened."""
        self._connections.close()

    # -- transactions ----------------------------------------------------------------
    def _execute(self, cursor: Cursor, sql: str, params: Sequence[Any] = ()) -> Cursor:
        self.stats.count(statements=1)
        cursor.execute(self.dialect.sql(sql), tuple(params))
        return cursor

    def _execute_many(self, cursor: Cursor, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """One statement for many rows (one round trip where the driver pipelines it)."""
        if not rows:
            return 0
        self.stats.count(statements=1)
        if len(rows) == 1:
            cursor.execute(self.dialect.sql(sql), tuple(rows[0]))
        else:
            cursor.executemany(self.dialect.sql(sql), [tuple(r) for r in rows])
        return int(cursor.rowcount)

    def _transaction(self, work: Callable[[Cursor], T], *, write: bool = True, tx: Any = None) -> T:
        """Run ``work(cursor)`` in one transaction, retrying it on retryable errors."""
        if tx is not None:
            return self._in_application_transaction(work, tx)
        return self._committing_transaction(lambda cursor, _commit: work(cursor), write=write)

    def _committing_transaction(
        self, work: Callable[[Cursor, Callable[[], None]], T], *, write: bool = True
    ) -> T:
        """Run ``work(cursor, commit)`` in one transaction, retrying it on retryable errors.

        ``work`` may call ``commit()`` itself, inside a pipeline, so the COMMIT
        travels with its last statements; otherwise it is committed on return.
        """
        for attempt in range(1, self._tx_attempts + 1):
            committing = False
            committed = False
            self.stats.count(transactions=1, retries=1 if attempt > 1 else 0)
            with (
                self.dialect.transaction_scope(write=write),
                self._connections.connection() as conn,
            ):
                cursor = conn.cursor()

                def commit() -> None:
                    nonlocal committing, committed
                    committing = True
                    conn.commit()
                    committed = True

                try:
                    self.dialect.begin(cursor, write=write)
                    result = work(cursor, commit)
                    if not committed:
                        commit()
                    else:
                        # Reads after an early COMMIT (immutable rows: a claim's inputs)
                        # may have opened a transaction of their own: end it.
                        conn.commit()
                    return result
                except CairnError:
                    _rollback(conn)
                    raise
                except Exception as error:
                    _rollback(conn)
                    kind = self._classify(error)
                    if kind.unique_violation:
                        raise _UniqueViolation(str(error)) from error
                    # A lost connection before COMMIT was sent rolled the work back:
                    # safe to run again. During COMMIT the outcome is unknown: report it.
                    again = kind.retryable or (kind.unavailable and not committing)
                    if again and attempt < self._tx_attempts:
                        time.sleep(random.uniform(0.002, 0.02) * attempt)
                        continue
                    if kind.unavailable:
                        raise Unavailable(
                            f"{self._info.driver} store is unavailable: {error}"
                        ) from error
                    raise
                finally:
                    _close(cursor)
        raise AssertionError("unreachable")  # pragma: no cover

    def _in_application_transaction(self, work: Callable[[Cursor], T], tx: Any) -> T:
        cursor = tx.cursor()
        try:
            return work(cursor)
        except CairnError:
            raise
        except Exception as error:
            kind = self._classify(error)
            if kind.unique_violation:
                raise _UniqueViolation(str(error)) from error
            if kind.unavailable:
                raise Unavailable(f"{self._info.driver} store is unavailable: {error}") from error
            raise
        finally:
            _close(cursor)

    def _read(self, work: Callable[[Cursor], T]) -> T:
        return self._transaction(work, write=False)

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one SELECT in its own read transaction."""

        def work(cur: Cursor) -> list[tuple[Any, ...]]:
            return list(self._execute(cur, sql, params).fetchall())

        return self._read(work)

    def _change(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one write statement in its own transaction; return the rows it changed."""

        def work(cur: Cursor) -> int:
            return int(self._execute(cur, sql, params).rowcount)

        return self._transaction(work)

    # -- schema ----------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply every migration not yet in the ledger; return their labels.

        The dialect serialises migrators across processes, and the ledger is
        read after the lock is taken, so each version is applied exactly once.
        A migrator that loses a lock race (a busy database, a deadlock) starts
        again: it re-reads the ledger and skips what the winner applied.
        """
        applied: list[str] = []
        for attempt in range(1, self._tx_attempts + 1):
            try:
                self._migrate_once(applied)
                return applied
            except Exception as error:
                if isinstance(error, CairnError) or attempt == self._tx_attempts:
                    raise
                if not self._classify(error).retryable:
                    raise
                time.sleep(random.uniform(0.01, 0.05) * attempt)
        return applied

    def _migrate_once(self, applied: list[str]) -> None:
        q = self._queries
        with self._connections.connection() as conn:
            cursor = conn.cursor()
            try:
                with self.dialect.migration_lock(cursor, self._channel):
                    self.dialect.begin_migration(cursor)
                    self.dialect.prepare_namespace(cursor, self.tables)
                    self._execute(cursor, self._ledger_ddl())
                    conn.commit()
                    for migration in self.migrations:
                        self.dialect.begin_migration(cursor)
                        ledger = {
                            row[0]: row[2] for row in self._execute(cursor, q.ledger).fetchall()
                        }
                        if migration.version in ledger:
                            self._check_checksum(migration, _text(ledger[migration.version]))
                            conn.commit()
                            continue
                        for statement in migration.statements(self.tables):
                            cursor.execute(statement)
                        self._execute(
                            cursor,
                            q.record_migration,
                            (migration.version, migration.name, migration.checksum, time.time_ns()),
                        )
                        conn.commit()
                        applied.append(migration.label)
                        log.info("applied migration %s to %s", migration.label, self._channel)
            except Exception as error:
                _rollback(conn)
                if isinstance(error, CairnError):
                    raise
                if self._classify(error).unavailable:
                    raise Unavailable(
                        f"{self._info.driver} store is unavailable: {error}"
                    ) from error
                raise
            finally:
                _close(cursor)

    def _ledger_ddl(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.tables.migrations} ("
            "version INTEGER NOT NULL PRIMARY KEY, name VARCHAR(128) NOT NULL, "
            "checksum CHAR(64) NOT NULL, applied_at BIGINT NOT NULL)"
        )

    def _check_checksum(self, migration: Migration, recorded: str) -> None:
        if recorded != migration.checksum:
            raise CairnError(
                f"migration {migration.label} was applied to {self.tables.unqualified('')}* "
                f"with checksum {recorded[:12]}..., but this release's file has "
                f"{migration.checksum[:12]}...: an applied migration must never change"
            )

    def migration_scripts(self) -> list[tuple[str, str]]:
        """Every migration as SQL a DBA can apply by hand, ledger rows included."""
        scripts = [("000_ledger", self._ledger_ddl() + ";")]
        for migration in self.migrations:
            body = ";\n".join(migration.statements(self.tables))
            record = (
                f"INSERT INTO {self.tables.migrations} (version, name, checksum, applied_at) "
                f"VALUES ({migration.version}, '{migration.name}', '{migration.checksum}', 0)"
            )
            scripts.append((migration.label, f"{body};\n{record};"))
        return scripts

    def check_schema(self) -> None:
        """Refuse to start on a schema that is missing, behind, or newer than this release."""
        q = self._queries
        try:
            rows = self._fetch(q.ledger)
        except Unavailable:
            raise
        except Exception as error:
            raise SchemaNotReady(
                f"table {self.tables.unqualified('migrations')} is not readable ({error}): the "
                f"database was never migrated; run store.migrate() or `cairn migrate URL` first"
            ) from error
        applied = {int(row[0]) for row in rows}
        known = len(self.migrations)
        newest = max(applied, default=0)
        if newest > known:
            raise SchemaTooNew(
                f"the tables {self.tables.unqualified('')}* were migrated to schema version "
                f"{newest} by a newer release; this {self._info.distribution} "
                f"{self._info.version} knows versions up to {known}: upgrade it"
            )
        missing = [m.label for m in self.migrations if m.version not in applied]
        if missing:
            raise SchemaNotReady(
                f"migration(s) {', '.join(missing)} are not applied to "
                f"{self.tables.unqualified('')}*: run store.migrate() or `cairn migrate URL` first"
            )
        for table, probe in q.probe.items():
            try:
                self._fetch(probe)
            except Unavailable:
                raise
            except Exception as error:
                raise SchemaNotReady(
                    f"table {self.tables.unqualified(table)} is not readable ({error}); run "
                    f"store.migrate() or `cairn migrate URL` first"
                ) from error

    # -- creating runs ------------------------------------------------------------------------
    def create_runs(self, runs: Sequence[NewRun], *, tx: Any | None = None) -> list[str]:
        """Insert every run with its steps in one transaction, or none of them."""
        if not runs:
            return []
        seen: set[tuple[str, str]] = set()
        for new in runs:
            if new.closure is not None:
                raise TypeError("a SQL store cannot keep a Python callable (Cap.CLOSURE)")
            if new.key is not None:
                if (new.workflow, new.key) in seen:
                    raise DuplicateRun(new.workflow, new.key)
                seen.add((new.workflow, new.key))
        run_ids = [ids.new_id(self._id_generator, "run") for _ in runs]
        run_rows = []
        step_rows = []
        for run_id, new in zip(run_ids, runs, strict=True):
            run_rows.append(
                (
                    run_id,
                    new.workflow,
                    new.queue,
                    new.priority,
                    new.payload,
                    new.key,
                    new.key,
                    json.dumps(dict(new.labels), ensure_ascii=False),
                    len(new.steps),
                    new.created_at,
                    new.run_at,
                )
            )
            for position, step in enumerate(new.steps):
                root = not step.parents
                step_rows.append(
                    (
                        ids.new_id(self._id_generator, "step"),
                        run_id,
                        new.workflow,
                        new.queue,
                        new.priority,
                        step.name,
                        step.kind.value,
                        position,
                        json.dumps(list(step.parents)),
                        json.dumps(list(step.children)),
                        len(step.parents),
                        ("ready" if new.run_at <= new.created_at else "scheduled")
                        if root
                        else "blocked",
                        new.run_at if root else None,
                    )
                )
        q = self._queries

        def work(cur: Cursor) -> list[str]:
            self.stats.count(statements=2)
            cur.executemany(self.dialect.sql(q.insert_run), run_rows)
            cur.executemany(self.dialect.sql(q.insert_step), step_rows)
            return run_ids

        try:
            return self._transaction(work, tx=tx)
        except _UniqueViolation:
            raise self._duplicate(runs) from None

    def create_runs_in(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """Insert the runs in the application's open transaction ``tx`` (never committed here)."""
        return self.create_runs(runs, tx=tx)

    def _duplicate(self, runs: Sequence[NewRun]) -> CairnError:
        by_workflow: dict[str, list[str]] = {}
        for new in runs:
            if new.key is not None:
                by_workflow.setdefault(new.workflow, []).append(new.key)
        for workflow, keys in by_workflow.items():
            sql, params = self._queries.holder_of_key(workflow, keys)
            rows = self._fetch(sql, params)
            if rows:
                run_id, key = rows[0]
                return DuplicateRun(workflow, _text(key), _text(run_id))
        if by_workflow:
            workflow, keys = next(iter(by_workflow.items()))
            return DuplicateRun(workflow, keys[0])
        return CairnError("a run id made by the id generator already exists; nothing was written")

    # -- claiming and leases --------------------------------------------------------------------
    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        """Lease the most urgent due, ready steps (see the dialect for how)."""
        if request.limit <= 0 or not request.workflows:
            return []
        return self._transaction(lambda cur: self._claim_in(cur, request))

    def _claim_in(self, cur: Cursor, request: ClaimRequest) -> list[ClaimedAttempt]:
        """The claim, inside an open transaction."""
        return self._send_claim(cur, request)()

    def _send_claim(
        self, cur: Cursor, request: ClaimRequest
    ) -> Callable[[], list[ClaimedAttempt]]:
        """Send the claim; return how to read what it leased.

        Inside a pipeline the claim's rows are read when the caller asks (after
        the block, maybe after its COMMIT); the reads they need then (runs a claim
        did not return, parents' outputs) see rows no transaction changes anymore.
        """
        if request.limit <= 0 or not request.workflows:
            return lambda: []
        secret = ids.new_token()
        q = self._queries
        plan = q.claim_plan(
            workflows=sorted(request.workflows),
            queues=sorted(request.queues) if request.queues is not None else None,
            now=request.now,
            limit=request.limit,
            claimed=(secret, request.lease_until, request.node_id, request.now),
        )
        fetch = self.dialect.send_claim(_CountingCursor(cur, self.stats), plan)
        return lambda: self._claimed(cur, secret, fetch())

    def _claimed(
        self, cur: Cursor, secret: str, rows: Sequence[ClaimedRow]
    ) -> list[ClaimedAttempt]:
        """The attempts a claim's rows describe, with their runs' payloads and their inputs."""
        if not rows:
            return []
        q = self._queries
        steps = [
            (
                _text(r[0]),
                _text(r[1]),
                _text(r[2]),
                _text(r[3]),
                int(r[4]),
                int(r[5]),
                int(r[6]),
                _json(r[7]),
            )
            for r in rows
        ]
        run_ids = sorted({s[1] for s in steps})
        runs: dict[str, tuple[Any, ...]] = {}
        if len(rows[0]) > 8:  # the claim returned the runs' columns too
            for row in rows:
                runs[_text(row[8])] = tuple(row[8:])
        for chunk in _chunks([r for r in run_ids if r not in runs]):
            sql, params = q.claim_runs(chunk)
            for row in self._execute(cur, sql, params).fetchall():
                runs[_text(row[0])] = row
        names = sorted({p for s in steps for p in s[7]})
        outputs: dict[tuple[str, str], bytes] = {}
        if names:
            for chunk in _chunks(run_ids):
                sql, params = q.claim_inputs(chunk, names)
                for run_id, name, output in self._execute(cur, sql, params).fetchall():
                    outputs[(_text(run_id), _text(name))] = _bytes(output) or b""
        claimed = []
        for step_id, run_id, name, kind, attempt, failures, reclaims, parents in steps:
            run = runs[run_id]
            claimed.append(
                ClaimedAttempt(
                    token=_token(step_id, secret),
                    run_id=run_id,
                    workflow=_text(run[1]),
                    queue=_text(run[2]),
                    step=name,
                    kind=_KINDS.get(kind) or StepKind(kind),
                    attempt=attempt,
                    failures=failures,
                    reclaims=reclaims,
                    payload=_bytes(run[3]) or b"",
                    inputs={p: outputs.get((run_id, p), b"") for p in parents},
                    labels=_json(run[4]),
                )
            )
        return claimed

    def renew(self, tokens: Collection[str], lease_until: int) -> RenewResult:
        """Extend the leases still held; report the lost and the cancelled."""
        lost: set[str] = set()
        cancelled: set[str] = set()
        held: list[tuple[str, str]] = []
        for token in tokens:
            parsed = _split_token(token)
            if parsed is None:
                lost.add(token)
            else:
                held.append(parsed)
        q = self._queries
        for chunk in _chunks(held):

            def work(cur: Cursor, chunk: Sequence[tuple[str, str]] = chunk) -> None:
                sql, params = q.renew(lease_until, chunk)
                if self._execute(cur, sql, params).rowcount == len(chunk):
                    return
                sql, params = q.lease_states([step_id for step_id, _ in chunk])
                states = {
                    _text(r[0]): (r[1], r[2]) for r in self._execute(cur, sql, params).fetchall()
                }
                for step_id, secret in chunk:
                    current, status = states.get(step_id, (None, None))
                    if current is not None and _text(current) == secret and status == "running":
                        continue
                    if current is not None and _text(current) == secret and status == "cancelled":
                        cancelled.add(_token(step_id, secret))
                    else:
                        lost.add(_token(step_id, secret))

            self._transaction(work)
        return RenewResult(frozenset(lost), frozenset(cancelled))

    def _attempt_state(self, cur: Cursor, step_id: str, secret: str) -> AttemptState:
        row = self._execute(cur, self._queries.lease_state, (step_id,)).fetchone()
        if row is not None and row[1] is not None and _text(row[1]) == secret:
            if row[0] == "running":
                return AttemptState.HELD
            if row[0] == "cancelled":
                return AttemptState.CANCELLED
        return AttemptState.LOST

    def _fenced(self, token: str, sql: str, values: Sequence[Any]) -> AttemptState:
        parsed = _split_token(token)
        if parsed is None:
            return AttemptState.LOST
        step_id, secret = parsed

        def work(cur: Cursor) -> AttemptState:
            if self._execute(cur, sql, (*values, step_id, secret)).rowcount == 1:
                return AttemptState.HELD
            return self._attempt_state(cur, step_id, secret)

        return self._transaction(work)

    def heartbeat(self, token: str, lease_until: int, now: int) -> AttemptState:
        """Renew one lease and record the heartbeat (fenced)."""
        return self._fenced(token, self._queries.heartbeat, (lease_until, now))

    def record_progress(self, token: str, progress: bytes, now: int) -> AttemptState:
        """Store the step's progress (fenced)."""
        return self._fenced(token, self._queries.progress, (progress, now))

    def hand_back(self, tokens: Collection[str], now: int) -> int:
        """Make held attempts ready again at once (fenced)."""
        held = [p for p in (_split_token(t) for t in tokens) if p is not None]
        count = 0
        for chunk in _chunks(held):
            sql, params = self._queries.hand_back(now, chunk)
            count += self._change(sql, params)
        return count

    def reclaim_expired(
        self,
        *,
        lease_now: int,
        now: int,
        workflows: Collection[str],
        max_reclaims: int,
        limit: int,
    ) -> ReclaimResult:
        """Requeue expired attempts (guarded like any fenced write); return the abandoned."""
        if not workflows or limit <= 0:
            return ReclaimResult()
        q = self._queries
        sql, params = q.expired(lease_now, sorted(workflows), limit)
        rows = self._fetch(sql, params)
        requeued = 0
        abandoned: list[ExpiredAttempt] = []
        for raw_id, run_id, workflow, name, attempt, failures, reclaims, raw_secret in rows:
            if raw_secret is None:
                continue
            step_id, secret = _text(raw_id), _text(raw_secret)
            if int(reclaims) >= max_reclaims:
                abandoned.append(
                    ExpiredAttempt(
                        token=_token(step_id, secret),
                        run_id=_text(run_id),
                        workflow=_text(workflow),
                        step=_text(name),
                        attempt=int(attempt),
                        failures=int(failures),
                        reclaims=int(reclaims),
                    )
                )
                continue
            values = (now, step_id, secret, lease_now)
            requeued += self._change(q.requeue_expired, values)
        return ReclaimResult(requeued, tuple(abandoned))

    # -- outcomes ----------------------------------------------------------------------------------
    def finish(self, token: str, outcome: Outcome, now: int) -> FinishResult:
        """Apply ``outcome`` to the attempt ``token`` holds, or change nothing."""
        return self.finish_many([(token, outcome)], now)[0]

    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        """Apply several outcomes in one transaction, each fenced by its own token.

        The runs are locked in the order of their ids, so two batches that
        share runs lock them in the same order and cannot deadlock.
        """
        return self.finish_and_claim(items, now, None)[0]

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        """:meth:`finish_many`, then :meth:`claim` for the slots it freed, in one transaction."""
        if not items and claim is None:
            return [], []

        def work(
            cur: Cursor, commit: Callable[[], None], batched: bool
        ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
            results, tally = self._finish_in(cur, items, now, batched=batched)
            # The run writes the outcomes owe, the claim and the COMMIT go out together
            # where the engine pipelines: one round trip. The claim's rows are read after.
            with self.dialect.pipeline(cur) as cursor:
                tally.flush(self, cursor(), now)
                claiming = self._send_claim(cursor(), claim) if claim is not None else None
                if self.dialect.pipelines:
                    commit()
            return results, claiming() if claiming is not None else []

        try:
            return self._committing_transaction(lambda cur, commit: work(cur, commit, True))
        except _Redo:
            # Some attempt of the batch had lost its lease: nothing was written; go one by one.
            return self._committing_transaction(lambda cur, commit: work(cur, commit, False))

    def _finish_in(
        self, cur: Cursor, items: Sequence[tuple[str, Outcome]], now: int, *, batched: bool
    ) -> tuple[list[FinishResult], _RunTally]:
        """Apply ``items``; the run writes they owe are left in the tally, to flush."""
        results: list[FinishResult] = [FinishResult(AttemptState.LOST)] * len(items)
        tally = _RunTally()
        parsed: list[tuple[int, str, str]] = []
        for index, (token, _outcome) in enumerate(items):
            split = _split_token(token)
            if split is not None:
                parsed.append((index, *split))
        if not parsed:
            return results, tally
        q = self._queries
        found: dict[str, tuple[str, list[str]]] = {}
        # Where the engine can, one statement reads every step and locks their runs in
        # id order; otherwise the steps are read, then their runs locked by one statement
        # on the runs table alone, in id order too.
        joined = self.dialect.lock_runs_joined is not None
        plain = [p for p in parsed if type(items[p[0]][1]) is Succeeded]
        batch = batched and len(plain) > 1
        # An engine that pipelines sends the successes right behind the locking read
        # (the server runs them in that order: runs locked first), in one round trip.
        early = batch and joined and self.dialect.pipelines
        written: Callable[[], int] | None = None
        chunks = list(_chunks(sorted({step_id for _, step_id, _ in parsed})))

        def read(chunk: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
            return q.steps_with_runs(chunk) if joined else q.steps_of(chunk)

        if early:
            with self.dialect.pipeline(cur) as cursor:
                pending = [self._execute(cursor(), *read(chunk)) for chunk in chunks]
                written = self._send_successes(cursor, items, plain, now)
                rows = [row for statement in pending for row in statement.fetchall()]
        else:
            rows = [row for chunk in chunks for row in self._execute(cur, *read(chunk)).fetchall()]
        for row in rows:
            found[_text(row[0])] = (_text(row[1]), _json(row[2]))
            if joined:
                tally.left[_text(row[1])] = int(row[3])
        order = sorted((p for p in parsed if p[1] in found), key=lambda p: (found[p[1]][0], p[1]))
        unlocked = sorted({found[step_id][0] for _, step_id, _ in order} - tally.left.keys())
        for chunk in _chunks(unlocked):  # ascending chunks of ascending ids: one lock order
            for run_id, steps_left in self._execute(cur, *q.lock_runs(chunk)).fetchall():
                tally.left[_text(run_id)] = int(steps_left)
        for run_id in unlocked:
            tally.left.setdefault(run_id, 0)
        if batch:
            # The common case, in one statement: every success still holds its lease.
            if written is None:
                written = self._send_successes(lambda: cur, items, plain, now)
            if written() != len(plain):
                raise _Redo("a lease of the batch was lost")
            for index, step_id, _secret in plain:
                run_id, children = found[step_id]
                results[index] = self._succeeded(cur, run_id, children, tally, now)
            done = {p[0] for p in plain}
            order = [p for p in order if p[0] not in done]
        for index, step_id, secret in order:
            run_id, children = found[step_id]
            outcome = items[index][1]
            results[index] = self._apply(
                cur, step_id, secret, run_id, children, outcome, now, tally
            )
        return results, tally

    def _send_successes(
        self,
        cursor: Callable[[], Cursor],
        items: Sequence[tuple[str, Outcome]],
        plain: Sequence[tuple[int, str, str]],
        now: int,
    ) -> Callable[[], int]:
        """Write the successes ``plain`` (item index, step id, secret).

        Returns how to count the leases that held, to call once the statements'
        results are in (after the pipeline, where there is one).
        """
        q = self._queries
        rows = [
            (step_id, secret, cast(Succeeded, items[i][1]).output) for i, step_id, secret in plain
        ]
        if not self.dialect.batch_statements:
            single = [(output, now, step_id, secret) for step_id, secret, output in rows]
            count = self._execute_many(cursor(), q.succeed, single)
            return lambda: count
        sent = [
            self._execute(cursor(), *q.succeed_many(now, chunk))
            for chunk in _chunks(rows, _BATCH_ROWS)
        ]
        return lambda: sum(int(statement.rowcount) for statement in sent)

    def _apply(
        self,
        cur: Cursor,
        step_id: str,
        secret: str,
        run_id: str,
        children: Sequence[str],
        outcome: Outcome,
        now: int,
        tally: _RunTally,
    ) -> FinishResult:
        """One fenced outcome inside an open transaction whose run row is locked.

        ``tally`` holds the runs' steps left, read under that lock, and the run
        writes owed, so several outcomes of one run in a batch count right.
        """
        q = self._queries

        def fenced(sql: str, *values: Any) -> bool:
            return bool(self._execute(cur, sql, (*values, step_id, secret)).rowcount == 1)

        def lost() -> FinishResult:
            return FinishResult(self._attempt_state(cur, step_id, secret))

        if isinstance(outcome, Succeeded):
            if not fenced(q.succeed, outcome.output, now):
                return lost()
            return self._succeeded(cur, run_id, children, tally, now)
        if isinstance(outcome, Failed):
            error = outcome.error.to_json()
            if outcome.retry_at is not None:
                status = _due_status(outcome.retry_at, now)
                if not fenced(q.retry, status, outcome.retry_at, error):
                    return lost()
                return FinishResult(AttemptState.HELD, ready=1)
            if not fenced(q.fail, error, now):
                return lost()
            self._end_run(cur, run_id, Status.FAILED.value, error, now)
            return FinishResult(AttemptState.HELD, run_status=Status.FAILED)
        if isinstance(outcome, Snoozed):
            if not fenced(q.snooze, _due_status(outcome.until, now), outcome.until):
                return lost()
            return FinishResult(AttemptState.HELD, ready=1)
        if isinstance(outcome, SleepUntil):
            if not fenced(q.sleep, outcome.until, outcome.output):
                return lost()
            return FinishResult(AttemptState.HELD)
        if isinstance(outcome, WaitFor):
            stored = self._execute(cur, q.oldest_signal, (run_id, outcome.signal)).fetchone()
            if stored is not None:
                if not fenced(q.succeed, _bytes(stored[1]), now):
                    return lost()
                self._execute(cur, q.consume_signal, (stored[0],))
                return self._succeeded(cur, run_id, children, tally, now)
            if not fenced(q.wait, outcome.deadline, outcome.signal):
                return lost()
            return FinishResult(AttemptState.HELD)
        raise TypeError(f"unknown outcome {outcome!r}")

    def _succeeded(
        self, cur: Cursor, run_id: str, children: Sequence[str], tally: _RunTally, now: int
    ) -> FinishResult:
        """After a step succeeded (run row locked): release its children, count it.

        The run's own row is written when ``tally`` is flushed.
        """
        q = self._queries
        ready = 0
        if children:
            sql, params = q.release_children(run_id, children)
            self._execute(cur, sql, params)
            sql, params = q.ready_children(now, run_id, children)
            ready = int(self._execute(cur, sql, params).rowcount)
        if tally.succeeded(run_id):
            # The last step: every step succeeded, so there is nothing left to cancel.
            if not ready:
                return _RUN_SUCCEEDED
            return FinishResult(AttemptState.HELD, ready=ready, run_status=Status.SUCCEEDED)
        return FinishResult(AttemptState.HELD, ready=ready) if ready else _HELD

    def _end_run(self, cur: Cursor, run_id: str, state: str, error: str | None, now: int) -> None:
        """Finish the run (row locked), release its key, cancel its unfinished steps."""
        q = self._queries
        self._execute(cur, q.end_run, (state, now, error, run_id))
        unfinished = [
            _text(r[0]) for r in self._execute(cur, q.unfinished_steps, (run_id,)).fetchall()
        ]
        for chunk in _chunks(unfinished):
            sql, params = q.cancel_steps(now, chunk)
            self._execute(cur, sql, params)
        self._execute(cur, q.drop_signals, (run_id,))

    def advance_due(self, *, now: int, workflows: Collection[str], limit: int) -> AdvanceResult:
        """Promote due scheduled steps; end due sleeps and fail overdue waits (one run each)."""
        if not workflows or limit <= 0:
            return AdvanceResult()
        q = self._queries
        sql, params = q.due(now, sorted(workflows), limit)
        rows = self._fetch(sql, params)
        woken = timed_out = promoted = 0
        # Scheduled steps that fell due become ready; no run state changes, so no run lock.
        scheduled = [_text(r[0]) for r in rows if r[2] == "scheduled"]
        for chunk in _chunks(scheduled):
            promoted += self._change(*q.promote(chunk))
        for raw_id, _run_id, status in rows:
            if status == "scheduled":
                continue

            def work(cur: Cursor, step_id: str = _text(raw_id), status: str = status) -> int:
                row = self._execute(cur, q.step_of, (step_id,)).fetchone()
                if row is None:
                    return 0
                run_id, children = _text(row[0]), json.loads(row[1])
                locked = self._execute(cur, q.lock_run, (run_id,)).fetchone()
                tally = _RunTally.of(run_id, int(locked[1]) if locked is not None else 0)
                if status == "sleeping":
                    if self._execute(cur, q.wake_sleeper, (now, step_id, now)).rowcount != 1:
                        return 0
                    self._succeeded(cur, run_id, children, tally, now)
                    tally.flush(self, cur, now)
                    return 1
                signal, attempt, name = self._execute(cur, q.step_signal, (step_id,)).fetchone()
                error = ErrorInfo(
                    type=StepTimeout.__name__,
                    message=f"no signal {_text(signal)!r} arrived before the wait's deadline",
                    step=_text(name),
                    attempt=int(attempt),
                ).to_json()
                if self._execute(cur, q.time_out_wait, (error, now, step_id, now)).rowcount != 1:
                    return 0
                self._end_run(cur, run_id, Status.FAILED.value, error, now)
                return 1

            done = self._transaction(work)
            if status == "sleeping":
                woken += done
            else:
                timed_out += done
        return AdvanceResult(woken, timed_out, promoted)

    def send_signal(self, run_id: str, name: str, payload: bytes, now: int) -> SignalResult:
        """Resolve the first step waiting for ``name``, or keep the signal (run row locked)."""
        q = self._queries

        def work(cur: Cursor) -> SignalResult:
            locked = self._execute(cur, q.lock_run, (run_id,)).fetchone()
            if locked is None:
                raise RunNotFound(run_id)
            if locked[0] != ACTIVE:
                return SignalResult.RUN_FINISHED
            waiting = self._execute(cur, q.waiting_for, (run_id, name)).fetchone()
            if waiting is not None:
                step_id, children = _text(waiting[0]), json.loads(waiting[1])
                if self._execute(cur, q.resolve_wait, (payload, now, step_id)).rowcount == 1:
                    tally = _RunTally.of(run_id, int(locked[1]))
                    self._succeeded(cur, run_id, children, tally, now)
                    tally.flush(self, cur, now)
                    return SignalResult.DELIVERED
            self._execute(cur, q.insert_signal, (run_id, name, payload, now))
            return SignalResult.STORED

        return self._transaction(work)

    def cancel_run(self, run_id: str, now: int) -> bool:
        """Cancel an unfinished run and its unfinished steps (run row locked)."""
        q = self._queries

        def work(cur: Cursor) -> bool:
            locked = self._execute(cur, q.lock_run, (run_id,)).fetchone()
            if locked is None:
                raise RunNotFound(run_id)
            if locked[0] != ACTIVE:
                return False
            self._end_run(cur, run_id, Status.CANCELLED.value, None, now)
            return True

        return self._transaction(work)

    # -- reading ---------------------------------------------------------------------------
    def get_run(self, run_id: str) -> StoredRun | None:
        """The run and its steps, read in one transaction."""
        q = self._queries

        def work(cur: Cursor) -> StoredRun | None:
            row = self._execute(cur, q.get_run, (run_id,)).fetchone()
            if row is None:
                return None
            steps = self._execute(cur, q.get_steps, (run_id,)).fetchall()
            return StoredRun(
                id=_text(row[1]),
                workflow=_text(row[2]),
                queue=_text(row[3]),
                state=_text(row[4]),
                payload=_bytes(row[5]) or b"",
                key=None if row[6] is None else _text(row[6]),
                labels=json.loads(row[7]),
                created_at=int(row[8]),
                run_at=int(row[9]),
                finished_at=None if row[10] is None else int(row[10]),
                error=_error(row[11]),
                steps=tuple(_stored_step(s) for s in steps),
            )

        return self._read(work)

    def list_runs(self, query: RunQuery) -> RunPage:
        """Newest first by insertion; labels are matched in Python after the SQL read."""
        try:
            before = int(query.cursor) if query.cursor else None
        except ValueError:
            raise CairnError(f"invalid run cursor {query.cursor!r}") from None
        q = self._queries
        states = sorted(query.states) if query.states is not None else None
        fetch = query.limit + 1 if not query.labels else max(query.limit + 1, 200)
        matched: list[tuple[Any, ...]] = []
        while len(matched) <= query.limit:
            sql, params = q.list_runs(
                workflow=query.workflow, states=states, before_seq=before, limit=fetch
            )
            batch = self._fetch(sql, params)
            for row in batch:
                before = int(row[0])
                labels = json.loads(row[7])
                if all(labels.get(k) == v for k, v in query.labels.items()):
                    matched.append(row)
                    if len(matched) > query.limit:
                        break
            if len(batch) < fetch:
                break
        page = matched[: query.limit]
        counts: dict[str, Counter[StepStatus]] = {_text(r[1]): Counter() for r in page}
        for chunk in _chunks(list(counts)):
            sql, params = q.step_counts(chunk)
            for run_id, status, count in self._fetch(sql, params):
                counts[_text(run_id)][StepStatus(_text(status))] += int(count)
        runs = tuple(
            RunSummary(
                id=_text(r[1]),
                workflow=_text(r[2]),
                queue=_text(r[3]),
                state=_text(r[4]),
                key=None if r[6] is None else _text(r[6]),
                labels=_json(r[7]),
                created_at=int(r[8]),
                run_at=int(r[9]),
                finished_at=None if r[10] is None else int(r[10]),
                error=_error(r[11]),
                step_counts=counts[_text(r[1])],
            )
            for r in page
        )
        cursor = str(int(page[-1][0])) if len(matched) > query.limit and page else None
        return RunPage(runs, cursor)

    def drop_tables(self) -> None:
        """Drop every table of this namespace, the ledger included. Irreversible.

        For test suites on shared servers and for uninstalling; nothing else
        in cairnflow ever drops a table.
        """
        with self._connections.connection() as conn:
            cursor = conn.cursor()
            try:
                for table in ("signals", "steps", "runs", "migrations"):
                    self.dialect.begin_migration(cursor)
                    cursor.execute(f"DROP TABLE IF EXISTS {getattr(self.tables, table)}")
                    conn.commit()
            except Exception:
                _rollback(conn)
                raise
            finally:
                _close(cursor)

    def database_now(self) -> int:
        """The server's time in Unix nanoseconds (``Cap.DATABASE_CLOCK``)."""
        if self.dialect.now_sql is None:
            raise CairnError(f"the {self.dialect.name} dialect cannot read the server's clock")
        rows = self._fetch(self.dialect.now_sql)
        return int(rows[0][0])

    def table_names(self) -> list[str]:
        """The bare names of this namespace's tables."""
        return [self.tables.unqualified(t) for t in TABLES]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._info.url} prefix={self.tables.prefix!r}>"


def _due_status(due_at: int, now: int) -> str:
    """``ready`` when due by ``now``, ``scheduled`` otherwise (kept out of the claim's index)."""
    return "scheduled" if due_at > now else "ready"


def _stored_step(row: Sequence[Any]) -> StoredStep:
    return StoredStep(
        name=_text(row[0]),
        kind=StepKind(_text(row[1])),
        status=StepStatus(_text(row[2])),
        parents=tuple(json.loads(row[3])),
        attempt=int(row[4]),
        failures=int(row[5]),
        reclaims=int(row[6]),
        output=_bytes(row[7]),
        error=_error(row[8]),
        node=None if row[9] is None else _text(row[9]),
        progress=_bytes(row[10]),
        signal=None if row[11] is None else _text(row[11]),
        due_at=None if row[12] is None else int(row[12]),
        started_at=None if row[13] is None else int(row[13]),
        finished_at=None if row[14] is None else int(row[14]),
        heartbeat_at=None if row[15] is None else int(row[15]),
    )


class _CountingCursor:
    """A cursor that counts the statements a dialect runs on it."""

    def __init__(self, cursor: Cursor, stats: StoreStats) -> None:
        self._cursor = cursor
        self._stats = stats

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self._stats.count(statements=1)
        return self._cursor.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def _rollback(conn: Any) -> None:
    try:
        conn.rollback()
    except Exception:
        log.debug("rollback failed", exc_info=True)


def _close(cursor: Any) -> None:
    try:
        cursor.close()
    except Exception:
        log.debug("closing a cursor failed", exc_info=True)
