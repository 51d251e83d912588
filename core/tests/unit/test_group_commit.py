"""The committer: what it gathers, when it writes alone, which slots it frees, and that a
worker never waits for the database.

The store is the real memory store behind a recorder that can hold a write
open, so each test sequences the threads instead of timing them. The client is
never started: the tests drive its committer alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import cairnflow as cf
from cairnflow._engine._attempt import RunningAttempt
from cairnflow._engine._commit import GroupCommit
from cairnflow._engine._state import EngineState
from cairnflow.store import (
    ClaimedAttempt,
    ClaimRequest,
    FinishResult,
    MemoryStore,
    Outcome,
    Succeeded,
)
from cairnflow.testing import wait_until

WAIT = 10.0


class RecordingStore:
    """The memory store; records each batch written and can hold the next write open."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.batches: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.delay = 0.0
        self.unavailable = 0
        """Writes still to fail with Unavailable (-1: every one)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _written(self, items: Sequence[tuple[str, Outcome]]) -> None:
        if self.unavailable:
            self.unavailable -= 1 if self.unavailable > 0 else 0
            raise cf.Unavailable("the server is restarting")
        self.batches.append([token for token, _ in items])
        self.entered.set()
        assert self.hold.wait(WAIT)
        time.sleep(self.delay)

    def finish(self, token: str, outcome: Outcome, now: int) -> FinishResult:
        self._written([(token, outcome)])
        result: FinishResult = self.inner.finish(token, outcome, now)
        return result

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        # Two calls where a SQL store makes one transaction: enough for the order tested here.
        self._written(items)
        results: list[FinishResult] = self.inner.finish_many(items, now)
        return results, (self.inner.claim(claim) if claim is not None else [])


class Harness:
    """A client's engine state on a recording store, its committer, and claimed attempts."""

    def __init__(self, *, max_gather: float = WAIT) -> None:
        self.store = RecordingStore()
        self.workflow = cf.Workflow("gc", steps=[cf.Step("a", lambda c, d: d)])
        self.client = cf.Client(self.store, workers=8)  # type: ignore[arg-type]
        self.client.register(self.workflow)
        self.state: EngineState = self.client._state
        self.commit = GroupCommit(self.state, max_gather=max_gather)
        self.commit.start()

    def hold(self, count: int) -> list[RunningAttempt]:
        """Claim ``count`` attempts and hold them, as the dispatcher would."""
        for n in range(count):
            self.client.enqueue("gc", n)
        now = time.time_ns()
        request = ClaimRequest(frozenset({"gc"}), count, now, now + 10**11, "n")
        claimed = self.store.inner.claim(request)
        assert len(claimed) == count
        attempts = [RunningAttempt(c, time.monotonic()) for c in claimed]
        self.state.track(attempts)
        return attempts

    def put(self, attempt: RunningAttempt, value: bytes = b"1") -> None:
        self.commit.put(attempt.claimed, Succeeded(value), holder=attempt)

    def prime(self, seconds: float) -> None:
        """One slow write, so the moving average of write times (the gathering window) is known."""
        (attempt,) = self.hold(1)
        self.store.delay = seconds
        self.put(attempt)
        wait_until(lambda: not self.state.held_attempts(), what="the priming write")
        self.store.delay = 0.0
        self.store.batches.clear()
        assert self.commit.write_time >= seconds / 8

    def close(self) -> None:
        self.store.hold.set()
        assert self.commit.close(WAIT)


@pytest.fixture
def harness() -> Iterator[Harness]:
    made = Harness()
    yield made
    made.close()


def test_a_worker_hands_its_outcome_over_without_waiting_for_the_write(harness: Harness) -> None:
    (attempt,) = harness.hold(1)
    harness.store.hold.clear()
    harness.put(attempt)  # returns while the write is held open
    assert harness.store.entered.wait(WAIT)
    # Until its outcome is written, the attempt keeps its slot and its lease.
    assert harness.state.held_attempts() == [attempt]
    assert harness.state.busy() == 1
    harness.store.hold.set()
    wait_until(lambda: not harness.state.held_attempts(), what="the release after the write")
    assert harness.state.busy() == 0
    assert harness.store.inner.get_run(attempt.claimed.run_id).state == "succeeded"


def test_the_committer_gathers_the_outcomes_of_running_siblings_into_one_write(
    harness: Harness,
) -> None:
    harness.prime(1.6)  # the window becomes 100 ms or more
    attempts = harness.hold(4)
    for attempt in attempts:
        harness.put(attempt)
    wait_until(lambda: not harness.state.held_attempts(), what="the batch")
    assert [sorted(batch) for batch in harness.store.batches] == [sorted(a.token for a in attempts)]


def test_a_lone_outcome_is_written_at_once_when_nothing_else_runs(harness: Harness) -> None:
    # busy() counts only the outcome itself: the committer must not wait for anyone. The
    # write is held open, and a second outcome arriving meanwhile goes into the next write.
    harness.prime(1.6)
    first, claimed_later = harness.hold(2)
    harness.state.untrack(claimed_later)  # as if it had not been claimed yet
    second = RunningAttempt(claimed_later.claimed, time.monotonic())
    harness.store.hold.clear()
    harness.store.entered.clear()
    harness.put(first)
    assert harness.store.entered.wait(WAIT), "the lone outcome was not written at once"
    assert harness.store.batches == [[first.token]]
    harness.state.track([second])
    harness.put(second)
    harness.store.hold.set()
    wait_until(lambda: len(harness.store.batches) == 2, what="the second write")
    assert harness.store.batches == [[first.token], [second.token]]


def test_a_committer_whose_siblings_never_finish_writes_after_the_window() -> None:
    harness = Harness(max_gather=0.05)
    try:
        harness.prime(0.2)
        attempts = harness.hold(8)
        harness.put(attempts[0])
        wait_until(lambda: harness.store.batches, what="the write after the window")
        assert harness.store.batches == [[attempts[0].token]]
    finally:
        harness.close()


def test_the_slots_of_a_batch_are_freed_as_what_it_claimed_is_held(harness: Harness) -> None:
    written = harness.hold(2)
    for n in range(3):  # ready behind them: the write's claim takes them
        harness.client.enqueue("gc", n)
    accepted: list[tuple[int, list[str], int]] = []
    real_accept = harness.state.accept

    def accept(
        claimed: list[ClaimedAttempt],
        request: ClaimRequest,
        started: float,
        freed: Sequence[str] = (),
    ) -> None:
        real_accept(claimed, request, started, freed)
        accepted.append((request.limit, list(freed), harness.state.busy()))

    harness.state.accept = accept  # type: ignore[method-assign]
    for attempt in written:
        harness.put(attempt)
    wait_until(lambda: accepted, what="the write's claim")
    (limit, freed, busy), *_ = accepted
    assert limit == 8  # the six idle slots, plus the two the batch frees
    # Freed by the same call that holds what was claimed: nothing can claim in between.
    assert sorted(freed) == sorted(a.token for a in written)
    assert busy == 3
    assert harness.state.handoff.qsize() == 3  # handed to the workers


def test_close_writes_every_outcome_still_queued(harness: Harness) -> None:
    first, second = harness.hold(2)
    harness.store.hold.clear()
    harness.store.entered.clear()
    harness.put(first)
    assert harness.store.entered.wait(WAIT)
    harness.put(second)  # queued behind the open write
    closing = threading.Thread(target=harness.commit.close, args=(WAIT,))
    closing.start()
    harness.store.hold.set()
    closing.join(WAIT)
    assert not closing.is_alive()
    assert sorted(t for batch in harness.store.batches for t in batch) == sorted(
        [first.token, second.token]
    )
    assert not harness.state.held_attempts()


def test_an_outcome_after_close_is_written_by_the_caller(harness: Harness) -> None:
    (attempt,) = harness.hold(1)
    assert harness.commit.close(WAIT)
    harness.put(attempt)  # no committer any more: written here, at once
    assert harness.store.batches == [[attempt.token]]
    assert not harness.state.held_attempts()


def test_an_outage_is_waited_out_while_the_lease_may_hold(harness: Harness) -> None:
    (attempt,) = harness.hold(1)
    harness.store.unavailable = 2
    harness.put(attempt)
    wait_until(lambda: not harness.state.held_attempts(), what="the write after the outage")
    assert harness.store.batches == [[attempt.token]]
    assert harness.store.unavailable == 0
    assert harness.store.inner.get_run(attempt.claimed.run_id).state == "succeeded"


def test_an_outage_longer_than_the_lease_gives_the_attempt_up(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    (attempt,) = harness.hold(1)
    attempt.renewed_at = time.monotonic() - harness.state.settings.lease + 0.2
    harness.store.unavailable = -1  # never comes back
    with caplog.at_level(logging.ERROR, logger="cairnflow"):
        harness.put(attempt)
        wait_until(lambda: not harness.state.held_attempts(), what="the attempt given up")
    assert harness.store.batches == []
    assert "could not write the outcome" in caplog.text
    harness.store.unavailable = 0
