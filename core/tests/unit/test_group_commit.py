"""Group commit: who leads a write, what it gathers, and which slots it frees.

The store is the real memory store behind a recorder that can hold a write
open, so each test sequences the threads instead of timing them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import cairnflow as cf
from cairnflow._engine._commit import GroupCommit
from cairnflow.store import (
    ClaimedAttempt,
    ClaimRequest,
    FinishResult,
    MemoryStore,
    Outcome,
    Succeeded,
)

WAIT = 10.0


class RecordingStore:
    """The memory store; records each ``finish_many`` batch and can hold the next one open."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.batches: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        self.batches.append([token for token, _ in items])
        self.entered.set()
        assert self.hold.wait(WAIT)
        result: list[FinishResult] = self.inner.finish_many(items, now)
        return result

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        # Two calls where a SQL store makes one transaction: enough for the order tested here.
        results = self.finish_many(items, now)
        return results, (self.inner.claim(claim) if claim is not None else [])


def _claimed(store: RecordingStore, count: int) -> list[str]:
    wf = cf.Workflow("gc", steps=[cf.Step("a", lambda c, d: d)])
    client = cf.Client(store.inner)
    client.register(wf)
    for n in range(count):
        client.enqueue("gc", n)
    now = time.time_ns()
    claimed = store.inner.claim(ClaimRequest(frozenset({"gc"}), count, now, now + 10**11, "n"))
    assert len(claimed) == count
    return [a.token for a in claimed]


def _prime(commit: GroupCommit, store: RecordingStore, token: str, seconds: float) -> None:
    """One slow write, so the moving average of write times (and the gathering window) is known."""
    real = store.inner.finish_many

    def slow(items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        time.sleep(seconds)
        result: list[FinishResult] = real(items, now)
        return result

    store.inner.finish_many = slow  # type: ignore[method-assign]
    try:
        assert commit.finish(token, Succeeded(b"0")).applied
    finally:
        del store.inner.finish_many
    store.batches.clear()
    assert commit.write_time >= seconds / 8


def _finish_in_threads(commit: GroupCommit, tokens: list[str]) -> list[threading.Thread]:
    barrier = threading.Barrier(len(tokens))

    def finish(token: str) -> None:
        barrier.wait()
        assert commit.finish(token, Succeeded(b"1")).applied

    threads = [threading.Thread(target=finish, args=(t,)) for t in tokens]
    for thread in threads:
        thread.start()
    return threads


def test_a_leader_gathers_the_outcomes_of_its_running_siblings_into_one_write() -> None:
    store = RecordingStore()
    primer, *tokens = _claimed(store, 5)
    running = len(tokens)
    commit = GroupCommit(store, time.time_ns, busy=lambda: running, max_gather=WAIT)
    _prime(commit, store, primer, 1.6)  # the window becomes 100 ms or more
    for thread in _finish_in_threads(commit, tokens):
        thread.join(WAIT)
    assert [sorted(batch) for batch in store.batches] == [sorted(tokens)]


def test_a_lone_outcome_is_written_at_once_when_nothing_else_runs() -> None:
    # busy() counts only the outcome itself: the leader must not wait for anyone. The write
    # is held open, and a second outcome arriving meanwhile goes into the next write.
    store = RecordingStore()
    primer, first, second = _claimed(store, 3)
    busy = [1]
    commit = GroupCommit(store, time.time_ns, busy=lambda: busy[0], max_gather=WAIT)
    _prime(commit, store, primer, 1.6)
    store.hold.clear()
    store.entered.clear()
    lead = threading.Thread(target=commit.finish, args=(first, Succeeded(b"1")))
    lead.start()
    assert store.entered.wait(WAIT), "the lone outcome was not written while nothing else ran"
    assert store.batches == [[first]]
    busy[0] = 2
    follow = threading.Thread(target=commit.finish, args=(second, Succeeded(b"2")))
    follow.start()
    store.hold.set()
    lead.join(WAIT)
    follow.join(WAIT)
    assert store.batches == [[first], [second]]


def test_a_leader_whose_siblings_never_finish_writes_alone_after_the_window() -> None:
    store = RecordingStore()
    primer, token = _claimed(store, 2)
    commit = GroupCommit(store, time.time_ns, busy=lambda: 8, max_gather=0.05)
    _prime(commit, store, primer, 0.2)
    done = threading.Thread(target=commit.finish, args=(token, Succeeded(b"1")))
    done.start()
    done.join(WAIT)
    assert not done.is_alive(), "the leader waited for siblings forever"
    assert store.batches == [[token]]


def test_the_slots_of_a_batch_are_freed_as_what_it_claimed_is_held() -> None:
    store = RecordingStore()
    (token,) = _claimed(store, 1)
    events: list[str] = []

    def plan(freed: int, eager: bool) -> ClaimRequest:
        now = time.time_ns()
        return ClaimRequest(frozenset({"gc"}), freed, now, now + 10**11, "n")

    commit = GroupCommit(
        store,
        time.time_ns,
        plan_claim=plan,
        accept=lambda claimed, request, started, freed: events.append(f"accept, freeing {freed}"),
        free_slots=lambda tokens: events.append(f"free {tokens}"),
    )
    assert commit.claims
    assert commit.finish(token, Succeeded(b"1")).applied
    # Freed by the same call that holds what was claimed: nothing can claim in between.
    assert events == [f"accept, freeing {[token]}"]
