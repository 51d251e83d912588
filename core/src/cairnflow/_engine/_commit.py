"""Group commit: outcomes of attempts that finish at the same time share one transaction.

A worker hands its outcome over and waits until it is written. The first
waiter that finds no write in progress becomes the leader: it takes every
outcome queued so far and writes them in one ``finish_many`` transaction,
while outcomes that arrive meanwhile queue up for the next leader. Under load
this turns N transactions into one without adding latency when idle (a lone
outcome is written at once by its own worker). Each outcome is still fenced
by its own lease token inside that transaction.

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
Accept = Callable[[list[ClaimedAttempt], ClaimRequest, float], None]


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
        max_batch: int = 64,
    ) -> None:
        self._store = store
        self._now = now
        self._max_batch = max_batch
        self._finish_many: FinishMany | None = getattr(store, "finish_many", None)
        # With both hooks, the leader claims for the slots its batch frees in
        # the same transaction: one commit both ends and starts attempts.
        self._finish_and_claim: FinishAndClaim | None = (
            getattr(store, "finish_and_claim", None) if plan_claim and accept else None
        )
        self._plan_claim = plan_claim
        self._accept = accept
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._writing = False

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
        while True:
            with self._cond:
                while not _done(mine) and self._writing:
                    self._cond.wait()
                if _done(mine):
                    return self._outcome_of(mine)
                # Nobody is writing: lead, with every outcome queued so far.
                self._writing = True
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
            try:
                self._write(batch)
            finally:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()

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
                if request is not None:
                    self._accept(claimed, request, started)
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
