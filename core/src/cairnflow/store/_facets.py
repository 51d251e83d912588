"""Capability facets: the optional parts of the Store SPI, each a typed protocol.

The kernel (:class:`~cairnflow.store.Store`) is what every store implements.
Everything beyond it is a **facet**: a small protocol carrying the store
operations of one group of capabilities. A store that declares a capability
implements the facet that carries it; :func:`check_store` says which declared
capability lacks which method, and :data:`FACETS` maps every capability that
can be declared today to its facet. A capability no facet carries (and that
the engine does not enforce on its own) cannot be declared: nothing would
implement it.

The engine reaches a facet through a typed reference taken once, when a client
is built (:class:`StoreFacets`), never by looking a method up on a hot path.
A facet that only makes the engine faster has a default built on the kernel
(:class:`BatchOutcomes`: finish, then claim; :class:`StreamedEnqueue`: every run
made, then ``create_runs``), so the engine has one code path.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._caps import Cap
from .._errors import CairnError, ErrorInfo
from .._models import LifecycleEvent, LifecycleSubscription, RunError, StepEvent
from .._rates import Rate, RateTake
from ._protocol import Store
from ._records import (
    ClaimedAttempt,
    ClaimRequest,
    FinishResult,
    HeldLock,
    Leader,
    NewRun,
    Outcome,
    Pause,
    PauseKind,
    Reopened,
    ScheduleRecord,
    TickRecord,
)
from ._retention import ArchivePage, PruneChunk
from ._servers import ServerRecord
from ._stats import RunStatistics
from ._stream import RunStream

__all__ = [
    "ENGINE_ONLY",
    "FACETS",
    "KERNEL",
    "AsyncTransactionalEnqueue",
    "BatchOutcomes",
    "ErrorHistory",
    "Facet",
    "Journaling",
    "KernelOutcomes",
    "KernelStreamedEnqueue",
    "Leadership",
    "Lifecycle",
    "Locking",
    "QueueControl",
    "RateLimiting",
    "Retention",
    "RunAdmin",
    "RunDeadlines",
    "RunStats",
    "RunTiming",
    "Schedules",
    "ServerClock",
    "Servers",
    "StepHistory",
    "StoreContractError",
    "StoreFacets",
    "StreamedEnqueue",
    "TransactionalEnqueue",
    "check_store",
    "facet_capabilities",
    "facet_of",
]


@runtime_checkable
class BatchOutcomes(Protocol):
    """Several outcomes in one transaction, and the claim that refills their slots.

    Requirement: each item is fenced by its own lease token exactly as
    :meth:`Store.finish` fences one; results come back in the order of
    ``items``. Carries no capability: it makes group commit one transaction
    instead of one per outcome, and a store without it gets
    :class:`KernelOutcomes`.
    """

    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        """Several :meth:`Store.finish` in one transaction, each fenced by its own token."""
        ...

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        """:meth:`finish_many`, then :meth:`Store.claim` (when ``claim`` is not None).

        In one transaction, so the claim sees what the outcomes made ready and
        one commit both ends and starts attempts.
        """
        ...


@runtime_checkable
class StreamedEnqueue(Protocol):
    """A batch of new runs written chunk by chunk, each chunk made as it is sent.

    Requirement: ``create_runs_streamed(runs)`` writes exactly what
    :meth:`Store.create_runs` writes for ``runs.all()``, all or none, and answers a
    batch whose ids exist as :meth:`Store.create_runs` does (the retried write of a
    batch that landed). Making a run may raise (:class:`RunStream`): then nothing
    of the batch is written, and the error is raised as it came. Carries no
    capability: it lets a store whose engine pipelines send a chunk while the
    client makes the next, and a store without it gets
    :class:`KernelStreamedEnqueue`.
    """

    def create_runs_streamed(self, runs: RunStream) -> list[str]:
        """Create every run of ``runs`` with its steps in one transaction; return their ids."""
        ...


@runtime_checkable
class TransactionalEnqueue(Protocol):
    """``Cap.TRANSACTIONAL_ENQUEUE``: runs written inside the application's transaction.

    Requirement: ``create_runs_in(tx, runs)`` writes exactly what
    :meth:`Store.create_runs` writes, all or none, on the application's own
    open connection ``tx``, and never commits or rolls back the application's
    transaction. A refused enqueue (:class:`~cairnflow.DuplicateRun`) leaves
    that transaction usable.
    """

    def create_runs_in(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """Create ``runs`` in the application's transaction ``tx``; return their ids."""
        ...


@runtime_checkable
class AsyncTransactionalEnqueue(Protocol):
    """``create_runs_in`` on the application's async connection (an awaited ``enqueue_tx``).

    Carries no capability of its own: it is ``Cap.TRANSACTIONAL_ENQUEUE`` for
    async callers (:class:`cairnflow.AsyncClient`), and a store that declares that
    capability may have it. Requirement: what :meth:`TransactionalEnqueue.create_runs_in`
    promises, every statement awaited on ``tx``, none blocking the event loop.
    """

    async def create_runs_in_async(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """Create ``runs`` in the application's async transaction ``tx``; return their ids."""
        ...


@runtime_checkable
class ServerClock(Protocol):
    """``Cap.DATABASE_CLOCK``: the database server's clock.

    Requirement: ``database_now()`` reads the server's time, in Unix
    nanoseconds, in one round trip; every client of the database reads the
    same clock.
    """

    def database_now(self) -> int:
        """The server's time in Unix nanoseconds."""
        ...


@runtime_checkable
class Schedules(Protocol):
    """``Cap.CRON`` and the schedule capabilities: schedules and their ticks as rows.

    Requirement: one fire per tick across every client. ``fire_ticks`` is one
    transaction that moves the schedule's stored next fire only if it still
    holds the value the caller planned from (compare and swap), writes one
    tick row per (schedule, tick time) (a tick recorded already refuses the
    whole call), creates the fired runs exactly as ``create_runs`` does, and
    remembers the last fired tick and its run. Ticks are decided by the engine
    (:func:`cairnflow.schedule.plan_ticks`); the store only keeps them.
    """

    def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """Insert ``record``, or update the schedule with its id; return what is stored.

        An update replaces ``spec`` and ``fingerprint``; it replaces
        ``next_fire`` only when the fingerprint changed (a redeploy of the same
        declaration keeps the stored next fire); it keeps the paused state and
        the last fire. An insert stores the record as given.
        """
        ...

    def remove_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule and its ticks; False if there was none."""
        ...

    def list_schedules(self, workflows: Collection[str] | None = None) -> list[ScheduleRecord]:
        """Every schedule (of ``workflows``, if given), by workflow and name."""
        ...

    def due_schedules(
        self, *, now: int, workflows: Collection[str], limit: int
    ) -> list[ScheduleRecord]:
        """Schedules of ``workflows`` whose next fire is at or before ``now``, earliest first."""
        ...

    def fire_ticks(
        self,
        schedule_id: str,
        *,
        expected_next: int | None,
        next_fire: int,
        ticks: Sequence[TickRecord],
        runs: Sequence[NewRun],
    ) -> list[str] | None:
        """Record ``ticks`` and create ``runs`` (one per fired tick, in order); return run ids.

        Compare and swap: with ``expected_next`` None (a trigger), the stored
        next fire is left as it is; otherwise the call applies only while the
        stored next fire equals ``expected_next``, and stores ``next_fire``.
        Returns None, writing nothing, when it does not apply or a tick of
        ``ticks`` is recorded already (another client handled it).
        """
        ...

    def set_schedule_paused(self, schedule_id: str, paused: bool, now: int) -> bool:
        """Pause or resume (resuming records ``now`` as ``resumed_at``); False if unknown."""
        ...

    def schedule_history(self, schedule_id: str, limit: int) -> list[TickRecord]:
        """The schedule's last ``limit`` recorded ticks, newest first."""
        ...

    def prune_ticks(self, *, before: int, limit: int) -> int:
        """Delete up to ``limit`` tick rows recorded before ``before``, never the newest
        of a schedule; return how many went."""
        ...


@runtime_checkable
class Leadership(Protocol):
    """``Cap.LEADER_ELECTION``: a lease row per role that one node holds at a time.

    Requirement: ``claim_leadership`` is one atomic step: the node that holds
    an unexpired lease extends it; a lease that expired before ``lease_now``
    (or none) goes to the caller with the term incremented; otherwise the
    holder stays and is returned. Two callers never both get an unexpired
    lease of one role.
    """

    def claim_leadership(self, role: str, node: str, *, lease_now: int, lease_until: int) -> Leader:
        """Take or extend the lease of ``role`` for ``node``; return who holds it now."""
        ...

    def read_leadership(self, role: str) -> Leader | None:
        """Who holds (or last held) the lease of ``role``; None if nobody ever did."""
        ...

    def resign_leadership(self, role: str, node: str) -> None:
        """End ``node``'s lease of ``role`` now, if it holds it (a clean stop hands over)."""
        ...


@runtime_checkable
class QueueControl(Protocol):
    """``Cap.PAUSE_QUEUE``, ``Cap.PAUSE_WORKFLOW``: pauses that every claim reads.

    Requirement: from the moment ``pause`` returns, no claim of any client
    starts an attempt of the paused queue (whatever its workflow) or workflow
    (whatever its queue) until ``resume`` returns; attempts already running
    are not touched, and runs are still created. Pauses are stored, so they
    hold across restarts and without any client running. Claims of other
    queues and workflows are neither slowed nor blocked by a paused one,
    however many ready runs it holds.
    """

    def pause(self, kind: PauseKind, name: str, at: int) -> bool:
        """Pause ``kind`` ``name`` from ``at``; False when it was paused already (kept as is)."""
        ...

    def resume(self, kind: PauseKind, name: str) -> bool:
        """Lift the pause of ``kind`` ``name``; False when it was not paused."""
        ...

    def pauses(self) -> list[Pause]:
        """Every pause, by kind, then name."""
        ...


@runtime_checkable
class Journaling(Protocol):
    """``Cap.JOURNAL``: memoised results inside a step, kept as rows.

    An entry is the encoded result recorded under (``scope``, ``step``,
    ``name``); a step's entries have its run id as scope and its name as step
    (a standalone journal: any scope, step ``""``). Requirement: the first
    record of a key wins and is never changed; a record fenced by ``lease``
    (a lease token of :meth:`Store.claim`) writes only while that lease is
    held, in one transaction with the check, so a stale attempt records
    nothing. A step's entries are one range of the key (scope: the run id), so a
    path that deletes runs deletes theirs with them.
    """

    def read_journal(self, scope: str, step: str, name: str) -> bytes | None:
        """The value recorded under the key; None when nothing is."""
        ...

    def record_journal(
        self, scope: str, step: str, name: str, value: bytes, *, lease: str | None, now: int
    ) -> bytes | None:
        """Record ``value`` unless the key has one; return the value the key holds now.

        None, writing nothing, when ``lease`` is given and not held (the step
        was retaken, or its run cancelled or finished).
        """
        ...


@runtime_checkable
class RunStats(Protocol):
    """``Cap.STATS``: the counts a dashboard draws, cheap enough to ask every few seconds.

    Requirement: one transaction (the numbers agree with each other), every
    statement served by an index that holds what it counts: unfinished steps
    and runs, and runs finished at or after ``since`` (never the whole
    history). Throughput buckets are ``width`` nanoseconds wide from ``since``
    to ``now`` (:class:`~cairnflow.store.RunStatistics`).
    """

    def run_statistics(self, *, since: int, now: int, width: int) -> RunStatistics:
        """Counts by queue and status, per-queue figures, and throughput since ``since``."""
        ...


@runtime_checkable
class RunTiming(Protocol):
    """``Cap.RESCHEDULE``, ``Cap.FORCE_RUN``, ``Cap.DUE_QUERY``: when a run starts, and when
    work falls due.

    Requirement: ``reschedule_run`` and ``force_run`` are each one transaction
    that locks the run row first, as every transition of a run does; a run
    whose step a claim took meanwhile is never half moved. ``force_run``
    marks every unfinished step of the run so that no pause holds it from
    then on (the claim lets such steps through a paused queue or workflow),
    and makes its scheduled steps ready at ``now``. ``next_due`` reads only
    indexed ranges: it never scans the finished history.
    """

    def reschedule_run(self, run_id: str, at: int, now: int) -> bool:
        """Move a run that has not started to start at ``at`` (ready now if ``at <= now``).

        A run has not started while every step of it is blocked, ready or
        scheduled and none was ever attempted. False, changing nothing, when it
        has started (a claim took a step of it, even one racing this call) or
        finished; :class:`~cairnflow.RunNotFound` when there is no such run.
        """
        ...

    def force_run(self, run_id: str, now: int) -> bool:
        """Start a delayed or paused run now; False when nothing changed.

        Its scheduled steps (a delayed start, a retry's or a snooze's wait)
        become ready at ``now``, and its unfinished steps pass every pause from
        then on. False for a finished run, or one forced already with nothing
        scheduled; :class:`~cairnflow.RunNotFound` when there is no such run.
        """
        ...

    def next_due(
        self, *, workflows: Collection[str], queues: Collection[str], now: int
    ) -> int | None:
        """When the next piece of work of ``workflows`` falls due; None when none is pending.

        ``now`` when a step of ``workflows`` on ``queues`` is ready and no pause
        holds it; otherwise the earliest of a scheduled step's start on
        ``queues`` (a delayed run, a retry), a sleep's end or a wait's deadline
        of ``workflows``, and the moment a running step of theirs has run out of
        lease (``lease_until + 1``, on the lease clock). Never earlier than
        ``now``.
        """
        ...


@runtime_checkable
class Locking(Protocol):
    """``Cap.LOCKS``: named locks with a time to live, one row per name.

    Requirement: a lock is a row with its holder's token and an expiry,
    never a session or connection lock, so a holder whose connection drops
    keeps it until it expires or is released, and nobody holds it past its
    expiry. ``take_lock`` is one atomic step: free (no row, or expired at
    ``now``) or held by ``token`` already, it goes to ``token`` until
    ``until``; held by another, nothing is written. Two callers never both
    hold an unexpired lock of one name.
    """

    def take_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Take ``name`` for ``token`` until ``until``; False while another holds it at ``now``."""
        ...

    def extend_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Move the expiry of ``token``'s unexpired lock to ``until``; False if it is not held."""
        ...

    def release_lock(self, name: str, token: str) -> bool:
        """Free ``name`` if ``token`` holds it (even expired, while nobody took it); else False."""
        ...

    def read_lock(self, name: str) -> HeldLock | None:
        """The row of ``name`` as stored (expired or not); None when nobody holds it."""
        ...


@runtime_checkable
class RateLimiting(Protocol):
    """``Cap.RATE_LIMIT``: durable leaky buckets, one row per name (:mod:`cairnflow._rates`).

    Requirement: a bucket is a row holding its theoretical arrival time; a take
    locks the row, computes with :func:`cairnflow._rates.take` and writes the
    new time in the same transaction, so two takers never both spend one token.
    The kernel's ``claim`` honours ``QueueClaim.rate`` the same way (the queue's
    bucket, ``kind`` apart from named buckets), charging what it leased in the
    claim's transaction.
    """

    def take_tokens(self, name: str, rate: Rate, n: int, now: int) -> RateTake:
        """Take ``n`` tokens of bucket ``name`` at ``now``; nothing is written when refused."""
        ...


@runtime_checkable
class RunAdmin(Protocol):
    """``Cap.RETRY_RUN``, ``Cap.JOB_RETRY``, ``Cap.DELETE_RUN``, ``Cap.CANCEL_ALL``,
    ``Cap.CANCEL_STEP``: an operator acting on runs that exist.

    Requirement: each call is one transaction per run it names (``cancel_runs``
    and ``delete_runs``: one per call, locking the runs in the order of their
    ids, as a batch of outcomes does), and takes the run rows' locks before
    the steps', so it serialises with every outcome of those runs. Runs to act
    on are chosen by the caller: the client pages through
    :meth:`~cairnflow.store.Store.list_runs` with the operator's filter and
    hands each page here, so a filter is built in one place and no call locks
    more than a page of runs.

    * ``reopen_run``: a run whose stored state is in :data:`RETRYABLE` becomes
      active again. Its steps that succeeded keep their outputs and stay
      succeeded; every other step loses its lease (a late outcome of an old
      attempt is refused as lost), its failures and reclaims are counted from
      zero again (a fresh retry budget; the attempt count goes on), and it is
      ready (due ``now``) when all its parents succeeded, blocked otherwise.
      The run takes its idempotency key again: when another unfinished run of
      the workflow holds it, :class:`~cairnflow.DuplicateRun` and nothing
      changed. With ``step`` (``Cap.JOB_RETRY``) the step must be ``failed``,
      else :attr:`Reopened.STEP_NOT_FAILED` and nothing changed.
      :class:`~cairnflow.RunNotFound`, :class:`~cairnflow.StepNotFound`.
    * ``delete_runs``: delete those of ``run_ids`` that finished, with every
      row of theirs (steps, kept signals, labels, error history, journal);
      unfinished ones are left as they are. Returns the ids deleted; unknown
      ids are ignored.
    * ``cancel_runs``: :meth:`~cairnflow.store.Store.cancel_run` for each of
      ``run_ids`` still unfinished; returns the ids cancelled.
    * ``cancel_step``: the step, if unfinished in an unfinished run, ends
      ``cancelled`` with its unfinished descendants (which can never run now);
      a running attempt keeps its token, so its renewal reports it cancelled
      and its outcome is refused. The rest of the run goes on; once nothing
      else is left, the run ends ``cancelled`` (not failed, not succeeded:
      part of it never ran), with an error naming the step. False when the
      step or its run had finished.
    """

    def reopen_run(self, run_id: str, step: str | None, now: int) -> Reopened:
        """Make a failed, cancelled or discarded run active again from what did not succeed."""
        ...

    def delete_runs(self, run_ids: Collection[str]) -> list[str]:
        """Delete the finished runs among ``run_ids``, all their rows; return those deleted."""
        ...

    def cancel_runs(self, run_ids: Collection[str], now: int) -> list[str]:
        """Cancel the unfinished runs among ``run_ids``; return those cancelled."""
        ...

    def cancel_step(self, run_id: str, step: str, now: int) -> bool:
        """Cancel one unfinished step of an unfinished run, and its descendants."""
        ...


@runtime_checkable
class StepHistory(Protocol):
    """``Cap.STEP_HISTORY``: a run keeps the transitions of its steps, bounded.

    Requirement: every transition of a step's status (a claim, each outcome,
    a reclaim, a hand back, a cancel, an operator's reopening; not a step made
    ready by its parents or its due time) is recorded as the run's next
    :class:`~cairnflow.StepEvent` in the transaction that makes it, so a fenced
    write that changes nothing records nothing; every transition but a claim
    drops the run's events older than its newest
    :data:`~cairnflow._models.STEP_HISTORY_KEEP`; ``step_history`` reads them
    back, oldest first. Deleting a run (``Cap.DELETE_RUN``) deletes them.
    """

    def step_history(self, run_id: str) -> list[StepEvent]:
        """The recorded transitions of run ``run_id``, oldest first (empty for an unknown run)."""
        ...


@runtime_checkable
class Lifecycle(Protocol):
    """``Cap.LIFECYCLE``: an outbox of run and step events, delivered by lease (docs/lifecycle.md).

    Requirement: while a subscription of ``channel`` ``"events"`` covers a run's
    workflow (its name, or ``""`` for every workflow), every transition that is a
    lifecycle event (see :class:`~cairnflow.LifecycleEvent`) writes one event row in
    the transaction that makes it, so a fenced write that changes nothing writes
    nothing; while a subscription of ``"on_failure"`` names the workflow, a run that
    ends ``failed`` writes one ``run.failed`` row of that channel. ``claim_lifecycle``
    leases up to ``limit`` rows of ``channel`` (of ``workflows``, or every workflow for
    None) that no lease holds now, oldest first, to ``token`` until ``lease_until``,
    counting a delivery; two claims never hold one row at once. ``renew_lifecycle``,
    ``release_lifecycle`` and ``ack_lifecycle`` change only rows ``token`` still holds
    (fenced): the first extends them and returns the ids still held, the second hands
    one back to be claimed again from ``due_at`` (lease clock), the third deletes them
    and returns how many went. ``lifecycle_subscriptions`` lists every recorded
    subscription by channel then workflow, each with the rows it covers not yet
    acknowledged (:class:`~cairnflow.LifecycleSubscription`), and writes nothing.
    """

    def subscribe_lifecycle(self, channel: str, workflow: str, now: int) -> None:
        """Record a subscription of ``channel`` to ``workflow`` (idempotent)."""
        ...

    def unsubscribe_lifecycle(self, channel: str, workflow: str) -> int | None:
        """Drop a subscription and its undelivered rows that no other subscription of the
        channel covers (one to every workflow keeps a workflow's); how many rows went, or
        None when no such subscription is recorded (nothing is changed)."""
        ...

    def lifecycle_subscriptions(self) -> list[LifecycleSubscription]:
        """Every subscription, by channel then workflow, with the backlog each covers."""
        ...

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
        """Lease up to ``limit`` rows of ``channel`` free at ``now`` (lease clock), oldest first."""
        ...

    def renew_lifecycle(self, ids: Collection[int], token: str, lease_until: int) -> list[int]:
        """Extend the leases ``token`` still holds among ``ids``; return their ids."""
        ...

    def release_lifecycle(self, event_id: int, token: str, due_at: int) -> bool:
        """Hand a held row back, claimable again from ``due_at``; False when not held."""
        ...

    def ack_lifecycle(self, ids: Collection[int], token: str) -> int:
        """Delete the rows among ``ids`` that ``token`` still holds; how many went."""
        ...


@runtime_checkable
class RunDeadlines(Protocol):
    """``Cap.RUN_TIMEOUT``: runs past their deadline fail, judged once across clients.

    Requirement: ``time_out_runs`` finds the unfinished runs of ``workflow``
    whose ``run_at`` is at or before ``due_before`` (oldest first, at most
    ``limit``) by an indexed read, and ends each that is still unfinished in
    its own transaction (the run locked, its state read under the lock, so
    two clients judging at once fail it once) as ``failed`` with ``error``,
    cancelling its unfinished steps as ``cancel_run`` does (a running attempt
    hears it at its next renewal). It returns the ids of the runs it ended.
    """

    def time_out_runs(
        self, workflow: str, due_before: int, error: ErrorInfo, now: int, limit: int
    ) -> list[str]:
        """Fail the unfinished runs of ``workflow`` due at or before ``due_before``."""
        ...


@runtime_checkable
class ErrorHistory(Protocol):
    """``Cap.ERROR_HISTORY``: a run keeps the errors of its last failed attempts.

    Requirement: ``finish`` of a :class:`~cairnflow.store.Failed` whose
    ``keep_errors`` is N > 0 records the failure as the run's next
    :class:`~cairnflow.RunError` (``seq`` one more than the run's last) and
    drops the run's errors older than its newest N, in the transaction that
    records the failure; ``run_errors`` reads them back, newest first.
    """

    def run_errors(self, run_id: str) -> list[RunError]:
        """The recorded errors of run ``run_id``, newest first (empty for an unknown run)."""
        ...


@runtime_checkable
class Servers(Protocol):
    """``Cap.SERVERS``: one heartbeat row per started client (:mod:`cairnflow.store._servers`).

    Requirement: ``record_server`` inserts the row of its node or replaces it
    whole (one row per node, whatever the number of writers); ``stop_server``
    sets ``stopped_at`` on the node's row; ``list_servers`` returns the rows
    seen (or stopped) at or after ``seen_since``, newest seen first, read by an
    index on ``seen_at``; ``prune_servers`` deletes up to ``limit`` rows seen
    before ``before``.
    """

    def record_server(self, server: ServerRecord) -> None:
        """Insert or replace the row of ``server.node``."""
        ...

    def stop_server(self, node: str, at: int) -> None:
        """Mark the row of ``node`` stopped at ``at`` (nothing if there is none)."""
        ...

    def list_servers(self, *, seen_since: int) -> list[ServerRecord]:
        """Rows seen at or after ``seen_since``, newest seen first."""
        ...

    def prune_servers(self, *, before: int, limit: int) -> int:
        """Delete up to ``limit`` rows last seen before ``before``; return how many went."""
        ...


@runtime_checkable
class Retention(Protocol):
    """``Cap.RETENTION``, ``Cap.ARCHIVE``: old finished runs leave the hot tables.

    Requirement: ``prune_runs`` is one transaction that first checks the prune
    lock (:class:`~cairnflow.store.PruneChunk`: ``token`` holds ``lock``
    unexpired at ``lock_now``; otherwise it writes nothing and returns None),
    then takes at most ``limit`` runs whose ``finished_at`` is before
    ``before`` (a store may take fewer to keep the transaction short: the SQL
    layer takes at most 200, one IN list; the pruner goes on until a chunk
    takes none), oldest finish first, read by an index on ``finished_at`` (never
    a scan of the runs), and deletes each with every row of its, exactly as
    ``RunAdmin.delete_runs`` does. With ``archive`` each run and its steps
    (outputs, errors, times) are first copied to cold tables in that same
    transaction, so a run is in exactly one place at every moment. An
    unfinished run is never taken. No claim, outcome or reclaim ever reads the
    cold tables. A store declaring ``RETENTION`` declares ``LOCKS`` (the prune
    lock is a named lock).

    ``archived_runs`` reads archived runs with their steps, newest finish
    first (ties by run id, descending), ``limit`` per page, after ``cursor``
    (an :class:`~cairnflow.store.ArchivePage` cursor): pages never repeat or
    skip a run, whatever is archived between them.
    """

    def prune_runs(self, chunk: PruneChunk) -> list[str] | None:
        """Delete (or archive) one chunk of old finished runs; their ids, oldest finish first.

        None, writing nothing, when ``chunk.token`` does not hold ``chunk.lock``.
        """
        ...

    def archived_runs(self, *, limit: int, cursor: str | None = None) -> ArchivePage:
        """A page of archived runs with their steps, newest finish first."""
        ...


@dataclass(frozen=True, slots=True)
class Facet:
    """One facet: its protocol, the methods it requires, and the capabilities it carries."""

    name: str
    protocol: type[Any]
    methods: tuple[str, ...]
    capabilities: frozenset[Cap]

    def missing(self, store: object) -> list[str]:
        """The methods of this facet that ``store`` does not have."""
        return [m for m in self.methods if not callable(getattr(store, m, None))]


KERNEL = Facet(
    "kernel",
    Store,
    (
        "describe",
        "default_notifier",
        "migrate",
        "check_schema",
        "close",
        "create_runs",
        "claim",
        "renew",
        "heartbeat",
        "record_progress",
        "finish",
        "hand_back",
        "reclaim_expired",
        "advance_due",
        "send_signal",
        "cancel_run",
        "get_run",
        "list_runs",
    ),
    frozenset(
        {
            Cap.DURABLE,
            Cap.MULTI_PROCESS,
            Cap.LEASE,
            Cap.RETRY,
            Cap.STEP_TIMEOUT,
            Cap.SLEEP,
            Cap.SIGNAL,
            Cap.CANCEL,
            Cap.IDEMPOTENCY,
            Cap.DELAYED_START,
            Cap.BATCH_ENQUEUE,
            Cap.NOTIFY,
            Cap.PROGRESS,
            Cap.CLOSURE,
            Cap.RESULT,
            Cap.NODE_IDENTITY,
            Cap.SNOOZE,
            Cap.HEARTBEAT,
            Cap.RUN_QUERY,
            # A promise of list_runs: RunQuery.label_prefix honoured, from an index of labels
            # (not a walk of every run). A promise of an operation every store has, not a facet
            # of its own: nothing else is needed to serve it, and a store whose runs keep their
            # labels only as a blob can still list runs without it (the client refuses
            # label_prefix= on a store that does not declare it).
            Cap.LABEL_PREFIX,
            Cap.PAYLOAD_LIMIT,
            # Promises of claim and create_runs: ClaimRequest.queues (with each queue's
            # global_limit) and NewRun.queue honoured.
            Cap.QUEUE,
            Cap.QUEUE_OVERRIDE,
            Cap.QUEUE_LIMIT_GLOBAL,
            # Promises of finish: a Failed outcome's policy (max_errors, retry_deadline,
            # retry_window, discard) judged on the run when the failure is recorded.
            Cap.RETRY_UNTIL,
            Cap.RETRY_MAX_ERRORS,
            Cap.DISCARD,
            # Promises of claim, create_runs and every write that ends a lease:
            # NewRun.keys and ClaimRequest.keys honoured (docs/claim.md, 4).
            Cap.CONCURRENCY_KEY,
            Cap.KEY_FIFO,
            # Promises of create_runs, claim and get_run: NewRun.headers kept with the run,
            # handed back in ClaimedAttempt.headers and StoredRun.headers.
            Cap.HEADERS,
            # Promises of create_runs, finish, advance_due and send_signal on steps of kind
            # branch and compensation: a wait with a branch ends timed_out and starts it (or
            # skips it when its signal comes), and a run failed for good runs the compensations
            # of its succeeded steps, latest first, before it ends (docs/guides/branches.md).
            Cap.WAIT_BRANCH,
            Cap.COMPENSATION,
            # Promises of create_runs, claim, get_run and list_runs: NewRun.tenant kept with
            # the run, handed back in ClaimedAttempt, StoredRun and RunSummary, and
            # RunQuery.tenant filtered on.
            Cap.TENANT,
        }
    ),
)
"""What every store implements, and the capabilities its operations carry."""

FACETS: tuple[Facet, ...] = (
    KERNEL,
    Facet("batch outcomes", BatchOutcomes, ("finish_many", "finish_and_claim"), frozenset()),
    Facet("streamed enqueue", StreamedEnqueue, ("create_runs_streamed",), frozenset()),
    Facet(
        "transactional enqueue",
        TransactionalEnqueue,
        ("create_runs_in",),
        frozenset({Cap.TRANSACTIONAL_ENQUEUE}),
    ),
    Facet("server clock", ServerClock, ("database_now",), frozenset({Cap.DATABASE_CLOCK})),
    Facet(
        "schedules",
        Schedules,
        (
            "save_schedule",
            "remove_schedule",
            "list_schedules",
            "due_schedules",
            "fire_ticks",
            "set_schedule_paused",
            "schedule_history",
            "prune_ticks",
        ),
        frozenset(
            {
                Cap.CRON,
                Cap.OVERLAP_SKIP,
                Cap.SCHEDULE_PAUSE,
                Cap.SCHEDULE_TRIGGER,
                Cap.SCHEDULE_WHEN,
                Cap.SCHEDULE_WINDOW,
                Cap.TICK_EVENTS,
                Cap.SCHEDULE_LIST,
                Cap.SCHEDULE_HISTORY,
            }
        ),
    ),
    Facet(
        "leadership",
        Leadership,
        ("claim_leadership", "read_leadership", "resign_leadership"),
        frozenset({Cap.LEADER_ELECTION}),
    ),
    Facet(
        "queue control",
        QueueControl,
        ("pause", "resume", "pauses"),
        frozenset({Cap.PAUSE_QUEUE, Cap.PAUSE_WORKFLOW}),
    ),
    Facet("journaling", Journaling, ("read_journal", "record_journal"), frozenset({Cap.JOURNAL})),
    Facet(
        "locking",
        Locking,
        ("take_lock", "extend_lock", "release_lock", "read_lock"),
        frozenset({Cap.LOCKS}),
    ),
    Facet(
        "run timing",
        RunTiming,
        ("reschedule_run", "force_run", "next_due"),
        frozenset({Cap.RESCHEDULE, Cap.FORCE_RUN, Cap.DUE_QUERY}),
    ),
    Facet(
        "run admin",
        RunAdmin,
        ("reopen_run", "delete_runs", "cancel_runs", "cancel_step"),
        frozenset({Cap.RETRY_RUN, Cap.JOB_RETRY, Cap.DELETE_RUN, Cap.CANCEL_ALL, Cap.CANCEL_STEP}),
    ),
    Facet("error history", ErrorHistory, ("run_errors",), frozenset({Cap.ERROR_HISTORY})),
    Facet("rate limits", RateLimiting, ("take_tokens",), frozenset({Cap.RATE_LIMIT})),
    Facet("step history", StepHistory, ("step_history",), frozenset({Cap.STEP_HISTORY})),
    Facet(
        "lifecycle",
        Lifecycle,
        (
            "subscribe_lifecycle",
            "unsubscribe_lifecycle",
            "claim_lifecycle",
            "renew_lifecycle",
            "release_lifecycle",
            "ack_lifecycle",
            "lifecycle_subscriptions",
        ),
        frozenset({Cap.LIFECYCLE}),
    ),
    Facet("run deadlines", RunDeadlines, ("time_out_runs",), frozenset({Cap.RUN_TIMEOUT})),
    Facet("run stats", RunStats, ("run_statistics",), frozenset({Cap.STATS})),
    Facet(
        "servers",
        Servers,
        ("record_server", "stop_server", "list_servers", "prune_servers"),
        frozenset({Cap.SERVERS}),
    ),
    Facet(
        "retention",
        Retention,
        ("prune_runs", "archived_runs"),
        frozenset({Cap.RETENTION, Cap.ARCHIVE}),
    ),
)
"""Every facet of this SPI version, the kernel first."""

ENGINE_ONLY: frozenset[Cap] = frozenset(
    {
        # #15, a fleet that deploys cleanly: the client stops over the kernel's hand_back,
        # judges idleness through list_runs, and an enqueue-only client only enqueues.
        Cap.DRAIN,
        Cap.SHUTDOWN_REQUEUE,
        Cap.ENQUEUE_ONLY,
    }
)
"""Capabilities the engine enforces over the kernel alone (no store method carries them)."""

_BY_CAP = {cap: facet for facet in FACETS for cap in facet.capabilities}


def facet_capabilities(*protocols: type[Any]) -> frozenset[Cap]:
    """Every capability the facets of ``protocols`` carry (for a store's declaration)."""
    return frozenset(
        cap for facet in FACETS if facet.protocol in protocols for cap in facet.capabilities
    )


def facet_of(cap: Cap) -> Facet | None:
    """The facet carrying ``cap``; None for an engine-only capability or one not built yet."""
    return _BY_CAP.get(cap)


class StoreContractError(CairnError, TypeError):
    """A store declares a capability it does not implement (a driver's bug)."""


def check_store(store: object) -> None:
    """Raise :class:`StoreContractError` unless ``store`` implements what it declares.

    Requirement: every kernel method exists, and every declared capability is
    carried by a facet whose methods the store has (or is enforced by the
    engine alone). The error names each capability and its missing methods.
    """
    who = type(store).__qualname__
    declared = getattr(store, "capabilities", None)
    if not isinstance(declared, frozenset):
        raise StoreContractError(f"{who}.capabilities must be a frozenset of cairnflow.Cap")
    problems: list[str] = []
    missing = KERNEL.missing(store)
    if missing:
        problems.append(f"the kernel lacks {', '.join(missing)}")
    for cap in sorted(declared, key=str):
        if not isinstance(cap, Cap):
            problems.append(f"{cap!r} is not a cairnflow.Cap")
            continue
        if cap in ENGINE_ONLY:
            continue
        facet = facet_of(cap)
        if facet is None:
            problems.append(f"{cap.value} has no store facet in this cairnflow (nothing runs it)")
        elif facet is not KERNEL and (lacking := facet.missing(store)):
            problems.append(f"{cap.value} needs the {facet.name} facet: no {', '.join(lacking)}")
    if problems:
        raise StoreContractError(
            f"store {who} does not implement what it declares: " + "; ".join(problems)
        )


class KernelOutcomes:
    """:class:`BatchOutcomes` for a store without it: each outcome alone, then the claim."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        """One :meth:`Store.finish` per item, in order."""
        return [self._store.finish(token, outcome, now) for token, outcome in items]

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        """The outcomes, then the claim: two steps, each atomic on its own."""
        results = self.finish_many(items, now)
        return results, (self._store.claim(claim) if claim is not None else [])


class KernelStreamedEnqueue:
    """:class:`StreamedEnqueue` for a store without it: every run made, then ``create_runs``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def create_runs_streamed(self, runs: RunStream) -> list[str]:
        """:meth:`Store.create_runs` of ``runs.all()`` (an error making a run: no call)."""
        return self._store.create_runs(runs.all())


@dataclass(frozen=True, slots=True)
class StoreFacets:
    """Typed references to a store's facets, taken once (:meth:`of`)."""

    store: Store
    outcomes: BatchOutcomes
    """The store's own batch writes, or :class:`KernelOutcomes` over it."""
    enqueue: StreamedEnqueue
    """The store's own streamed batch enqueue, or :class:`KernelStreamedEnqueue` over it."""
    transactional: TransactionalEnqueue | None
    clock: ServerClock | None
    schedules: Schedules | None
    leadership: Leadership | None
    queue_control: QueueControl | None
    journal: Journaling | None
    locks: Locking | None
    timing: RunTiming | None
    admin: RunAdmin | None = None
    """The ``RunAdmin`` facet, when the store declares any capability it carries."""
    errors: ErrorHistory | None = None
    history: StepHistory | None = None
    lifecycle: Lifecycle | None = None
    deadlines: RunDeadlines | None = None
    stats: RunStats | None = None
    servers: Servers | None = None
    rates: RateLimiting | None = None
    async_transactional: AsyncTransactionalEnqueue | None = None
    """The transactional enqueue on async connections, where the store has it."""
    retention: Retention | None = None
    """The ``Retention`` facet, when the store declares ``RETENTION`` or ``ARCHIVE``."""

    @classmethod
    def of(cls, store: Store) -> StoreFacets:
        """Check ``store`` (:func:`check_store`) and take its facets."""
        check_store(store)
        caps = store.capabilities
        return cls(
            store=store,
            outcomes=store if isinstance(store, BatchOutcomes) else KernelOutcomes(store),
            enqueue=(store if isinstance(store, StreamedEnqueue) else KernelStreamedEnqueue(store)),
            transactional=(
                store
                if Cap.TRANSACTIONAL_ENQUEUE in caps and isinstance(store, TransactionalEnqueue)
                else None
            ),
            clock=store if Cap.DATABASE_CLOCK in caps and isinstance(store, ServerClock) else None,
            schedules=store if Cap.CRON in caps and isinstance(store, Schedules) else None,
            leadership=(
                store if Cap.LEADER_ELECTION in caps and isinstance(store, Leadership) else None
            ),
            queue_control=(
                store
                if caps & {Cap.PAUSE_QUEUE, Cap.PAUSE_WORKFLOW} and isinstance(store, QueueControl)
                else None
            ),
            journal=store if Cap.JOURNAL in caps and isinstance(store, Journaling) else None,
            locks=store if Cap.LOCKS in caps and isinstance(store, Locking) else None,
            timing=(
                store
                if caps & {Cap.RESCHEDULE, Cap.FORCE_RUN, Cap.DUE_QUERY}
                and isinstance(store, RunTiming)
                else None
            ),
            admin=store if caps & _ADMIN and isinstance(store, RunAdmin) else None,
            errors=(
                store if Cap.ERROR_HISTORY in caps and isinstance(store, ErrorHistory) else None
            ),
            history=(
                store if Cap.STEP_HISTORY in caps and isinstance(store, StepHistory) else None
            ),
            lifecycle=store if Cap.LIFECYCLE in caps and isinstance(store, Lifecycle) else None,
            deadlines=(
                store if Cap.RUN_TIMEOUT in caps and isinstance(store, RunDeadlines) else None
            ),
            stats=store if Cap.STATS in caps and isinstance(store, RunStats) else None,
            servers=store if Cap.SERVERS in caps and isinstance(store, Servers) else None,
            rates=store if Cap.RATE_LIMIT in caps and isinstance(store, RateLimiting) else None,
            async_transactional=(
                store
                if Cap.TRANSACTIONAL_ENQUEUE in caps
                and isinstance(store, AsyncTransactionalEnqueue)
                else None
            ),
            retention=(
                store
                if caps & {Cap.RETENTION, Cap.ARCHIVE} and isinstance(store, Retention)
                else None
            ),
        )


_ADMIN = next(facet.capabilities for facet in FACETS if facet.protocol is RunAdmin)
