"""``litestore://``: a cairnflow store on one SQLite file, shared by many processes.

Every SPI operation is one SQLite transaction. Writes start with
``BEGIN IMMEDIATE``, which takes the file's single write lock up front (a
deferred transaction that later upgrades to a write would fail at once with
SQLITE_BUSY instead of waiting), so no transition ever reads, lets another
writer in, and then decides. Reads run in a deferred transaction, a consistent
snapshot under WAL. One connection per store object, guarded by a lock, serves
all of a client's threads; other store objects and processes open their own.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import cairnflow as cf
from cairnflow import Cap, ErrorInfo, StepKind, StepStatus, ids
from cairnflow.notify import LOCAL, Notifier
from cairnflow.store import (
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
    cursor_position,
    landed,
    run_cursor,
    run_matches,
)

from ._schema import LATEST_SCHEMA, MIGRATIONS, meta_table
from ._version import __version__

__all__ = ["LATEST_SCHEMA", "LiteStore"]

_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_UNFINISHED = ("blocked", "scheduled", "ready", "running", "sleeping", "waiting")
_STEP_COLUMNS = (
    "name, kind, status, parents, attempt, failures, reclaims, output, error, node, progress, "
    "signal, due_at, started_at, finished_at, heartbeat_at"
)


def _marks(values: Collection[Any]) -> str:
    return ", ".join("?" * len(values))


def _due_status(due_at: int, now: int) -> str:
    """A claimable step is ``ready`` once due, ``scheduled`` until then (out of the claim's way)."""
    return "scheduled" if due_at > now else "ready"


def _root_status(parents: Sequence[str], run_at: int, created_at: int) -> str:
    return "blocked" if parents else _due_status(run_at, created_at)


def _error(text: str | None) -> ErrorInfo | None:
    return None if text is None else ErrorInfo.from_json(text)


class LiteStore:
    """A durable store on one SQLite file; several processes may share it.

    ``table_prefix`` (default ``lite_``) separates independent stores in one
    file. ``busy_timeout`` is how long a transaction waits for the write lock.
    """

    capabilities = frozenset(
        {
            Cap.DURABLE,
            Cap.MULTI_PROCESS,
            Cap.LEASE,
            Cap.RESULT,
            Cap.RUN_QUERY,
            Cap.NODE_IDENTITY,
            Cap.RETRY,
            Cap.STEP_TIMEOUT,
            Cap.SNOOZE,
            Cap.SLEEP,
            Cap.SIGNAL,
            Cap.IDEMPOTENCY,
            Cap.DELAYED_START,
            Cap.BATCH_ENQUEUE,
            Cap.PAYLOAD_LIMIT,
            Cap.HEARTBEAT,
            Cap.PROGRESS,
        }
    )
    """What the conformance kit proves on this store. Not CANCEL (a design choice of
    this example: the client refuses ``cancel()``), not CLOSURE (a Python callable
    cannot be stored in a row), not TRANSACTIONAL_ENQUEUE."""

    spi_version = cf.SPI_VERSION

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table_prefix: str = "lite_",
        busy_timeout: float = 30.0,
    ) -> None:
        if not isinstance(table_prefix, str) or not _PREFIX.fullmatch(table_prefix):
            raise cf.InvalidName(
                f"invalid table_prefix {table_prefix!r}: it must match {_PREFIX.pattern}"
            )
        text = os.fspath(path)
        if not text or text == ":memory:":
            raise ValueError(
                "litestore needs a file: a :memory: database is neither durable nor shared"
            )
        self._path = str(Path(text).absolute())
        self._prefix = table_prefix
        self._lock = threading.RLock()
        self._db: sqlite3.Connection | None = sqlite3.connect(
            self._path,
            timeout=float(busy_timeout),
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # one connection, serialised by self._lock
        )
        self._wal()
        self._db.execute("PRAGMA synchronous = NORMAL")

    @classmethod
    def from_url(cls, url: str, **options: Any) -> LiteStore:
        """Open ``litestore:///absolute/path.db`` or ``litestore://relative/path.db``."""
        scheme, sep, rest = url.partition("://")
        if scheme.lower() != "litestore" or not sep or not rest:
            raise ValueError(
                f"a litestore URL looks like litestore:///path/to/file.db, got {url!r}"
            )
        if "busy_timeout" in options:
            options["busy_timeout"] = float(options["busy_timeout"])
        return cls(rest, **options)

    def _wal(self) -> None:
        # WAL lets readers run beside the one writer. Switching modes needs a
        # moment alone with the file, so a busy file is retried, not fatal.
        for _ in range(50):
            try:
                self._conn().execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError:
                threading.Event().wait(0.1)
        self._conn().execute("PRAGMA journal_mode = WAL")

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise cf.Unavailable("this litestore store was closed")
        return self._db

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._conn()
            if db.in_transaction:
                # A call cut short between BEGIN and its handler (an interrupt the
                # engine raised in a step's thread) left one open: drop it.
                db.execute("ROLLBACK")
            db.execute(begin)
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction: the file's write lock from the first statement on."""
        return self._transaction("BEGIN IMMEDIATE")

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A read transaction: one consistent snapshot."""
        return self._transaction("BEGIN")

    def _t(self, name: str) -> str:
        return f'"{self._prefix}{name}"'

    # -- lifecycle ---------------------------------------------------------------------------
    def describe(self) -> StoreInfo:
        """This driver, its version, the file and the SQLite library it runs on."""
        return StoreInfo(
            driver="litestore",
            distribution="cairnflow-litestore",
            version=__version__,
            url=f"litestore://{self._path}",
            durable=True,
            server=f"SQLite {sqlite3.sqlite_version}",
        )

    @property
    def channel(self) -> str:
        """One channel per file and prefix."""
        return f"litestore:{self._path}:{self._prefix}"

    def default_notifier(self) -> Notifier | None:
        """The in-process bus; other processes find work by polling."""
        return LOCAL

    def migrate(self) -> list[str]:
        """Apply the missing schema versions under the write lock; return them."""
        applied: list[str] = []
        with self._write() as db:
            # The ledger is read after taking the lock: two first-time
            # migrators never both apply version 1.
            db.execute(meta_table(self._prefix))
            row = self._schema_version(db)
            current = int(row[0]) if row else 0
            for version, statements in MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements(self._prefix):
                    db.execute(statement)
                applied.append(str(version))
                current = version
            if applied:
                db.execute(
                    f"INSERT INTO {self._t('meta')} (name, value) VALUES ('schema', ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    (str(current),),
                )
        return applied

    def _schema_version(self, db: sqlite3.Connection) -> Any:
        return db.execute(f"SELECT value FROM {self._t('meta')} WHERE name = 'schema'").fetchone()

    def check_schema(self) -> None:
        """Raise SchemaNotReady (or SchemaTooNew) unless the schema is the current one."""
        with self._read() as db:
            table = f"{self._prefix}meta"
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            if found is None:
                raise cf.SchemaNotReady(
                    f"table {table} is missing from {self._path}: the litestore schema was never "
                    f"migrated; run store.migrate() (or `cairn migrate`) first"
                )
            row = self._schema_version(db)
        version = int(row[0]) if row else 0
        if version > LATEST_SCHEMA:
            raise cf.SchemaTooNew(
                f"{self._path} was migrated to litestore schema {version} by a newer release; "
                f"this cairnflow-litestore {__version__} knows schema {LATEST_SCHEMA}"
            )
        if version < LATEST_SCHEMA:
            raise cf.SchemaNotReady(
                f"{self._path} has litestore schema {version}, this release needs "
                f"{LATEST_SCHEMA}: run store.migrate() first"
            )

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- writing runs --------------------------------------------------------------------------
    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:
        """Create every run with its steps in one transaction, or none.

        The ids are the client's. A unique index refusing the write is either
        a key held by another run (DuplicateRun) or the client's retry of a
        write that landed though its caller never heard back: then every id
        exists, and they are returned with nothing written (read only after
        the refusal, in a transaction of its own).
        """
        if any(run.closure is not None for run in runs):
            raise NotImplementedError("litestore does not declare CLOSURE")
        seen: set[tuple[str, str]] = set()
        for new in runs:
            if new.key is not None:
                if (new.workflow, new.key) in seen:
                    raise cf.DuplicateRun(new.workflow, new.key)
                seen.add((new.workflow, new.key))
        try:
            with self._write() as db:
                for new in runs:
                    self._insert(db, new)
        except sqlite3.IntegrityError:
            with self._read() as db:
                found = landed(runs, self._workflows_of(db, [new.id for new in runs]))
                if found is not None:
                    return found
                raise self._duplicate(db, runs) from None
        return [new.id for new in runs]

    def _workflows_of(self, db: sqlite3.Connection, run_ids: list[str]) -> dict[str, str]:
        """The workflow of each of ``run_ids`` that exists."""
        found: dict[str, str] = {}
        for start in range(0, len(run_ids), 500):  # well under SQLite's bound-values limit
            chunk = run_ids[start : start + 500]
            rows = db.execute(
                f"SELECT id, workflow FROM {self._t('runs')} WHERE id IN ({_marks(chunk)})", chunk
            )
            found.update((run_id, workflow) for run_id, workflow in rows)
        return found

    def _duplicate(self, db: sqlite3.Connection, runs: Sequence[NewRun]) -> cf.CairnError:
        """The DuplicateRun naming who holds a key of ``runs`` (the partial index refused it).

        Read after the refusal: a holder that finished meanwhile is not named.
        """
        keyed = [new for new in runs if new.key is not None]
        for new in keyed:
            holder = db.execute(
                f"SELECT id FROM {self._t('runs')} WHERE workflow = ? AND idem_key = ? "
                "AND state = ?",
                (new.workflow, new.key, ACTIVE),
            ).fetchone()
            if holder is not None:
                return cf.DuplicateRun(new.workflow, str(new.key), holder[0])
        if keyed:
            return cf.DuplicateRun(keyed[0].workflow, str(keyed[0].key))
        return cf.CairnError("a run id given to create_runs collided with a stored one")

    def _insert(self, db: sqlite3.Connection, new: NewRun) -> None:
        db.execute(
            f"INSERT INTO {self._t('runs')} (id, workflow, queue, priority, payload, idem_key, "
            "labels, created_at, run_at, state, steps_left) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                new.id,
                new.workflow,
                new.queue,
                new.priority,
                new.payload,
                new.key,
                json.dumps(dict(new.labels), sort_keys=True),
                new.created_at,
                new.run_at,
                ACTIVE,
                len(new.steps),
            ),
        )
        db.executemany(
            f"INSERT INTO {self._t('steps')} (run_id, name, position, kind, workflow, queue, "
            "priority, parents, children, parents_left, status, due_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    new.id,
                    step.name,
                    position,
                    step.kind.value,
                    new.workflow,
                    new.queue,
                    new.priority,
                    json.dumps(list(step.parents)),
                    json.dumps(list(step.children)),
                    len(step.parents),
                    _root_status(step.parents, new.run_at, new.created_at),
                    None if step.parents else new.run_at,
                )
                for position, step in enumerate(new.steps)
            ],
        )

    # -- claiming and leases -------------------------------------------------------------------
    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        """Lease the most urgent due, ready steps of the given workflows."""
        with self._write() as db:
            return self._claim(db, request)

    def _claim(self, db: sqlite3.Connection, request: ClaimRequest) -> list[ClaimedAttempt]:
        if not request.workflows or request.limit <= 0:
            return []
        workflows = sorted(request.workflows)
        where = f"status = 'ready' AND due_at <= ? AND workflow IN ({_marks(workflows)})"
        params: list[Any] = [request.now, *workflows]
        # No Cap.QUEUE: the request's queues are honoured by name, not each queue's limit
        # or order (a client of this store serves its workflows' queues, one pool).
        queues = sorted({queue.name for queue in request.queues})
        if not queues:
            return []
        where += f" AND queue IN ({_marks(queues)})"
        params += queues
        claimed: list[ClaimedAttempt] = []
        rows = db.execute(
            f"SELECT seq FROM {self._t('steps')} WHERE {where} "
            "ORDER BY priority DESC, due_at, seq LIMIT ?",
            [*params, request.limit],
        ).fetchall()
        for (seq,) in rows:
            token = ids.new_token()
            db.execute(
                f"UPDATE {self._t('steps')} SET status = 'running', attempt = attempt + 1, "
                "token = ?, lease_until = ?, node = ?, started_at = ? WHERE seq = ?",
                (token, request.lease_until, request.node_id, request.now, seq),
            )
            claimed.append(self._claimed(db, seq, token))
        return claimed

    def _claimed(self, db: sqlite3.Connection, seq: int, token: str) -> ClaimedAttempt:
        step = db.execute(
            f"SELECT s.run_id, s.workflow, s.queue, s.name, s.kind, s.attempt, s.failures, "
            f"s.reclaims, s.parents, r.payload, r.labels FROM {self._t('steps')} s "
            f"JOIN {self._t('runs')} r ON r.id = s.run_id WHERE s.seq = ?",
            (seq,),
        ).fetchone()
        (run_id, workflow, queue, name, kind, attempt, failures, reclaims) = step[:8]
        parents, payload, labels = step[8:]
        parent_names: list[str] = json.loads(parents)
        inputs: dict[str, bytes] = {}
        if parent_names:
            for parent, output in db.execute(
                f"SELECT name, output FROM {self._t('steps')} WHERE run_id = ? "
                f"AND name IN ({_marks(parent_names)})",
                [run_id, *parent_names],
            ):
                inputs[parent] = output if output is not None else b""
        return ClaimedAttempt(
            token=token,
            run_id=run_id,
            workflow=workflow,
            queue=queue,
            step=name,
            kind=StepKind(kind),
            attempt=attempt,
            failures=failures,
            reclaims=reclaims,
            payload=payload,
            inputs={p: inputs.get(p, b"") for p in parent_names},
            labels=json.loads(labels),
        )

    def _held(self, db: sqlite3.Connection, token: str) -> tuple[Any, AttemptState]:
        """The row ``token`` holds (seq, run_id, children) and the token's state."""
        row = db.execute(
            f"SELECT seq, run_id, children, status FROM {self._t('steps')} WHERE token = ?",
            (token,),
        ).fetchone()
        if row is None:
            return None, AttemptState.LOST
        if row[3] == "running":
            return row, AttemptState.HELD
        if row[3] == "cancelled":
            return None, AttemptState.CANCELLED
        return None, AttemptState.LOST

    def _state_of(self, db: sqlite3.Connection, token: str) -> AttemptState:
        row = db.execute(
            f"SELECT status FROM {self._t('steps')} WHERE token = ?", (token,)
        ).fetchone()
        if row is not None and row[0] == "cancelled":
            return AttemptState.CANCELLED
        return AttemptState.LOST

    def renew(self, tokens: Collection[str], lease_until: int) -> RenewResult:
        """Extend every lease still held; report the others."""
        lost: set[str] = set()
        cancelled: set[str] = set()
        with self._write() as db:
            for token in tokens:
                changed = db.execute(
                    f"UPDATE {self._t('steps')} SET lease_until = ? "
                    "WHERE token = ? AND status = 'running'",
                    (lease_until, token),
                ).rowcount
                if changed:
                    continue
                if self._state_of(db, token) is AttemptState.CANCELLED:
                    cancelled.add(token)
                else:
                    lost.add(token)
        return RenewResult(frozenset(lost), frozenset(cancelled))

    def heartbeat(self, token: str, lease_until: int, now: int) -> AttemptState:
        """Renew one lease and record the heartbeat time (fenced)."""
        with self._write() as db:
            changed = db.execute(
                f"UPDATE {self._t('steps')} SET lease_until = ?, heartbeat_at = ? "
                "WHERE token = ? AND status = 'running'",
                (lease_until, now, token),
            ).rowcount
            return AttemptState.HELD if changed else self._state_of(db, token)

    def record_progress(self, token: str, progress: bytes, now: int) -> AttemptState:
        """Store the step's progress (fenced)."""
        with self._write() as db:
            changed = db.execute(
                f"UPDATE {self._t('steps')} SET progress = ?, heartbeat_at = ? "
                "WHERE token = ? AND status = 'running'",
                (progress, now, token),
            ).rowcount
            return AttemptState.HELD if changed else self._state_of(db, token)

    def hand_back(self, tokens: Collection[str], now: int) -> int:
        """Make the attempts the tokens still hold ready again at once."""
        count = 0
        with self._write() as db:
            for token in tokens:
                count += db.execute(
                    f"UPDATE {self._t('steps')} SET status = 'ready', due_at = ?, token = NULL, "
                    "lease_until = NULL WHERE token = ? AND status = 'running'",
                    (now, token),
                ).rowcount
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
        """Requeue expired attempts; return those reclaimed too often, untouched."""
        if not workflows or limit <= 0:
            return ReclaimResult()
        names = sorted(workflows)
        requeued = 0
        abandoned: list[ExpiredAttempt] = []
        with self._write() as db:
            rows = db.execute(
                f"SELECT seq, token, run_id, workflow, name, attempt, failures, reclaims "
                f"FROM {self._t('steps')} WHERE status = 'running' AND lease_until < ? "
                f"AND workflow IN ({_marks(names)}) ORDER BY lease_until, seq LIMIT ?",
                [lease_now, *names, limit],
            ).fetchall()
            for seq, token, run_id, workflow, name, attempt, failures, reclaims in rows:
                if reclaims >= max_reclaims:
                    abandoned.append(
                        ExpiredAttempt(token, run_id, workflow, name, attempt, failures, reclaims)
                    )
                    continue
                # The same guard as every fenced transition: this token, still running.
                requeued += db.execute(
                    f"UPDATE {self._t('steps')} SET status = 'ready', due_at = ?, token = NULL, "
                    "lease_until = NULL, reclaims = reclaims + 1 "
                    "WHERE seq = ? AND token = ? AND status = 'running'",
                    (now, seq, token),
                ).rowcount
        return ReclaimResult(requeued, tuple(abandoned))

    # -- outcomes ------------------------------------------------------------------------------
    def finish(self, token: str, outcome: Outcome, now: int) -> FinishResult:
        """Apply ``outcome`` to the attempt ``token`` holds, or change nothing."""
        with self._write() as db:
            return self._finish(db, token, outcome, now)

    # -- the batch-outcomes facet (cairnflow.store.BatchOutcomes) ------------------------------
    # Optional, and no capability: without it the engine writes each outcome with finish()
    # and then claims. With it, a batch of outcomes and the claim that refills their slots
    # are one transaction (one fsync instead of one per outcome).
    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        """Several outcomes in one transaction (group commit), each fenced by its own token."""
        with self._write() as db:
            return [self._finish(db, token, outcome, now) for token, outcome in items]

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        """:meth:`finish_many`, then :meth:`claim` for the freed slots, in one transaction."""
        with self._write() as db:
            results = [self._finish(db, token, outcome, now) for token, outcome in items]
            return results, (self._claim(db, claim) if claim is not None else [])

    def _finish(
        self, db: sqlite3.Connection, token: str, outcome: Outcome, now: int
    ) -> FinishResult:
        row, state = self._held(db, token)
        if row is None:
            if state is AttemptState.CANCELLED:
                # The holder has heard of the cancellation: forget its token.
                db.execute(f"UPDATE {self._t('steps')} SET token = NULL WHERE token = ?", (token,))
            return FinishResult(state)
        seq, run_id, children_json = row[0], row[1], row[2]
        children: list[str] = json.loads(children_json)
        db.execute(
            f"UPDATE {self._t('steps')} SET token = NULL, lease_until = NULL WHERE seq = ?",
            (seq,),
        )
        if isinstance(outcome, Succeeded):
            self._set(db, seq, output=outcome.output)
            return self._succeed(db, seq, run_id, children, now)
        if isinstance(outcome, Failed):
            db.execute(
                f"UPDATE {self._t('steps')} SET failures = failures + 1, error = ? WHERE seq = ?",
                (outcome.error.to_json(), seq),
            )
            if outcome.retry_at is not None:
                status = _due_status(outcome.retry_at, now)
                self._set(db, seq, status=status, due_at=outcome.retry_at, reclaims=0)
                return FinishResult(AttemptState.HELD, ready=1)
            self._fail(db, seq, run_id, outcome.error, now)
            return FinishResult(AttemptState.HELD, run_status=cf.Status.FAILED)
        if isinstance(outcome, Snoozed):
            self._set(db, seq, status=_due_status(outcome.until, now), due_at=outcome.until)
            return FinishResult(AttemptState.HELD, ready=1)
        if isinstance(outcome, SleepUntil):
            self._set(db, seq, status="sleeping", due_at=outcome.until, output=outcome.output)
            return FinishResult(AttemptState.HELD)
        if isinstance(outcome, WaitFor):
            self._set(db, seq, signal=outcome.signal)
            kept = db.execute(
                f"SELECT seq, payload FROM {self._t('signals')} WHERE run_id = ? AND name = ? "
                "ORDER BY seq LIMIT 1",
                (run_id, outcome.signal),
            ).fetchone()
            if kept is not None:
                db.execute(f"DELETE FROM {self._t('signals')} WHERE seq = ?", (kept[0],))
                self._set(db, seq, output=kept[1])
                return self._succeed(db, seq, run_id, children, now)
            self._set(db, seq, status="waiting", due_at=outcome.deadline)
            return FinishResult(AttemptState.HELD)
        raise TypeError(f"unknown outcome {outcome!r}")

    def advance_due(self, *, now: int, workflows: Collection[str], limit: int) -> AdvanceResult:
        """Make due scheduled steps ready, end due sleeps, fail waits whose deadline passed."""
        if not workflows or limit <= 0:
            return AdvanceResult()
        names = sorted(workflows)
        woken = timed_out = promoted = 0
        with self._write() as db:
            rows = db.execute(
                f"SELECT seq FROM {self._t('steps')} "
                "WHERE status IN ('scheduled', 'sleeping', 'waiting') "
                f"AND due_at <= ? AND workflow IN ({_marks(names)}) ORDER BY due_at, seq LIMIT ?",
                [now, *names, limit],
            ).fetchall()
            for (seq,) in rows:
                # Read again: an earlier row of this pass may have ended this step's run.
                step = db.execute(
                    f"SELECT run_id, name, status, signal, attempt, children "
                    f"FROM {self._t('steps')} WHERE seq = ?",
                    (seq,),
                ).fetchone()
                run_id, name, status, signal, attempt, children = step
                if status == "scheduled":
                    self._set(db, seq, status="ready")  # keeps its due time: claim order
                    promoted += 1
                elif status == "sleeping":
                    self._succeed(db, seq, run_id, json.loads(children), now)
                    woken += 1
                elif status == "waiting":
                    error = ErrorInfo(
                        type=cf.StepTimeout.__name__,
                        message=f"no signal {signal!r} arrived before the wait's deadline",
                        step=name,
                        attempt=attempt,
                    )
                    db.execute(
                        f"UPDATE {self._t('steps')} SET failures = failures + 1, error = ? "
                        "WHERE seq = ?",
                        (error.to_json(), seq),
                    )
                    self._fail(db, seq, run_id, error, now)
                    timed_out += 1
        return AdvanceResult(woken, timed_out, promoted)

    def send_signal(self, run_id: str, name: str, payload: bytes, now: int) -> SignalResult:
        """Resolve the first step waiting for ``name``, or keep the signal for it."""
        with self._write() as db:
            run = db.execute(
                f"SELECT state FROM {self._t('runs')} WHERE id = ?", (run_id,)
            ).fetchone()
            if run is None:
                raise cf.RunNotFound(run_id)
            if run[0] != ACTIVE:
                return SignalResult.RUN_FINISHED
            waiting = db.execute(
                f"SELECT seq, children FROM {self._t('steps')} WHERE run_id = ? "
                "AND status = 'waiting' AND signal = ? ORDER BY position LIMIT 1",
                (run_id, name),
            ).fetchone()
            if waiting is not None:
                self._set(db, waiting[0], output=payload)
                self._succeed(db, waiting[0], run_id, json.loads(waiting[1]), now)
                return SignalResult.DELIVERED
            db.execute(
                f"INSERT INTO {self._t('signals')} (run_id, name, payload) VALUES (?, ?, ?)",
                (run_id, name, payload),
            )
            return SignalResult.STORED

    def cancel_run(self, run_id: str, now: int) -> bool:
        """Not offered: litestore does not declare CANCEL, so the client refuses first."""
        raise NotImplementedError("litestore does not declare CANCEL")

    # -- transitions shared by the operations above ---------------------------------------------
    def _set(self, db: sqlite3.Connection, seq: int, **columns: Any) -> None:
        assignments = ", ".join(f"{column} = ?" for column in columns)
        db.execute(
            f"UPDATE {self._t('steps')} SET {assignments} WHERE seq = ?",
            [*columns.values(), seq],
        )

    def _succeed(
        self, db: sqlite3.Connection, seq: int, run_id: str, children: list[str], now: int
    ) -> FinishResult:
        self._set(db, seq, status="succeeded", finished_at=now, due_at=None)
        ready = 0
        if children:
            # The fan-in counter: decrement, then wake the children at zero, in
            # this transaction; two parents can never both miss the child.
            db.execute(
                f"UPDATE {self._t('steps')} SET parents_left = parents_left - 1 "
                f"WHERE run_id = ? AND name IN ({_marks(children)})",
                [run_id, *children],
            )
            ready = db.execute(
                f"UPDATE {self._t('steps')} SET status = 'ready', due_at = ? WHERE run_id = ? "
                f"AND name IN ({_marks(children)}) AND parents_left = 0 AND status = 'blocked'",
                [now, run_id, *children],
            ).rowcount
        db.execute(
            f"UPDATE {self._t('runs')} SET steps_left = steps_left - 1 WHERE id = ?", (run_id,)
        )
        left = db.execute(
            f"SELECT steps_left FROM {self._t('runs')} WHERE id = ?", (run_id,)
        ).fetchone()
        if left[0] == 0:
            self._end_run(db, run_id, cf.Status.SUCCEEDED.value, now, None)
            return FinishResult(AttemptState.HELD, ready=ready, run_status=cf.Status.SUCCEEDED)
        return FinishResult(AttemptState.HELD, ready=ready)

    def _fail(
        self, db: sqlite3.Connection, seq: int, run_id: str, error: ErrorInfo, now: int
    ) -> None:
        self._set(db, seq, status="failed", finished_at=now, due_at=None)
        self._end_run(db, run_id, cf.Status.FAILED.value, now, error)

    def _end_run(
        self, db: sqlite3.Connection, run_id: str, state: str, now: int, error: ErrorInfo | None
    ) -> None:
        # Leaving 'active' drops the run out of the partial unique index: its key is free.
        db.execute(
            f"UPDATE {self._t('runs')} SET state = ?, finished_at = ?, error = ? WHERE id = ?",
            (state, now, None if error is None else error.to_json(), run_id),
        )
        db.execute(f"DELETE FROM {self._t('signals')} WHERE run_id = ?", (run_id,))
        # Running attempts keep their tokens, so their holders learn "cancelled".
        db.execute(
            f"UPDATE {self._t('steps')} SET status = 'cancelled', finished_at = ?, due_at = NULL, "
            f"lease_until = NULL WHERE run_id = ? AND status IN ({_marks(_UNFINISHED)})",
            [now, run_id, *_UNFINISHED],
        )

    # -- reading -------------------------------------------------------------------------------
    def get_run(self, run_id: str) -> StoredRun | None:
        """The run and its steps in definition order, or None."""
        with self._read() as db:
            run = db.execute(
                f"SELECT id, workflow, queue, state, payload, idem_key, labels, created_at, "
                f"run_at, finished_at, error FROM {self._t('runs')} WHERE id = ?",
                (run_id,),
            ).fetchone()
            if run is None:
                return None
            steps = db.execute(
                f"SELECT {_STEP_COLUMNS} FROM {self._t('steps')} "
                "WHERE run_id = ? ORDER BY position",
                (run_id,),
            ).fetchall()
        return StoredRun(
            id=run[0],
            workflow=run[1],
            queue=run[2],
            state=run[3],
            payload=run[4],
            key=run[5],
            labels=json.loads(run[6]),
            created_at=run[7],
            run_at=run[8],
            finished_at=run[9],
            error=_error(run[10]),
            steps=tuple(self._stored_step(row) for row in steps),
        )

    @staticmethod
    def _stored_step(row: Sequence[Any]) -> StoredStep:
        return StoredStep(
            name=row[0],
            kind=StepKind(row[1]),
            status=StepStatus(row[2]),
            parents=tuple(json.loads(row[3])),
            attempt=row[4],
            failures=row[5],
            reclaims=row[6],
            output=row[7],
            error=_error(row[8]),
            node=row[9],
            progress=row[10],
            signal=row[11],
            due_at=row[12],
            started_at=row[13],
            finished_at=row[14],
            heartbeat_at=row[15],
        )

    def list_runs(self, query: RunQuery) -> RunPage:
        """Newest first; the cursor holds the row number of the last run shown.

        Workflow and queue are filtered in SQL; the rest, statuses derived from the
        steps and labels kept as JSON, by :func:`cairnflow.store.run_matches` over
        the rows read newest first. Cap.LABEL_PREFIX is not declared (there is no
        index of labels here, only a walk), so a client refuses ``label_prefix=``.
        """
        where = ["1 = 1"]
        params: list[Any] = []
        if query.workflow is not None:
            where.append("workflow = ?")
            params.append(query.workflow)
        if query.queue is not None:
            where.append("queue = ?")
            params.append(query.queue)
        before = cursor_position(query.cursor) if query.cursor is not None else None
        matches: list[tuple[tuple[Any, ...], dict[StepStatus, int]]] = []
        total = 0
        with self._read() as db:
            rows = db.execute(
                f"SELECT seq, id, workflow, queue, state, idem_key, labels, created_at, run_at, "
                f"finished_at, error FROM {self._t('runs')} WHERE {' AND '.join(where)} "
                "ORDER BY seq DESC",
                params,
            ).fetchall()
            for row in rows:
                counts: dict[StepStatus, int] = {}
                for status, count in db.execute(
                    f"SELECT status, COUNT(*) FROM {self._t('steps')} "
                    "WHERE run_id = ? GROUP BY status",
                    (row[1],),
                ):
                    counts[StepStatus(status)] = count
                if not run_matches(
                    query,
                    workflow=row[2],
                    queue=row[3],
                    state=row[4],
                    run_at=row[8],
                    labels=json.loads(row[6]),
                    created_at=row[7],
                    finished_at=row[9],
                    step_counts=counts,
                ):
                    continue
                total += 1
                if (before is None or row[0] < before) and len(matches) <= query.limit:
                    matches.append((row, counts))
                elif not query.count and len(matches) > query.limit:
                    break
        page = matches[: query.limit]
        summaries = tuple(
            RunSummary(
                id=row[1],
                workflow=row[2],
                queue=row[3],
                state=row[4],
                key=row[5],
                labels=json.loads(row[6]),
                created_at=row[7],
                run_at=row[8],
                finished_at=row[9],
                error=_error(row[10]),
                step_counts=counts,
            )
            for row, counts in page
        )
        cursor = run_cursor(page[-1][0][0]) if len(matches) > query.limit and page else None
        return RunPage(summaries, cursor, total if query.count else None)

    def __repr__(self) -> str:
        return f"LiteStore({self._path!r}, table_prefix={self._prefix!r})"
