"""How many attempts a claim asks for: free workers, the slots a write frees, and claiming
ahead while steps are shorter than the writes that end them."""

from __future__ import annotations

import time

import pytest

import cairnflow as cf
from cairnflow._engine._attempt import RunningAttempt
from cairnflow._engine._state import EngineState
from cairnflow.store import ClaimedAttempt, ClaimRequest, MemoryStore, QueueClaim


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


# -- queues ---------------------------------------------------------------------------------------
def _queued_state(*queues: cf.QueueConfig | str, **options: object) -> EngineState:
    """A client serving ``queues``, with a one-step workflow on each (named like its queue)."""
    client = cf.Client(MemoryStore(), queues=queues, **options)  # type: ignore[arg-type]
    for config in queues:
        name = config if isinstance(config, str) else config.name
        client.register(cf.Workflow(name, queue=name, steps=[cf.Step("a", lambda c, d: d)]))
    return client._state


def _claim_from(state: EngineState, queue: str, count: int) -> list[ClaimedAttempt]:
    """``count`` attempts of workflow ``queue`` (on that queue), claimed from the store."""
    client = cf.Client(state.store)
    client.register(cf.Workflow(queue, queue=queue, steps=[cf.Step("a", lambda c, d: d)]))
    for n in range(count):
        client.enqueue(queue, n)
    now = time.time_ns()
    queues = (QueueClaim(queue),)
    request = ClaimRequest(frozenset({queue}), count, now, now + 10**11, "n", queues)
    claimed = state.store.claim(request)
    assert len(claimed) == count
    return claimed


def _asks(request: ClaimRequest | None) -> list[tuple[str, int | None]]:
    assert request is not None
    return [(q.name, q.limit) for q in request.queues]


def test_without_workers_a_client_has_the_sum_of_its_queues_workers() -> None:
    state = _queued_state(cf.QueueConfig("mail", workers=2), cf.QueueConfig("bulk", workers=3))
    assert state.settings.workers == 5
    assert [(q.name, q.workers) for q in state.settings.queues] == [("mail", 2), ("bulk", 3)]
    # A queue that says nothing gets the client's workers; then the client's default stands.
    state = _queued_state(cf.QueueConfig("mail", workers=2), "bulk")
    assert state.settings.workers == 8
    assert [(q.name, q.workers) for q in state.settings.queues] == [("mail", 2), ("bulk", 8)]


def test_a_claim_asks_each_queue_for_its_free_workers_highest_priority_first() -> None:
    state = _queued_state(
        cf.QueueConfig("low", workers=3),
        cf.QueueConfig("high", workers=2, priority=5),
        workers=4,
        prefetch=0,
    )
    state.request_claim()
    request = state.plan_claim()
    # Each queue for min(its free, the client's free); the claim for the client's free.
    assert _asks(request) == [("high", 2), ("low", 3)]
    assert request is not None and request.limit == 4
    state.release(request)


def test_a_queue_never_holds_more_than_its_workers_whoever_plans() -> None:
    state = _queued_state(
        cf.QueueConfig("mail", workers=2), cf.QueueConfig("bulk", workers=6), prefetch=4
    )
    _short_steps(state)  # the client claims ahead; a queue below its workers never does
    state.request_claim()
    dispatcher = state.plan_claim()
    assert ("mail", 2) in _asks(dispatcher)
    state.request_claim()
    again = state.plan_claim()  # planned before the first returned: mail has nothing left
    assert again is None or "mail" not in dict(_asks(again))
    assert dispatcher is not None
    mail = _claim_from(state, "mail", 2)
    state.accept(mail, dispatcher, time.monotonic())
    if again is not None:
        state.release(again)
    assert state.queues["mail"].held == 2
    state.request_claim()
    later = state.plan_claim()
    assert later is None or "mail" not in dict(_asks(later))


def test_a_queue_that_came_back_short_is_not_asked_again_until_work_is_made() -> None:
    state = _queued_state(
        cf.QueueConfig("a", workers=2, priority=1), cf.QueueConfig("b", workers=2), prefetch=0
    )
    state.request_claim()
    request = state.plan_claim()
    assert _asks(request) == [("a", 2), ("b", 2)]
    assert request is not None
    state.accept(_claim_from(state, "b", 2), request, time.monotonic())  # a had none ready
    assert (state.queues["a"].want_claim, state.queues["b"].want_claim) == (False, True)
    state.untrack_all(state.held_attempts())
    assert _asks(state.plan_claim()) == [("b", 2)]
    state.wake()  # work was made (an enqueue, a notification, a poll): every queue is asked
    assert _asks(state.plan_claim()) == [("a", 2)]  # b's 2 are reserved by the claim above


def test_a_limited_queue_that_came_back_short_stays_asked() -> None:
    # Short of room (attempts running elsewhere), not of work: its next refill asks it again.
    state = _queued_state(
        cf.QueueConfig("capped", workers=2, limit=2), cf.QueueConfig("free", workers=2), prefetch=0
    )
    state.request_claim()
    request = state.plan_claim()
    assert request is not None
    asked = sorted((q.name, q.global_limit or 0) for q in request.queues)
    assert asked == [("capped", 2), ("free", 0)]
    state.accept([], request, time.monotonic())  # both came back empty
    assert (state.queues["capped"].want_claim, state.queues["free"].want_claim) == (True, False)
    assert _asks(state.plan_claim()) == [("capped", 2)]


def test_queues_of_equal_priority_take_turns_at_being_asked_first() -> None:
    state = _queued_state("a", "b", "c", workers=3, prefetch=0)
    firsts = []
    for _ in range(3):
        state.request_claim()
        request = state.plan_claim()
        firsts.append(_asks(request)[0][0])
        assert request is not None
        state.release(request)
    assert sorted(firsts) == ["a", "b", "c"]


def test_a_refill_asks_only_the_queues_its_outcomes_free_unless_woken() -> None:
    state = _queued_state("a", "b", workers=4, prefetch=0)
    state.request_claim()
    request = state.plan_claim()
    assert request is not None
    held = _claim_from(state, "a", 1)
    state.accept(held, request, time.monotonic())  # both came back short
    token = held[0].token
    assert _asks(state.plan_claim([token], eager=True)) == [("a", 4)]
