"""A client never holds more attempts than its workers plus its prefetch, and never runs more
steps at once than it has workers, however its outcomes are batched.

The committer frees the slots of the outcomes it writes and refills them in the
same transaction; the dispatcher claims for idle slots too; while steps are
short, claims take up to ``prefetch`` attempts ahead of a free worker. Counted
here from what the store handed out and took back, and from inside the step,
on a real SQLite file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cairnflow as cf
from cairnflow.store import ClaimedAttempt, ClaimRequest, FinishResult, Outcome
from cairnflow_sqlite import SQLiteStore

WORKERS = 4


class LeaseLedger:
    """The store, counting the attempts it handed out that have no outcome written yet."""

    def __init__(self, inner: SQLiteStore, write_delay: float = 0.0) -> None:
        self._inner = inner
        self._write_delay = write_delay
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
        time.sleep(self._write_delay)
        results, claimed = self._inner.finish_and_claim(items, now, claim)
        self._taken_back([token for token, _ in items])
        return results, self._handed(claimed)


class Concurrency:
    """Counts the steps running at once, from inside the step."""

    def __init__(self, seconds: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._seconds = seconds
        self.now = 0
        self.most = 0

    def step(self, ctx: cf.StepContext, data: Any) -> Any:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self._seconds)
            return data
        finally:
            with self._lock:
                self.now -= 1


def _drain(
    tmp_path: Path, *, step: float = 0.0, write: float = 0.0, runs: int = 600, **options: Any
) -> tuple[LeaseLedger, Concurrency]:
    inner = SQLiteStore(tmp_path / "slots.db")
    inner.migrate()
    ledger = LeaseLedger(inner, write_delay=write)
    running = Concurrency(step)
    wf = cf.Workflow("slots", steps=[cf.Step("only", running.step)])
    client = cf.Client(ledger, workers=WORKERS, poll_interval=0.05, **options)  # type: ignore[arg-type]
    client.register(wf)
    refs = client.enqueue_many(cf.Job("slots", n) for n in range(runs))
    with client:
        for ref in refs:
            assert client.wait(ref, timeout=120).status is cf.Status.SUCCEEDED
    inner.close()
    return ledger, running


def test_without_prefetch_a_busy_client_holds_at_most_one_attempt_per_worker(
    tmp_path: Path,
) -> None:
    ledger, running = _drain(tmp_path, prefetch=0)
    assert ledger.most <= WORKERS, f"{ledger.most} attempts held by a client of {WORKERS}"
    assert ledger.most == WORKERS, "the test never filled every slot: it proves nothing"
    assert running.most <= WORKERS


def test_a_prefetching_client_holds_at_most_its_prefetch_ahead_and_runs_one_step_per_worker(
    tmp_path: Path,
) -> None:
    # Steps of 1 ms against writes of 10 ms or more: the client claims ahead, and steps that
    # sleep run side by side, so both bounds are tested where they could break.
    ledger, running = _drain(tmp_path, step=0.001, write=0.01, prefetch=2)
    assert ledger.most <= WORKERS + 2, f"{ledger.most} attempts held by a client of {WORKERS}+2"
    assert ledger.most > WORKERS, "the client never claimed ahead: the test proves nothing"
    assert running.most <= WORKERS, f"{running.most} steps ran at once on {WORKERS} workers"
    assert running.most > 1, "no two steps ever ran at once: the test proves nothing"


def test_steps_longer_than_the_writes_are_never_claimed_ahead(tmp_path: Path) -> None:
    # Writes of a few ms against steps of 250 ms: claiming ahead would only hold leases a
    # free worker elsewhere could use. (Steps of 20 ms were not enough on a machine loaded
    # 7 times over its cores: SQLite's commits there averaged longer than the steps, and the
    # engine rightly claimed ahead.)
    ledger, running = _drain(tmp_path, step=0.25, prefetch=WORKERS, runs=32)
    assert ledger.most <= WORKERS, f"{ledger.most} attempts held by a client of {WORKERS}"
    assert running.most == WORKERS
