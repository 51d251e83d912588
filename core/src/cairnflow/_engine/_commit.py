"""Group commit: outcomes of attempts that finish at the same time share one transaction.

A worker hands its outcome over and waits until it is written. The first
waiter that finds no write in progress becomes the leader: it takes every
outcome queued so far and writes them in one ``finish_many`` transaction,
while outcomes that arrive meanwhile queue up for the next leader. Under load
this turns N transactions into one without adding latency when idle (a lone
outcome is written at once by its own worker). Each outcome is still fenced
by its own lease token inside that transaction.

Attempts claimed together tend to end together, and the first of them to end
would otherwise lead a batch of one while its siblings queue behind it: one
transaction each for one outcome and for the rest. So a leader that knows other
attempts of its client are still running gathers for a moment first: until
every running attempt has queued its outcome, the batch is full, or half the
duration of a recent write has passed. Waiting costs the leader at most half a
write; it saves its siblings a whole one. With nothing else running (an idle
client, one step at a time) the leader writes at once.

A store without ``finish_many`` gets one ``finish`` per outcome.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ..store import ClaimedAttempt, ClaimRequest, FinishResult, Outcome, Store
from ._attempt import monotonic

__all__ = ["GroupCommit"]

FinishMany = Callable[[Sequence[tuple[str, Outcome]], int], list[FinishResult]]
FinishAndClaim = Callable[
    [Sequence[tuple[str, Outcome]], int, ClaimRequest | None],
    tuple[list[FinishResult], list[ClaimedAttempt]],
]
PlanClaim = Callable[[int, bool], ClaimRequest | None]
Accept = Callable[[list[ClaimedAttempt], ClaimRequest, float, Sequence[str]], None]
FreeSlots = Callable[[list[str]], None]
Busy = Callable[[], int]

MAX_GATHER = 0.005
"""The longest a leader waits for siblings, in seconds, however slow the writes are."""


class _Pending:
    __slots__ = ("eager", "error", "outcome", "result", "token")

    def __init__(self, token: str, outcome: Outcome, eager: bool) -> None:
        self.token = token
        self.outcome = outcome
        self.eager = eager
        self.result: FinishResult | None = None
        self.error: BaseException | None = None


def _done(pending: _Pending) -> bool:
    return pending.result is not None or pending.error is not None


class GroupCommit:
    """Writes outcomes for one client; see the module docstring."""

    def __init__(
        self,
        store: Store,
        now: Callable[[], int],
        *,
        plan_claim: PlanClaim | None = None,
        accept: Accept | None = None,
        free_slots: FreeSlots | None = None,
        busy: Busy | None = None,
        max_batch: int = 64,
        max_gather: float = MAX_GATHER,
    ) -> None:
        self._store = store
        self._now = now
        self._max_batch = max_batch
        self._max_gather = max_gather
        self._free_slots = free_slots
        self._busy = busy
        self._write_time = 0.0
        """A moving average of the duration of a batch write, in seconds."""
        self._finish_many: FinishMany | None = getattr(store, "finish_many", None)
        # With both hooks, the leader claims for the slots its batch frees in
        # the same transaction: one commit both ends and starts attempts.
        self._finish_and_claim: FinishAndClaim | None = (
            getattr(store, "finish_and_claim", None) if plan_claim and accept else None
        )
        self._plan_claim = plan_claim
        self._accept = accept
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        """Notified when a write ends."""
        self._arrived = threading.Condition(lock)
        """Notified when an outcome is queued (a gathering leader waits on it)."""
        self._queue: list[_Pending] = []
        self._gathering = False
        """True while a leader waits for siblings (only then does an arrival notify)."""
        self._writing = False

    @property
    def write_time(self) -> float:
        """The moving average of a batch write's duration, in seconds (0.0 before any)."""
        return self._write_time

    @property
    def claims(self) -> bool:
        """True when the writes also claim for the slots they free."""
        return self._finish_and_claim is not None

    def finish(self, token: str, outcome: Outcome, *, eager: bool = False) -> FinishResult:
        """Write ``outcome`` (alone or with others); raise what the store raised for it.

        ``eager``: the outcome may make other steps ready, so the write claims
        even when the client saw no backlog.
        """
        if self._finish_many is None:
            return self._store.finish(token, outcome, self._now())
        mine = _Pending(token, outcome, eager)
        with self._cond:
            self._queue.append(mine)
            if self._gathering and self._gathered():
                self._arrived.notify()  # the last sibling the leader waits for
        while True:
            with self._cond:
                while not _done(mine) and self._writing:
                    self._cond.wait()
                if _done(mine):
                    return self._outcome_of(mine)
                # Nobody is writing: lead, with every outcome queued so far.
                self._writing = True
                self._gather()
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
            started = monotonic()
            try:
                self._write(batch)
            finally:
                elapsed = monotonic() - started
                with self._cond:
                    self._write_time += (elapsed - self._write_time) / 8
                    self._writing = False
                    self._cond.notify_all()

    def _gather(self) -> None:
        """Wait (lock held) for running siblings to queue their outcomes; see the module doc."""
        if self._busy is None:
            return
        window = min(self._write_time / 2, self._max_gather)
        if window <= 0:
            return
        deadline = monotonic() + window
        self._gathering = True
        try:
            while not self._gathered():
                left = deadline - monotonic()
                if left <= 0:
                    return
                self._arrived.wait(left)
        finally:
            self._gathering = False

    def _gathered(self) -> bool:
        """True (lock held) when the batch is full or every busy attempt has queued."""
        assert self._busy is not None
        return len(self._queue) >= self._max_batch or len(self._queue) >= self._busy()

    def _write(self, batch: list[_Pending]) -> None:
        assert self._finish_many is not None
        items = [(p.token, p.outcome) for p in batch]
        try:
            if self._finish_and_claim is not None:
                assert self._plan_claim is not None
                assert self._accept is not None
                request = self._plan_claim(len(batch), any(p.eager for p in batch))
                started = monotonic()
                results, claimed = self._finish_and_claim(items, self._now(), request)
                # The batch's slots are free now, not when its workers wake up; freed and
                # refilled in one step, so no other claim can take them in between.
                written = [p.token for p in batch]
                if request is not None:
                    self._accept(claimed, request, started, written)
                elif self._free_slots is not None:
                    self._free_slots(written)
            else:
                results = self._finish_many(items, self._now())
        except Exception as error:  # noqa: BLE001 - each waiter gets the error of its write
            if len(batch) == 1:
                batch[0].error = error
                return
            # Something in the batch failed it: write each alone, so one bad
            # outcome cannot keep the others from being written.
            for pending in batch:
                try:
                    pending.result = self._store.finish(pending.token, pending.outcome, self._now())
                except Exception as alone:  # noqa: BLE001 - reported to its own waiter
                    pending.error = alone
            return
        for pending, result in zip(batch, results, strict=True):
            pending.result = result

    @staticmethod
    def _outcome_of(pending: _Pending) -> FinishResult:
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result
