"""Group commit: one committer thread writes the outcomes of a client's attempts.

A worker that has an outcome hands it to the committer and goes back to the
pool at once; it never waits for the database. The committer takes every
outcome queued so far and writes them in one transaction that also claims for
the slots the batch frees (``finish_and_claim``), so one commit both ends and
starts attempts. Each outcome is still fenced by its own lease token inside
that transaction, and an attempt keeps its slot and its lease until its
outcome is written.

Attempts claimed together tend to end together, and the first of them to end
would otherwise be written alone while its siblings queue behind it: one
transaction for one outcome and another for the rest. So a committer that
knows other attempts of its client are still running gathers for a moment
first: until every attempt holding a slot has queued its outcome, the batch is
full, or half the duration of a recent write has passed (never more than
:data:`MAX_GATHER`). With nothing else running (an idle client, one step at a
time) it writes at once.

A write that fails because the store is unavailable (a restart, a failover)
is tried again with backoff, so finished work is not thrown away by a short
outage: while the attempt's lease may still be valid, and for one lease length
at most (the lease keeper goes on renewing a lease whose outcome waits, so
without that bound an outcome the server drops the connection over would be
retried, and its lease renewed, forever). The pause before a retry holds back
that outcome only; the rest of the client's outcomes are written meanwhile.

An outcome the store refuses for what it is (too large, invalid), or one that
still could not be written when its outage bound ran out, becomes the failure
of its attempt, written in its place, so the run goes on or fails with the
reason instead of being retaken again and again. A value the store refuses
(:class:`~cairnflow.ValueRefused`, such as :class:`~cairnflow.PayloadTooLarge`)
fails the attempt for good with the store's own error: the same outcome would
be refused again. Any other error becomes :class:`~cairnflow.OutcomeRefused`,
decided by the step's retry policy. If even the failure cannot be written, the
attempt is left to its lease.

There is one write path: a store without the batch-outcomes facet
(:class:`~cairnflow.store.BatchOutcomes`) is written through
:class:`~cairnflow.store.KernelOutcomes`, one ``finish`` per outcome and then
the claim.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from .. import _faults
from .._errors import OutcomeRefused, Permanent, Unavailable, ValueRefused
from ..store import (
    AttemptState,
    ClaimedAttempt,
    ClaimRequest,
    Failed,
    FinishResult,
    Outcome,
    SleepUntil,
    Snoozed,
    WaitFor,
)
from . import _events as events
from ._attempt import RunningAttempt, monotonic
from ._failures import failure_outcome
from ._state import EngineState

__all__ = ["MAX_GATHER", "GroupCommit", "due_time"]

MAX_GATHER = 0.005
"""The longest the committer waits for siblings, in seconds, however slow the writes are."""

_FIRST_PAUSE = 0.05
_LONGEST_PAUSE = 2.0


class _Pending:
    """One outcome waiting to be written, and the attempt whose lease fences it."""

    __slots__ = (
        "claimed",
        "eager",
        "failing_since",
        "holder",
        "maybe_written",
        "not_before",
        "outcome",
        "pause",
        "refused",
    )

    def __init__(
        self,
        claimed: ClaimedAttempt,
        outcome: Outcome,
        eager: bool,
        holder: RunningAttempt | None,
    ) -> None:
        self.claimed = claimed
        self.outcome = outcome
        self.eager = eager
        self.holder = holder
        self.pause = _FIRST_PAUSE
        """How long to wait before trying again after the store was unavailable."""
        self.not_before = 0.0
        """When a retry of this outcome may be written (the monotonic clock)."""
        self.failing_since: float | None = None
        """When the store first failed to write it (the outage bound counts from here)."""
        self.refused = False
        """True once the outcome was replaced by the failure of its attempt."""
        self.maybe_written = False
        """True once a write of it met an outage: its COMMIT may have gone through."""


class GroupCommit:
    """The committer of one client; see the module docstring.

    :meth:`put` queues an outcome (from any thread) and returns at once.
    :meth:`start` starts the committer thread; :meth:`close` writes what is
    still queued and stops it.
    """

    def __init__(
        self, state: EngineState, *, max_batch: int = 64, max_gather: float = MAX_GATHER
    ) -> None:
        self._state = state
        self._max_batch = max_batch
        self._max_gather = max_gather
        self._outcomes = state.facets.outcomes
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        """Notified when the first outcome is queued, when a gathering batch is complete,
        and on close."""
        self._queue: list[_Pending] = []
        self._later: list[_Pending] = []
        """Outcomes waiting out a pause before they are tried again (not in the way of
        the others)."""
        self._first_queued_at = 0.0
        self._gathering = False
        """True while the committer waits for siblings (only then does an arrival notify)."""
        self._closing = False
        self._given_up = threading.Event()
        """Set when :meth:`close` stopped waiting: outages are not waited out any more."""
        self._thread = threading.Thread(
            target=self._loop, name=f"cairnflow-committer-{state.settings.node_id}", daemon=True
        )

    @property
    def write_time(self) -> float:
        """The moving average of a batch write's duration, in seconds (0.0 before any)."""
        return self._state.write_time

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the committer thread."""
        self._thread.start()

    def close(self, timeout: float | None = None) -> bool:
        """Write every outcome still queued, then stop; False if that took over ``timeout``."""
        with self._lock:
            self._closing = True
            self._arrived.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                self._given_up.set()
                self._arrived.notify()
            return False
        return True

    # -- queueing ------------------------------------------------------------------------------
    def put(
        self,
        claimed: ClaimedAttempt,
        outcome: Outcome,
        *,
        eager: bool = False,
        holder: RunningAttempt | None = None,
    ) -> None:
        """Queue ``outcome`` of the attempt ``claimed`` for writing; return at once.

        ``eager``: the outcome may make other steps ready, so the write claims
        even when the client saw no backlog. ``holder``: the attempt this
        client holds (its slot and lease are released once the outcome is
        written); None for an attempt it does not hold (an abandoned one).
        """
        pending = _Pending(claimed, outcome, eager, holder)
        with self._lock:
            if not self._thread.is_alive() and (self._closing or self._given_up.is_set()):
                inline = True
            else:
                inline = False
                queue = self._queue
                queue.append(pending)
                if len(queue) == 1:
                    self._first_queued_at = monotonic()
                    self._arrived.notify()
                elif self._gathering and self._gathered():
                    self._arrived.notify()  # the last sibling the committer waits for
        if inline:  # the committer is gone (the client stopped): write it here
            self._write([pending])

    # -- the committer thread ---------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._take_due_retries():
                    if self._closing and not self._later:
                        return
                    self._arrived.wait(self._until_next_retry())
                if not self._closing:
                    self._gather()
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
                if self._queue:
                    self._first_queued_at = monotonic()
            try:
                self._write(batch)
            except BaseException:  # never lose the thread: log, and the leases run out
                self._state.log.exception("the committer failed writing %d outcome(s)", len(batch))
                self._state.untrack_all(p.holder for p in batch if p.holder is not None)

    def _take_due_retries(self) -> bool:
        """Move (lock held) the retries whose pause is over to the front; True if any is queued."""
        if self._later:
            now = monotonic()
            over = self._given_up.is_set()
            due = [p for p in self._later if over or p.not_before <= now]
            if due:
                self._later = [p for p in self._later if p not in due]
                self._queue[:0] = due
                self._first_queued_at = now
        return bool(self._queue)

    def _until_next_retry(self) -> float | None:
        """Seconds (lock held) until the earliest paused retry may be tried; None: none."""
        if not self._later:
            return None
        return max(0.0, min(p.not_before for p in self._later) - monotonic())

    def _gather(self) -> None:
        """Wait (lock held) for running siblings to queue their outcomes; see the module doc."""
        window = min(self._state.write_time / 2, self._max_gather)
        if window <= 0 or self._gathered():
            return
        deadline = self._first_queued_at + window
        self._gathering = True
        try:
            while not self._gathered() and not self._closing:
                left = deadline - monotonic()
                if left <= 0:
                    return
                self._arrived.wait(left)
        finally:
            self._gathering = False

    def _gathered(self) -> bool:
        """True (lock held) when the batch is full or every attempt holding a slot has queued."""
        queued = len(self._queue)
        return queued >= self._max_batch or queued >= self._state.busy()

    # -- writing -------------------------------------------------------------------------------
    def _write(self, batch: list[_Pending]) -> None:
        """Write ``batch`` (claiming for its slots where the store can), then react to it."""
        state = self._state
        items = [(p.claimed.token, p.outcome) for p in batch]
        results: list[FinishResult | BaseException]
        request: ClaimRequest | None = None
        refilled = False
        started = monotonic()
        try:
            if _faults.plan is not None:
                _faults.fire(_faults.OUTCOME_BEFORE_COMMIT)
            tokens = [p.claimed.token for p in batch]
            request = state.plan_claim(tokens, eager=any(p.eager for p in batch))
            claim_started = monotonic()
            written, claimed = self._outcomes.finish_and_claim(items, state.now(), request)
            # The batch's slots are free now; freed and refilled in one step, so no
            # other claim can take them in between.
            if request is not None:
                accepted, request = request, None  # accepted: nothing left to release
                state.accept(claimed, accepted, claim_started, tokens)
                refilled = True
            else:
                state.free_slots(tokens)
            results = list(written)
        except BaseException as error:  # noqa: BLE001 - each outcome is tried on its own
            if isinstance(error, Unavailable):
                for pending in batch:
                    pending.maybe_written = True
            # Something in the batch failed it: write each alone, so one bad outcome
            # cannot keep the others from being written.
            results = [error] if len(batch) == 1 else [self._finish_alone(p) for p in batch]
            refilled = False
            if request is not None:
                # The claim planned for these slots was not made: give its reservation
                # back; the dispatcher claims once the slots are released below.
                state.release(request)
                state.wake()
        finally:
            state.write_time += (monotonic() - started - state.write_time) / 8
        self._react(batch, results, refilled=refilled)

    def _finish_alone(self, pending: _Pending) -> FinishResult | BaseException:
        state = self._state
        try:
            return state.store.finish(pending.claimed.token, pending.outcome, state.now())
        except BaseException as error:  # noqa: BLE001 - reported for this outcome alone
            if isinstance(error, Unavailable):
                pending.maybe_written = True
            return error

    def _react(
        self,
        batch: Sequence[_Pending],
        results: Sequence[FinishResult | BaseException],
        *,
        refilled: bool,
    ) -> None:
        """After a write: release the written attempts, wake who should know, retry outages."""
        state = self._state
        node, now = state.settings.node_id, state.now()
        ready = 0
        finished = False
        landed = False  # a re-sent outcome was fenced out, maybe by its own earlier write
        retry: list[_Pending] = []
        written = [
            p.holder
            for p, result in zip(batch, results, strict=True)
            if p.holder is not None and not isinstance(result, BaseException)
        ]
        # Their slots were freed (and refilled) by the write itself where it claimed.
        state.untrack_all(written, wake=not refilled)
        for pending, result in zip(batch, results, strict=True):
            holder = pending.holder
            if isinstance(result, BaseException):
                if self._may_retry(pending, result) or self._refuse(pending, result):
                    retry.append(pending)
                    continue
                claimed = pending.claimed
                state.log.error(
                    "could not write the outcome of step %r of run %s; it will be retaken "
                    "after its lease",
                    claimed.step,
                    claimed.run_id,
                    exc_info=result,
                )
                if holder is not None:
                    state.untrack(holder)
                continue
            if not result.applied:
                claimed = pending.claimed
                why = "cancelled" if result.state is AttemptState.CANCELLED else "taken over"
                if pending.maybe_written and result.state is AttemptState.LOST:
                    # An earlier send of this outcome met an outage. If its COMMIT went
                    # through and only the reply was lost, that write ended the lease (so
                    # this one was fenced out: nothing is written twice) and may have made
                    # steps ready or ended the run: react as if it had.
                    why = "taken over, or its earlier write landed (its reply was lost)"
                    landed = True
                state.log.info(
                    "outcome of step %r of run %s not written: the attempt was %s",
                    claimed.step,
                    claimed.run_id,
                    why,
                )
                continue
            events.outcome_recorded(pending.claimed, pending.outcome, result, node, now)
            due = due_time(pending.outcome)
            if due is not None:
                state.add_timer(due)
            ready += result.ready
            finished = finished or result.run_status is not None
        if ready or landed:
            state.work_made_ready(others=landed or ready > state.idle())
        if finished or landed:
            state.run_finished()
        if retry:
            self._requeue(retry)

    def _may_retry(self, pending: _Pending, error: BaseException) -> bool:
        """True when ``error`` is an outage the outcome may still wait out (see the module doc).

        Sets the outcome's pause: the retry is written once it is over.
        """
        holder = pending.holder
        if not isinstance(error, Unavailable) or holder is None or self._given_up.is_set():
            return False
        now = monotonic()
        if pending.failing_since is None:
            pending.failing_since = now
        lease = self._state.settings.lease
        if now + pending.pause - pending.failing_since > lease:
            return False  # the outage bound: one lease length
        if holder.expired(now + pending.pause, lease):
            return False
        pending.not_before = now + pending.pause
        pending.pause = min(pending.pause * 2, _LONGEST_PAUSE)
        return True

    def _refuse(self, pending: _Pending, error: BaseException) -> bool:
        """Replace an outcome that cannot be written by the failure of its attempt.

        True when the failure is to be written in its place (at once); False
        when there is nothing left to try: the attempt is not this client's, or
        its failure itself could not be written.
        """
        holder = pending.holder
        if holder is None or pending.refused or self._given_up.is_set():
            return False
        claimed = pending.claimed
        cause: BaseException
        if isinstance(error, ValueRefused):
            cause = Permanent(error)  # the same outcome would be refused again
        else:
            waited = (
                ""
                if pending.failing_since is None
                else (f" after trying for {monotonic() - pending.failing_since:.1f}s")
            )
            cause = OutcomeRefused(
                f"the outcome of step {claimed.step!r} (attempt {claimed.attempt}) could not "
                f"be written{waited}: {type(error).__name__}: {error}"
            )
        state = self._state
        state.log.warning(
            "the outcome of step %r of run %s could not be written (%s); failing the attempt",
            claimed.step,
            claimed.run_id,
            error,
        )
        pending.outcome = failure_outcome(state, claimed, cause, state.now())
        pending.refused = True
        pending.not_before = 0.0
        return True

    def _requeue(self, retry: list[_Pending]) -> None:
        """Put ``retry`` aside until each one's pause is over (the others go on meanwhile)."""
        paused = [p for p in retry if p.not_before > monotonic()]
        if paused:
            claimed = paused[0].claimed
            self._state.log.warning(
                "store unavailable writing %d outcome(s) (step %r of run %s first); trying "
                "again in %.2fs",
                len(paused),
                claimed.step,
                claimed.run_id,
                max(0.0, min(p.not_before for p in paused) - monotonic()),
            )
        with self._lock:
            self._later.extend(retry)
            self._arrived.notify()


def due_time(outcome: Outcome) -> int | None:
    """When the step the outcome left behind falls due (a retry, snooze, sleep, wait deadline)."""
    if isinstance(outcome, Failed):
        return outcome.retry_at
    if isinstance(outcome, Snoozed | SleepUntil):
        return outcome.until
    if isinstance(outcome, WaitFor):
        return outcome.deadline
    return None
