"""A client never holds more attempts than it has workers, however its outcomes are batched.

Group commit frees the slots of the outcomes it writes and refills them in the
same transaction; the dispatcher claims for idle slots too. Counted here from
what the store handed out and took back, on a real SQLite file.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cairnflow as cf
from cairnflow.store import ClaimedAttempt, ClaimRequest, FinishResult, Outcome
from cairnflow_sqlite import SQLiteStore

WORKERS = 4


class LeaseLedger:
    """The store, counting the attempts it handed out that have no outcome written yet."""

    def __init__(self, inner: SQLiteStore) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.outstanding: set[str] = set()
        self.most = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _handed(self, claimed: list[ClaimedAttempt]) -> list[ClaimedAttempt]:
        with self._lock:
            self.outstanding.update(a.token for a in claimed)
            self.most = max(self.most, len(self.outstanding))
        return claimed

    def _taken_back(self, tokens: Sequence[str]) -> None:
        with self._lock:
            self.outstanding.difference_update(tokens)

    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        return self._handed(self._inner.claim(request))

    def finish(self, token: str, outcome: Outcome, now: int) -> FinishResult:
        result = self._inner.finish(token, outcome, now)
        self._taken_back([token])
        return result

    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        results = self._inner.finish_many(items, now)
        self._taken_back([token for token, _ in items])
        return results

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        results, claimed = self._inner.finish_and_claim(items, now, claim)
        self._taken_back([token for token, _ in items])
        return results, self._handed(claimed)


def test_a_busy_client_holds_at_most_one_attempt_per_worker(tmp_path: Path) -> None:
    inner = SQLiteStore(tmp_path / "slots.db")
    inner.migrate()
    ledger = LeaseLedger(inner)
    wf = cf.Workflow("slots", steps=[cf.Step("only", lambda ctx, data: data)])
    client = cf.Client(ledger, workers=WORKERS, poll_interval=0.05)  # type: ignore[arg-type]
    client.register(wf)
    refs = client.enqueue_many(cf.Job("slots", n) for n in range(600))
    with client:
        for ref in refs:
            assert client.wait(ref, timeout=120).status is cf.Status.SUCCEEDED
    assert ledger.most <= WORKERS, f"{ledger.most} attempts held by a client of {WORKERS}"
    assert ledger.most == WORKERS, "the test never filled every slot: it proves nothing"
    inner.close()
