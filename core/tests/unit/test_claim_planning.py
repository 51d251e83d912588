"""How many attempts a claim asks for: free workers, the slots a write frees, and claiming
ahead while steps are shorter than the writes that end them."""

from __future__ import annotations

import time

import pytest

import cairnflow as cf
from cairnflow._engine._attempt import RunningAttempt
from cairnflow._engine._state import EngineState
from cairnflow.store import ClaimedAttempt, ClaimRequest, MemoryStore


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
    """The limit a claim planned now would ask for (its reservation given back at once)."""
    state.request_claim()
    request = state.plan_claim(freeing or [])
    if request is None:
        return 0
    state.release(request)
    return request.limit


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


def _short_steps(state: EngineState) -> None:
    """Make the client claim ahead: steps measured shorter than the writes that end them."""
    state.write_time = 0.002
    state.attempt_ran(0.0001)


def test_two_claims_planned_before_either_returns_never_share_a_slot() -> None:
    # The dispatcher's claim and the committer's refill both plan while neither has
    # returned: the second sees only what the first did not reserve.
    state = _state(prefetch=2)
    held = _hold(state, 2)
    _short_steps(state)
    state.request_claim()
    dispatcher = state.plan_claim()
    assert dispatcher is not None and dispatcher.limit == 4  # 4 workers + 2 ahead - 2 held
    committer = state.plan_claim([held[0].token], eager=True)
    assert committer is not None and committer.limit == 1  # only the slot its write frees
    assert state.plan_claim([], eager=True) is None  # nothing left to promise
    assert state.idle() <= 0


def test_a_client_never_holds_more_than_workers_plus_prefetch_whatever_the_order() -> None:
    state = _state(prefetch=2)
    held = _hold(state, 2)
    _short_steps(state)
    state.request_claim()
    dispatcher = state.plan_claim()
    committer = state.plan_claim([held[0].token], eager=True)
    assert dispatcher is not None and committer is not None
    # Both claims come back full, in the worst order: the committer's first.
    more = _claim_rows(state, dispatcher.limit + committer.limit)
    state.accept(more[: committer.limit], committer, time.monotonic(), [held[0].token])
    state.accept(more[committer.limit :], dispatcher, time.monotonic())
    assert state.busy() == 4 + 2
    assert state.reserved == 0


def test_a_claim_that_failed_gives_its_reservation_back() -> None:
    state = _state(prefetch=0)
    state.request_claim()
    request = state.plan_claim()
    assert request is not None and request.limit == 4
    assert state.plan_claim([], eager=True) is None
    state.release(request)
    assert state.reserved == 0
    assert _limit(state) == 4


def test_a_short_claim_frees_what_it_reserved_and_did_not_fill() -> None:
    state = _state(prefetch=0)
    state.request_claim()
    request = state.plan_claim()
    assert request is not None
    state.accept(_claim_rows(state, 1), request, time.monotonic())
    assert (state.busy(), state.reserved, state.idle()) == (1, 0, 3)


def _claim_rows(state: EngineState, count: int) -> list[ClaimedAttempt]:
    """``count`` attempts claimed from the store directly (what a claim would return)."""
    client = cf.Client(state.store)
    client.register(cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)]))
    for n in range(count):
        client.enqueue("w", n)
    now = time.time_ns()
    claimed = state.store.claim(ClaimRequest(frozenset({"w"}), count, now, now + 10**11, "n"))
    assert len(claimed) == count
    return claimed
