"""The Store SPI: what a driver implements.

A store persists and claims; it owns no rule of execution beyond the atomic
state transitions below. Each operation is **one transaction**: it happens
whole or not at all, and never leaves a half-written run behind. The engine
(dispatcher, workers, lease renewal, retry decisions, timeouts) lives once in
the core and calls nothing but this protocol.

Conventions every implementation follows:

* Times are integer Unix nanoseconds, passed in by the engine. A store never
  reads a clock for due times or leases, so a fake clock (or the database
  clock) drives it completely. ``now`` is the scheduling clock; ``lease_until``
  and ``lease_now`` are the lease clock.
* Payloads, outputs, signal payloads and progress are opaque ``bytes``.
* Every transition of a claimed attempt is **fenced** by its lease token:
  it applies only while the step is ``running`` under that token; otherwise it
  changes nothing and reports :attr:`AttemptState.LOST` (or ``CANCELLED`` when
  the run or step was cancelled). The reclaimer uses the same guard, so it can
  never resurrect a step that finished between its read and its write.
* A step has a count of unfinished parents; a parent's success decrements its
  children's counts in the same transaction, and a child at zero becomes
  ready. A run has a count of unfinished steps; the success that brings it to
  zero finishes the run. No transition reads first and decides later, so two
  parents finishing at once on two nodes cannot both miss the fan-in.
* Idempotency keys are unique per workflow among **unfinished** runs; the key
  is released in the transaction that finishes the run.
* Lease tokens are 128 random bits, written fresh by every claim.
* A step due later than "now" when it becomes claimable (a delayed start, a
  retry's backoff, a snooze) is ``scheduled``, not ``ready``: only steps that
  are due wait in the claim's index, so a backlog of future work costs a claim
  nothing. ``advance_due`` promotes them when they fall due.

Optional operations are facets (:mod:`cairnflow.store._facets`): typed
protocols, one per group of capabilities, checked by
:func:`~cairnflow.store.check_store` against what the store declares.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from .._caps import Cap
from ..notify import Notifier
from ._records import (
    AdvanceResult,
    AttemptState,
    ClaimedAttempt,
    ClaimRequest,
    FinishResult,
    NewRun,
    Outcome,
    ReclaimResult,
    RenewResult,
    RunPage,
    RunQuery,
    SignalResult,
    StoredRun,
    StoreInfo,
)

__all__ = ["MigrationScripts", "Store"]


@runtime_checkable
class Store(Protocol):
    """The storage seam between the cairnflow engine and a database."""

    capabilities: frozenset[Cap]
    """Every capability this store promises; the conformance kit proves each one."""

    spi_version: str
    """The version of this SPI the store was written against (``cairnflow.SPI_VERSION``)."""

    # -- lifecycle ---------------------------------------------------------------
    def describe(self) -> StoreInfo:
        """Say what this store is: driver, distribution, version, redacted URL, server."""
        ...

    @property
    def channel(self) -> str:
        """The notification channel of this store's namespace (schema and prefix)."""
        ...

    def default_notifier(self) -> Notifier | None:
        """The notifier clients use unless given one (None: polling only)."""
        ...

    def migrate(self) -> list[str]:
        """Bring the schema up to date; return the versions applied now.

        Safe from many processes at once: each version is applied exactly once.
        """
        ...

    def check_schema(self) -> None:
        """Raise :class:`~cairnflow.SchemaNotReady` unless the schema is current.

        Names the missing table and says to migrate; a schema migrated by a
        newer release raises :class:`~cairnflow.SchemaTooNew` with both versions.
        """
        ...

    def close(self) -> None:
        """Release every connection the store opened (not ones it was given)."""
        ...

    # -- writing runs -------------------------------------------------------------
    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:
        """Create ``runs`` with their steps in one transaction; return their ids in order.

        The runs' ids are given (``NewRun.id``, and ``NewRun.step_ids`` for
        step rows): the store writes them and makes none of its own. All runs
        of one call land together or none. Creating a run whose id already
        exists with the same workflow is not an error: it returns without
        writing (the earlier attempt landed). The client sends a call again,
        with the same runs, when the first one's commit outcome was unknown
        (:class:`~cairnflow.Unavailable`), so on that retry either every id
        exists (return them, write nothing) or none does (write them all);
        :func:`~cairnflow.store.landed` decides which, and refuses ids that
        collided (some of the call's ids exist and others do not, or under
        another workflow) with :class:`~cairnflow.CairnError`.

        If any key is held by an unfinished run of the same workflow, other
        than the very run being created (its earlier attempt landed), or
        given twice in ``runs``, raise :class:`~cairnflow.DuplicateRun` and
        write nothing. A store reads nothing before its write to tell a retry
        from a first attempt: it looks only once the write was refused, so an
        enqueue costs no more than its inserts. A connection lost during the
        COMMIT raises :class:`~cairnflow.Unavailable` (the outcome is unknown);
        one lost before it may be retried by the store itself. (Inside the
        application's own transaction: :class:`~cairnflow.store.TransactionalEnqueue`.)
        """
        ...

    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        """Lease up to ``request.limit`` ready, due attempts of the given workflows.

        Queue by queue in the order of ``request.queues`` (``Cap.QUEUE``), each for
        at most its own limit and what the request still wants, so an earlier
        queue is drained first; within a queue, highest priority first, then
        earliest due. A run is claimed only from the queue it was created on
        (``NewRun.queue``: its workflow's, or an override, ``Cap.QUEUE_OVERRIDE``).
        A queue with a ``global_limit`` (``Cap.QUEUE_LIMIT_GLOBAL``) gives at most
        that limit minus its steps running now, on every client (an attempt whose
        lease ran out counts until it is reclaimed), counted and taken atomically:
        two claims at once never run more than the limit together.
        Each claimed step becomes ``running`` with a fresh token,
        ``lease_until``, the node id and its attempt number incremented. Two
        concurrent claims never return the same attempt.
        """
        ...

    def renew(self, tokens: Collection[str], lease_until: int) -> RenewResult:
        """Extend the leases of ``tokens`` that still hold their attempts."""
        ...

    def heartbeat(self, token: str, lease_until: int, now: int) -> AttemptState:
        """Renew one lease now and record the heartbeat time (fenced)."""
        ...

    def record_progress(self, token: str, progress: bytes, now: int) -> AttemptState:
        """Store ``progress`` on the attempt's step (fenced)."""
        ...

    def finish(self, token: str, outcome: Outcome, now: int) -> FinishResult:
        """Write the outcome of the attempt that ``token`` holds (fenced).

        * :class:`Succeeded`: store the output, make children whose parents all
          succeeded ready (due ``now``), finish the run when every step succeeded.
        * :class:`Failed`: count the failure and keep the error; with
          ``retry_at`` the step is scheduled for then (ready if already due),
          without it the step and the run fail and every other unfinished
          step is cancelled.
        * :class:`Snoozed`: scheduled for ``until``; no failure counted.
        * :class:`SleepUntil`: the step sleeps, holding ``output``, until ``until``.
        * :class:`WaitFor`: consume the oldest stored signal of that name and
          succeed with its payload, or wait (until ``deadline``, if any).
        """
        ...

    def hand_back(self, tokens: Collection[str], now: int) -> int:
        """Make the attempts ``tokens`` hold ready again at once (a clean stop); fenced."""
        ...

    def reclaim_expired(
        self,
        *,
        lease_now: int,
        now: int,
        workflows: Collection[str],
        max_reclaims: int,
        limit: int,
    ) -> ReclaimResult:
        """Take back running attempts whose ``lease_until`` is before ``lease_now``.

        An attempt reclaimed fewer than ``max_reclaims`` times is made ready
        (due ``now``) with its reclaim count incremented and its token cleared.
        Others are left as they are and returned as abandoned, for the engine
        to fail through :meth:`finish` with the same token.
        """
        ...

    def advance_due(self, *, now: int, workflows: Collection[str], limit: int) -> AdvanceResult:
        """Make scheduled steps due at ``now`` ready, finish due sleeps, fail overdue waits."""
        ...

    def send_signal(self, run_id: str, name: str, payload: bytes, now: int) -> SignalResult:
        """Resolve a step waiting for ``name`` with ``payload``, or keep the signal.

        Raises :class:`~cairnflow.RunNotFound` for an unknown run.
        """
        ...

    def cancel_run(self, run_id: str, now: int) -> bool:
        """Cancel an unfinished run and its unfinished steps; False if it had finished.

        Running attempts keep their tokens, so their next renewal reports them
        cancelled. Raises :class:`~cairnflow.RunNotFound` for an unknown run.
        """
        ...

    # -- reading ---------------------------------------------------------------------
    def get_run(self, run_id: str) -> StoredRun | None:
        """The run and all its steps, or None."""
        ...

    def list_runs(self, query: RunQuery) -> RunPage:
        """Runs matching ``query``, newest first, with step counts by status."""
        ...


@runtime_checkable
class MigrationScripts(Protocol):
    """A store whose migrations are SQL that a DBA can apply by hand (``cairn migrate --sql``).

    Requirement: the scripts, applied in their order to an empty namespace, leave
    the schema :meth:`Store.migrate` would leave, its ledger rows included, so
    :meth:`Store.check_schema` passes afterwards and a later ``migrate()`` applies
    only what is newer. Every store built on :class:`cairnflow.sql.SQLStore` has it;
    a store with no SQL (the memory store) does not.
    """

    def migration_scripts(self) -> list[tuple[str, str]]:
        """Every migration as ``(label, SQL text)``, in the order they are applied."""
        ...
