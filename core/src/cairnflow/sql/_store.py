"""One DB-API 2.0 implementation of the Store SPI, over a :class:`Dialect`.

Every SPI operation is one transaction (sleeps and reclaims are one small
transaction per step, so no transaction locks more than one run). Every
transition of a run locks the run row first, then its steps: one lock order,
so no two transitions of a run deadlock, and fan-in, signal delivery and run
completion are serialised per run. Attempts are fenced by their lease: the
token the engine holds is ``<step id>:<secret>`` and every write of an
attempt is ``UPDATE ... WHERE id = ? AND lease_token = ? AND status = 'running'``.

:class:`SQLStore` is the one class a driver subclasses, and it holds no
transition itself: it builds the shared :class:`~cairnflow.sql._parts.Context`
and one part per kind of transition, and each SPI method is one line that
hands the call to its part:

* :mod:`._transactions`: the transaction runner, retries, error sorting;
* :mod:`._schema`: migrations, the ledger, the schema check;
* :mod:`._enqueue`: ``create_runs``, ``create_runs_streamed`` (the ``StreamedEnqueue``
  facet), ``create_runs_in``; :mod:`._async_enqueue`: the
  same on an async connection;
* :mod:`._claims`: ``claim`` (global queue limits and rate limits: :mod:`._limiters`,
  which also carries the ``RateLimiting`` facet's ``take_tokens``);
* :mod:`._leases`: ``renew``, ``heartbeat``, ``record_progress``, ``hand_back``,
  ``reclaim_expired``;
* :mod:`._outcomes`: ``finish*``, ``advance_due``, ``send_signal``, ``cancel_run``;
* :mod:`._reads`: ``get_run``, ``list_runs``, ``database_now``;
* :mod:`._schedules`: the ``Schedules`` facet (``save_schedule``, ``fire_ticks``...);
* :mod:`._leadership`: the ``Leadership`` facet (``claim_leadership``, ``resign_leadership``);
* :mod:`._pauses`: the ``QueueControl`` facet (``pause``, ``resume``, ``pauses``);
* :mod:`._journal`: the ``Journaling`` facet (``read_journal``, ``record_journal``);
* :mod:`._locks`: the ``Locking`` facet (``take_lock``, ``release_lock``...).
* :mod:`._timing`: the ``RunTiming`` facet (``reschedule_run``, ``force_run``, ``next_due``).
* :mod:`._admin`: the ``RunAdmin`` facet (``reopen_run``, ``delete_runs``, ``cancel_runs``,
  ``cancel_step``);
* :mod:`._history`: the ``ErrorHistory`` facet (``run_errors``; failures recorded by outcomes).
* :mod:`._retention`: the ``Retention`` facet (``prune_runs``, ``archived_runs``).
* :mod:`._step_history`: the ``StepHistory`` facet (``step_history``; rows written by the
  drivers' triggers, so declared by a driver, not here).
* :mod:`._lifecycle`: the ``Lifecycle`` facet (``claim_lifecycle``, ``ack_lifecycle``...; the
  outbox's rows written by the drivers' triggers, so declared by a driver, not here).

The statements are in :mod:`._statements`, the rows they read in :mod:`._rows`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from .._caps import Cap
from .._checks import check_int
from .._models import ErrorInfo, LifecycleEvent, LifecycleSubscription, RunError, StepEvent
from .._rates import Rate, RateTake
from .._version import SPI_VERSION
from ..notify import ClosableNotifier, Notifier, reaches_other_processes
from ..store import (
    FACETS,
    AdvanceResult,
    ArchivePage,
    AttemptState,
    ClaimedAttempt,
    ClaimRequest,
    FinishResult,
    HeldLock,
    Leader,
    NewRun,
    Outcome,
    Pause,
    PauseKind,
    PruneChunk,
    ReclaimResult,
    RenewResult,
    Reopened,
    RunPage,
    RunQuery,
    RunStatistics,
    RunStream,
    ScheduleRecord,
    ServerRecord,
    SignalResult,
    StoredRun,
    StoreInfo,
    TickRecord,
)
from ..store import Schedules as SchedulesFacet
from ._admin import Admin
from ._async_enqueue import AsyncEnqueue
from ._claims import Claims
from ._dialect import Connections, Dialect
from ._enqueue import Enqueue
from ._errors import ErrorClassifier
from ._history import ErrorLog
from ._journal import Journal
from ._leadership import Leadership
from ._leases import Leases
from ._lifecycle import LifecycleOutbox
from ._locks import Locks
from ._migrations import Migration
from ._outcomes import Outcomes
from ._parts import Context
from ._pauses import Pauses
from ._queries import Queries
from ._reads import Reads
from ._retention import Retention
from ._schedules import Schedules
from ._schema import Schema
from ._servers import ServerRows
from ._stats import Stats
from ._step_history import StepLog
from ._tables import Tables
from ._timing import Timing
from ._transactions import StoreStats, Transactions

__all__ = ["SCHEDULE_CAPABILITIES", "SQL_CAPABILITIES", "SQLStore", "StoreStats"]

SCHEDULE_CAPABILITIES = next(f for f in FACETS if f.protocol is SchedulesFacet).capabilities
"""CRON and the capabilities built on it: every one the ``Schedules`` facet carries, since
the layer implements the whole facet (:mod:`._schedules`)."""

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
        Cap.WAIT_BRANCH,
        Cap.COMPENSATION,
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
        Cap.LABEL_PREFIX,
        Cap.TENANT,
        Cap.HEADERS,
        Cap.STATS,
        Cap.SERVERS,
        *SCHEDULE_CAPABILITIES,
        Cap.LEADER_ELECTION,
        Cap.QUEUE,
        Cap.QUEUE_OVERRIDE,
        Cap.QUEUE_LIMIT_GLOBAL,
        Cap.RATE_LIMIT,
        Cap.CONCURRENCY_KEY,
        Cap.KEY_FIFO,
        Cap.PAUSE_QUEUE,
        Cap.PAUSE_WORKFLOW,
        Cap.DRAIN,
        Cap.SHUTDOWN_REQUEUE,
        Cap.ENQUEUE_ONLY,
        Cap.JOURNAL,
        Cap.LOCKS,
        Cap.RESCHEDULE,
        Cap.FORCE_RUN,
        Cap.DUE_QUERY,
        Cap.RETRY_RUN,
        Cap.JOB_RETRY,
        Cap.DELETE_RUN,
        Cap.CANCEL_ALL,
        Cap.CANCEL_STEP,
        Cap.RETRY_UNTIL,
        Cap.RETRY_MAX_ERRORS,
        Cap.DISCARD,
        Cap.ERROR_HISTORY,
        Cap.RETENTION,
        Cap.ARCHIVE,
    }
)
"""What every SQL store built on this layer implements; drivers add their own."""


class SQLStore:
    """The Store SPI on any DB-API 2.0 driver; a driver supplies the dialect and connections.

    ``table_prefix`` (default ``cf_``) and ``schema`` name the namespace; both
    are validated and quoted. The runs' and steps' ids are the client's
    (:class:`~cairnflow.store.NewRun`). ``error_classifier`` overrides the
    dialect's. Retryable errors (deadlocks, busy databases) retry the whole
    transaction up to ``tx_attempts`` times; unavailable ones are raised as
    :class:`cairnflow.Unavailable`.

    ``notifier`` is what clients of the store use to wake each other (its
    :meth:`default_notifier`). One that reaches other processes (anything but
    an in-process :class:`~cairnflow.notify.LocalNotifier`) makes the store
    declare ``Cap.NOTIFY``; one with a ``close()`` is closed with the store.

    ``claim_connections``, where a driver gives them, are what :meth:`claim`
    (a client's claims for its idle workers) runs on, so that their sessions
    may be set up for a claim alone (:meth:`Dialect.claims_alone`) without
    changing how the rest of the store's statements are planned; outcome
    batches claim in their own transactions, on ``connections``. Closed with
    the store.
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
        error_classifier: ErrorClassifier | None = None,
        tx_attempts: int = 5,
        notifier: Notifier | None = None,
        claim_connections: Connections | None = None,
    ) -> None:
        check_int("tx_attempts", tx_attempts, minimum=1)
        if notifier is not None and not isinstance(notifier, Notifier):
            raise TypeError(
                f"notifier= takes a cairnflow.notify.Notifier (notify() and listen()), "
                f"got {notifier!r}"
            )
        self.tables = Tables.build(table_prefix, schema, dialect.quote)
        self.dialect = dialect
        self.stats = StoreStats()
        """Transactions, statements and retries sent so far."""
        self._connections = connections
        self._queries = Queries(self.tables, dialect)
        self._info = info
        self._notifier = notifier
        if notifier is not None and reaches_other_processes(notifier):
            # Given a notifier that reaches other processes (a broker's), idle clients
            # anywhere are woken at once: the store declares it (a driver may still refuse).
            self.capabilities = type(self).capabilities | {Cap.NOTIFY}
        where = f"{schema}." if schema else ""

        def transactions(over: Connections) -> Transactions:
            classify = error_classifier or dialect.classify
            stats = self.stats
            return Transactions(
                over, dialect, classify, attempts=tx_attempts, driver=info.driver, stats=stats
            )

        context = Context(
            dialect=dialect,
            tables=self.tables,
            queries=self._queries,
            tx=transactions(connections),
            info=info,
            migrations=tuple(migrations),
            notifier=notifier,
            channel=f"cairnflow_{dialect.name}_{where}{table_prefix}",
        )
        self._context = context
        self._schema = Schema(context)
        self._enqueue = Enqueue(context)
        self._async_enqueue = AsyncEnqueue(context, self._enqueue)
        self._claim_connections = claim_connections
        self._claims = Claims(
            context, claim_tx=None if claim_connections is None else transactions(claim_connections)
        )
        self._leases = Leases(context)
        self._errors = ErrorLog(context)
        self._step_log = StepLog(context)
        self._lifecycle = LifecycleOutbox(context)
        self._outcomes = Outcomes(
            context, claims=self._claims, leases=self._leases, errors=self._errors
        )
        self._reads = Reads(context)
        self._schedules = Schedules(context, enqueue=self._enqueue)
        self._leadership = Leadership(context)
        self._pauses = Pauses(context)
        self._journal = Journal(context)
        self._locks = Locks(context)
        self._timing = Timing(context)
        self._admin = Admin(context)
        self._stats = Stats(context)
        self._servers = ServerRows(context)
        self._retention = Retention(context, admin=self._admin)

    # -- lifecycle ---------------------------------------------------------------------------
    def describe(self) -> StoreInfo:
        """What this store is (the server version is read once, lazily)."""
        return self._info

    @property
    def channel(self) -> str:
        """``cairnflow_<engine>_<schema>.<prefix>``: one channel per namespace."""
        return self._context.channel

    @property
    def migrations(self) -> tuple[Migration, ...]:
        """The migrations of this release, in order."""
        return self._context.migrations

    @migrations.setter
    def migrations(self, migrations: Sequence[Migration]) -> None:
        self._context.migrations = tuple(migrations)

    @property
    def _channel(self) -> str:
        return self._context.channel

    @_channel.setter
    def _channel(self, channel: str) -> None:
        # Drivers name their channel after the store is built; the parts read it from here.
        self._context.channel = channel

    def default_notifier(self) -> Notifier | None:
        """The notifier the driver chose (None: polling only)."""
        return self._notifier

    def close(self) -> None:
        """Close the notifier the store was given (if it can be closed), then its connections."""
        try:
            if isinstance(self._notifier, ClosableNotifier):
                self._notifier.close()
        finally:
            try:
                if self._claim_connections is not None:
                    self._claim_connections.close()
            finally:
                self._connections.close()

    # -- schema ------------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply every migration not yet in the ledger; return their labels.

        The dialect serialises migrators across processes, and the ledger is
        read after the lock is taken, so each version is applied exactly once.
        Then a dialect that switches the lifecycle triggers makes them match the
        subscriptions (:meth:`Dialect.switch_lifecycle`).
        """
        applied = self._schema.migrate()
        if Cap.LIFECYCLE in self.capabilities:
            self._lifecycle.switch_lifecycle()
        return applied

    def migration_scripts(self) -> list[tuple[str, str]]:
        """Every migration as SQL a DBA can apply by hand, ledger rows included."""
        return self._schema.migration_scripts()

    def check_schema(self) -> None:
        """Refuse to start on a schema that is missing, behind, or newer than this release."""
        self._schema.check(self.capabilities)

    def drop_tables(self) -> None:
        """Drop every table of this namespace, the ledger included, and the functions its
        migrations made (Postgres's trigger functions). Irreversible.

        For test suites on shared servers and for uninstalling; nothing else
        in cairnflow ever drops a table. The namespace can be migrated again.
        """
        self._schema.drop_tables()

    def table_names(self) -> list[str]:
        """The bare names of this namespace's tables."""
        return self._schema.table_names()

    # -- creating runs -----------------------------------------------------------------------
    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:
        """Insert every run with its steps in one transaction, or none of them."""
        return self._enqueue.create_runs(runs)

    def create_runs_streamed(self, runs: RunStream) -> list[str]:
        """:meth:`create_runs`, each chunk made as it is sent (the ``StreamedEnqueue`` facet)."""
        return self._enqueue.create_runs_streamed(runs)

    def create_runs_in(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """Insert the runs in the application's open transaction ``tx`` (never committed here).

        The dialect checks ``tx`` (:meth:`Dialect.application_connection`) and
        wraps the inserts in a savepoint (:meth:`Dialect.savepoint`), so a
        :class:`~cairnflow.DuplicateRun` leaves the application's transaction
        usable; with a notifier, the wake-up is queued in that transaction.
        """
        return self._enqueue.create_runs_in(tx, runs)

    async def create_runs_in_async(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """:meth:`create_runs_in` on the application's async connection (an awaited enqueue).

        The same statements, awaited on ``tx``
        (:meth:`Dialect.async_application_connection`, :meth:`Dialect.send_in_savepoint`).
        """
        return await self._async_enqueue.create_runs_in(tx, runs)

    # -- claiming and leases -----------------------------------------------------------------
    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        """Lease the most urgent due, ready steps (see the dialect for how)."""
        return self._claims.claim(request)

    def renew(self, tokens: Collection[str], lease_until: int) -> RenewResult:
        """Extend the leases still held; report the lost and the cancelled."""
        return self._leases.renew(tokens, lease_until)

    def heartbeat(self, token: str, lease_until: int, now: int) -> AttemptState:
        """Renew one lease and record the heartbeat (fenced)."""
        return self._leases.heartbeat(token, lease_until, now)

    def record_progress(self, token: str, progress: bytes, now: int) -> AttemptState:
        """Store the step's progress (fenced)."""
        return self._leases.record_progress(token, progress, now)

    def hand_back(self, tokens: Collection[str], now: int) -> int:
        """Make held attempts ready again at once (fenced)."""
        return self._leases.hand_back(tokens, now)

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
        return self._leases.reclaim_expired(
            lease_now=lease_now,
            now=now,
            workflows=workflows,
            max_reclaims=max_reclaims,
            limit=limit,
        )

    # -- outcomes ----------------------------------------------------------------------------
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
        return self._outcomes.finish_and_claim(items, now, claim)

    def advance_due(self, *, now: int, workflows: Collection[str], limit: int) -> AdvanceResult:
        """Promote due scheduled steps; end due sleeps and fail overdue waits (one run each)."""
        return self._outcomes.advance_due(now=now, workflows=workflows, limit=limit)

    def send_signal(self, run_id: str, name: str, payload: bytes, now: int) -> SignalResult:
        """Resolve the first step waiting for ``name``, or keep the signal (run row locked)."""
        return self._outcomes.send_signal(run_id, name, payload, now)

    def cancel_run(self, run_id: str, now: int) -> bool:
        """Cancel an unfinished run and its unfinished steps (run row locked)."""
        return self._outcomes.cancel_run(run_id, now)

    # -- reading -----------------------------------------------------------------------------
    def get_run(self, run_id: str) -> StoredRun | None:
        """The run and its steps, read in one transaction."""
        return self._reads.get_run(run_id)

    def list_runs(self, query: RunQuery) -> RunPage:
        """Newest first by insertion; labels are matched in Python after the SQL read."""
        return self._reads.list_runs(query)

    def database_now(self) -> int:
        """The server's time in Unix nanoseconds (``Cap.DATABASE_CLOCK``)."""
        return self._reads.database_now()

    # -- schedules ---------------------------------------------------------------------------
    def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """Insert, or update keeping the next fire of an unchanged fingerprint."""
        return self._schedules.save_schedule(record)

    def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule and its ticks; False if there was none."""
        return self._schedules.remove_schedule(schedule_id)

    def list_schedules(self, workflows: Collection[str] | None = None) -> list[ScheduleRecord]:
        """Every schedule (of ``workflows``), by workflow and name."""
        return self._schedules.list_schedules(workflows)

    def due_schedules(
        self, *, now: int, workflows: Collection[str], limit: int
    ) -> list[ScheduleRecord]:
        """Schedules of ``workflows`` due at ``now``, earliest first."""
        return self._schedules.due_schedules(now=now, workflows=workflows, limit=limit)

    def fire_ticks(
        self,
        schedule_id: str,
        *,
        expected_next: int | None,
        next_fire: int,
        ticks: Sequence[TickRecord],
        runs: Sequence[NewRun],
    ) -> list[str] | None:
        """Compare and swap the next fire, record the ticks, create the runs (schedule locked)."""
        return self._schedules.fire_ticks(
            schedule_id, expected_next=expected_next, next_fire=next_fire, ticks=ticks, runs=runs
        )

    def set_schedule_paused(self, schedule_id: str, paused: bool, now: int) -> bool:
        """Pause, or resume from ``now``."""
        return self._schedules.set_schedule_paused(schedule_id, paused, now)

    def schedule_history(self, schedule_id: str, limit: int) -> list[TickRecord]:
        """The schedule's last ``limit`` ticks, newest first."""
        return self._schedules.schedule_history(schedule_id, limit)

    def prune_ticks(self, *, before: int, limit: int) -> int:
        """Delete old ticks by primary key, keeping each schedule's newest."""
        return self._schedules.prune_ticks(before=before, limit=limit)

    # -- leadership --------------------------------------------------------------------------
    def claim_leadership(self, role: str, node: str, *, lease_now: int, lease_until: int) -> Leader:
        """Take or extend the lease of ``role`` for ``node`` (its row locked); return the holder."""
        return self._leadership.claim_leadership(
            role, node, lease_now=lease_now, lease_until=lease_until
        )

    def read_leadership(self, role: str) -> Leader | None:
        """Who holds (or last held) the lease of ``role``."""
        return self._leadership.read_leadership(role)

    def resign_leadership(self, role: str, node: str) -> None:
        """End ``node``'s lease of ``role`` now, if it holds it."""
        self._leadership.resign_leadership(role, node)

    # -- pauses ------------------------------------------------------------------------------
    def pause(self, kind: PauseKind, name: str, at: int) -> bool:
        """Pause a queue or workflow (a row every claim reads); False if it was paused."""
        return self._pauses.pause(kind, name, at)

    def resume(self, kind: PauseKind, name: str) -> bool:
        """Lift a pause (delete its row); False if there was none."""
        return self._pauses.resume(kind, name)

    def pauses(self) -> list[Pause]:
        """Every pause, by kind and name."""
        return self._pauses.pauses()

    # -- the journal -------------------------------------------------------------------------
    def read_journal(self, scope: str, step: str, name: str) -> bytes | None:
        """The value recorded under the key (by primary key); None when nothing is."""
        return self._journal.read_journal(scope, step, name)

    def record_journal(
        self, scope: str, step: str, name: str, value: bytes, *, lease: str | None, now: int
    ) -> bytes | None:
        """Record ``value`` unless the key holds one, fenced by ``lease`` (its step row locked)."""
        return self._journal.record_journal(scope, step, name, value, lease=lease, now=now)

    # -- rate limits -------------------------------------------------------------------------
    def take_tokens(self, name: str, rate: Rate, n: int, now: int) -> RateTake:
        """Take ``n`` tokens of bucket ``name`` (its row locked); nothing written when refused."""
        return self._claims.limiters.take(name, rate, n, now)

    # -- named locks -------------------------------------------------------------------------
    def take_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Take ``name`` for ``token`` (its row locked) unless another holds it at ``now``."""
        return self._locks.take_lock(name, token, now=now, until=until)

    def extend_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Move the expiry of ``token``'s unexpired lock of ``name``."""
        return self._locks.extend_lock(name, token, now=now, until=until)

    def release_lock(self, name: str, token: str) -> bool:
        """Free ``name`` if ``token`` holds it."""
        return self._locks.release_lock(name, token)

    def read_lock(self, name: str) -> HeldLock | None:
        """The row of ``name`` as stored."""
        return self._locks.read_lock(name)

    # -- acting on runs ----------------------------------------------------------------------
    def reopen_run(self, run_id: str, step: str | None, now: int) -> Reopened:
        """Retry a failed, cancelled or discarded run from what did not succeed (row locked)."""
        return self._admin.reopen_run(run_id, step, now)

    def delete_runs(self, run_ids: Collection[str]) -> list[str]:
        """Delete the finished runs among ``run_ids``, all their rows; return those deleted."""
        return self._admin.delete_runs(run_ids)

    def cancel_runs(self, run_ids: Collection[str], now: int) -> list[str]:
        """Cancel the unfinished runs among ``run_ids``; return those cancelled."""
        return self._admin.cancel_runs(run_ids, now)

    def cancel_step(self, run_id: str, step: str, now: int) -> bool:
        """Cancel one unfinished step and its unfinished descendants (run row locked)."""
        return self._admin.cancel_step(run_id, step, now)

    # -- retention (Cap.RETENTION, Cap.ARCHIVE) ------------------------------------------------
    def prune_runs(self, chunk: PruneChunk) -> list[str] | None:
        """Delete (or archive) one chunk of old finished runs, fenced by the prune lock."""
        return self._retention.prune_runs(chunk)

    def archived_runs(self, *, limit: int, cursor: str | None = None) -> ArchivePage:
        """A page of archived runs with their steps, newest finish first."""
        return self._retention.archived_runs(limit=limit, cursor=cursor)

    # -- statistics (Cap.STATS) ------------------------------------------------------------
    def run_statistics(self, *, since: int, now: int, width: int) -> RunStatistics:
        """Counts by queue and status, per-queue figures, and throughput since ``since``."""
        return self._stats.run_statistics(since=since, now=now, width=width)

    # -- servers (Cap.SERVERS) ---------------------------------------------------------------
    def record_server(self, server: ServerRecord) -> None:
        """Insert or replace the heartbeat row of ``server.node``."""
        self._servers.record_server(server)

    def stop_server(self, node: str, at: int) -> None:
        """Mark the row of ``node`` stopped at ``at``."""
        self._servers.stop_server(node, at)

    def list_servers(self, *, seen_since: int) -> list[ServerRecord]:
        """Heartbeat rows seen at or after ``seen_since``, newest seen first."""
        return self._servers.list_servers(seen_since=seen_since)

    def prune_servers(self, *, before: int, limit: int) -> int:
        """Delete up to ``limit`` rows last seen before ``before``."""
        return self._servers.prune_servers(before=before, limit=limit)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._info.url} prefix={self.tables.prefix!r}>"

    # -- run timing ----------------------------------------------------------------------------
    def reschedule_run(self, run_id: str, at: int, now: int) -> bool:
        """Move a run that has not started to ``at`` (one transaction, fenced against claims)."""
        return self._timing.reschedule_run(run_id, at, now)

    def force_run(self, run_id: str, now: int) -> bool:
        """Ready a run's scheduled steps now and let every pause pass it."""
        return self._timing.force_run(run_id, now)

    def next_due(
        self, *, workflows: Collection[str], queues: Collection[str], now: int
    ) -> int | None:
        """When the next work of ``workflows`` on ``queues`` falls due (indexed reads only)."""
        return self._timing.next_due(workflows=workflows, queues=queues, now=now)

    # -- error history -------------------------------------------------------------------------
    def run_errors(self, run_id: str) -> list[RunError]:
        """The recorded errors of ``run_id``, newest first (``Cap.ERROR_HISTORY``)."""
        return self._errors.run_errors(run_id)

    def time_out_runs(
        self, workflow: str, due_before: int, error: ErrorInfo, now: int, limit: int
    ) -> list[str]:
        """Fail the unfinished runs of ``workflow`` due at or before ``due_before``
        (``Cap.RUN_TIMEOUT``; the index it reads is the driver's, so declared by a driver)."""
        return self._outcomes.time_out_runs(workflow, due_before, error, now, limit)

    def step_history(self, run_id: str) -> list[StepEvent]:
        """The transitions of ``run_id``'s steps, oldest first (``Cap.STEP_HISTORY``).

        Written by the driver's trigger (see :mod:`._step_history`): a driver whose
        migrations have none does not declare the capability.
        """
        return self._step_log.step_history(run_id)

    # -- lifecycle events (Cap.LIFECYCLE; rows written by the driver's triggers) ----------------
    def subscribe_lifecycle(self, channel: str, workflow: str, now: int) -> None:
        """Record a subscription of ``channel`` to ``workflow`` (see :mod:`._lifecycle`)."""
        self._lifecycle.subscribe_lifecycle(channel, workflow, now)

    def unsubscribe_lifecycle(self, channel: str, workflow: str) -> int | None:
        """Drop a subscription and its undelivered rows no other subscription covers; how many
        rows went (None: no such subscription, nothing changed)."""
        return self._lifecycle.unsubscribe_lifecycle(channel, workflow)

    def lifecycle_subscriptions(self) -> list[LifecycleSubscription]:
        """Every subscription, by channel then workflow, with the backlog each covers."""
        return self._lifecycle.lifecycle_subscriptions()

    def claim_lifecycle(
        self,
        channel: str,
        workflows: Collection[str] | None,
        *,
        token: str,
        lease_until: int,
        now: int,
        limit: int,
    ) -> list[LifecycleEvent]:
        """Lease up to ``limit`` free event rows of ``channel``, oldest first."""
        return self._lifecycle.claim_lifecycle(
            channel, workflows, token=token, lease_until=lease_until, now=now, limit=limit
        )

    def renew_lifecycle(self, ids: Collection[int], token: str, lease_until: int) -> list[int]:
        """Extend the leases ``token`` still holds among ``ids``; return their ids."""
        return self._lifecycle.renew_lifecycle(ids, token, lease_until)

    def release_lifecycle(self, event_id: int, token: str, due_at: int) -> bool:
        """Hand a held row back, claimable again from ``due_at``."""
        return self._lifecycle.release_lifecycle(event_id, token, due_at)

    def ack_lifecycle(self, ids: Collection[int], token: str) -> int:
        """Delete the rows among ``ids`` that ``token`` still holds; how many went."""
        return self._lifecycle.ack_lifecycle(ids, token)
