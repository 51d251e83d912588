"""How many attempts a claim asks for: free workers, the slots a write frees, and claiming
ahead while steps are shorter than the writes that end them."""

from __future__ import annotations

import time

import pytest

import cairnflow as cf
from cairnflow._engine._attempt import RunningAttempt
from cairnflow._engine._state import EngineState
from cairnflow.store import ClaimRequest, MemoryStore


def _state(**options: object) -> EngineState:
    client = cf.Client(MemoryStore(), workers=4, **options)  # type: ignore[arg-type]
    client.register(cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)]))
    return client._state


def _hold(state: EngineState, count: int) -> list[RunningAttempt]:
    """Enqueue and claim ``count`` attempts, and hold them as the dispatcher would."""
    client = cf.Client(state.store)
    client.register(cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)]))
    for n in range(count):
        client.enqueue("w", n)
    now = time.time_ns()
    claimed = state.store.claim(ClaimRequest(frozenset({"w"}), count, now, now + 10**11, "n"))
    attempts = [RunningAttempt(c, time.monotonic()) for c in claimed]
    state.track(attempts)
    return attempts


def _limit(state: EngineState, freeing: list[str] | None = None) -> int:
    state.request_claim()
    request = state.plan_claim(freeing or [])
    return 0 if request is None else request.limit


def test_a_claim_asks_for_the_free_workers_and_the_slots_its_write_frees() -> None:
    state = _state(prefetch=0)
    held = _hold(state, 3)
    assert _limit(state) == 1
    assert _limit(state, [held[0].token, held[1].token]) == 3
    state.untrack(held[2])  # released already: freeing it again frees nothing more
    assert _limit(state, [held[2].token]) == 2


def test_short_steps_claim_up_to_prefetch_ahead_of_the_free_workers() -> None:
    state = _state(prefetch=3)
    _hold(state, 4)
    assert _limit(state) == 0  # nothing measured yet: claim for free workers only
    state.write_time = 0.002
    state.attempt_ran(0.0001)
    assert state.claim_ahead() == 3
    assert _limit(state) == 3


def test_steps_longer_than_a_write_claim_only_for_free_workers() -> None:
    state = _state(prefetch=3)
    _hold(state, 2)
    state.write_time = 0.002
    for _ in range(50):
        state.attempt_ran(0.05)
    assert state.claim_ahead() == 0
    assert _limit(state) == 2


def test_prefetch_defaults_to_the_worker_count_and_is_checked() -> None:
    assert _state().settings.prefetch == 4
    assert _state(prefetch=0).settings.prefetch == 0
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="prefetch must be an int >= 0"):
            _state(prefetch=bad)
