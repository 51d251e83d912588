"""Run timing: reschedule (RESCHEDULE), force (FORCE_RUN), and the next due time (DUE_QUERY).

What is asserted is what the store recorded: a moved run's steps and start
time, a claimed step left as the claim wrote it, the attempts of runs a pause
holds. Times come from a client on a fake clock where a test compares them,
so every expected value is exact, never a window of wall time. The race of a
reschedule with claims is run for real: clients claim while an operator moves
the same runs, and no run may end up half moved.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.clock import Fake
from cairnflow.store import ClaimRequest, PauseKind, RunTiming, StoreFacets

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_all, step_status_is, wait_until

__all__ = ["DueQueryTests", "ForceRunTests", "RescheduleTests"]

_HOUR = 3600
_NS = 1_000_000_000
START = 1_800_000_000 * _NS  # the fake clock's start: far from every other test's rows


def _one_step(name: str, queue: str = "default") -> cf.Workflow:
    return cf.Workflow(name, queue=queue, steps=[cf.Step("a", lambda c, d: d)])


def _two_roots(name: str) -> cf.Workflow:
    """Two root steps, ``a`` and ``b``, and ``c`` after both: claimable apart."""
    return cf.Workflow(
        name,
        steps=[
            cf.Step("a", lambda c, d: d),
            cf.Step("b", lambda c, d: d),
            cf.Step("c", lambda c, d: d, after=["a", "b"]),
        ],
    )


def _timing(kit: Kit) -> RunTiming:
    timing = StoreFacets.of(kit.store).timing
    assert timing is not None
    return timing


def _succeeds(client: cf.Client, ref: cf.RunRef) -> None:
    info = client.wait(ref, timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED, info.error


class RescheduleTests:
    """``Cap.RESCHEDULE``: a queued or delayed run moves whole, or not at all."""

    @proves(Cap.RESCHEDULE, requires=[Cap.DELAYED_START])
    def test_a_queued_run_moves_later_and_a_delayed_one_earlier(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = Fake(START)
        operator = kit.client(_two_roots("kit-moved"), start=False, clock=clock)
        queued = operator.enqueue("kit-moved", 1)
        delayed = operator.enqueue("kit-moved", 2, delay=_HOUR)
        later = START + 2 * _HOUR * _NS
        assert operator.reschedule(queued, at=later) is True
        assert operator.reschedule(delayed, delay=0) is True
        moved, brought = kit.stored(queued), kit.stored(delayed)
        assert (moved.run_at, brought.run_at) == (later, START)
        steps = {s.name: s for s in moved.steps}
        assert [(steps[n].status, steps[n].due_at) for n in "abc"] == [
            (cf.StepStatus.SCHEDULED, later),
            (cf.StepStatus.SCHEDULED, later),
            (cf.StepStatus.BLOCKED, None),
        ]
        steps = {s.name: s for s in brought.steps}
        assert [(steps[n].status, steps[n].due_at) for n in "ab"] == [
            (cf.StepStatus.READY, START),
            (cf.StepStatus.READY, START),
        ]
        # A time in the past means now; the moved run still runs when its time comes.
        assert operator.reschedule(queued, at=START - 10 * _NS) is True
        assert kit.stored_step(queued, "a").due_at == START
        worker = kit.client(_two_roots("kit-moved"), clock=clock)
        _succeeds(worker, queued)
        _succeeds(worker, delayed)
        assert operator.reschedule(queued, delay=5) is False  # finished: nothing to move

    @proves(Cap.RESCHEDULE)
    def test_a_run_with_a_claimed_step_is_not_moved(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        operator = kit.client(_one_step("kit-claimed"), _two_roots("kit-half"), start=False)
        ref = operator.enqueue("kit-claimed", 1)
        half = operator.enqueue("kit-half", 1)
        claimed = claim_all(kit.store, "kit-claimed")
        assert [a.run_id for a in claimed] == [ref.id]
        # One root of kit-half claimed, the other still ready: the run has started.
        now = time.time_ns()
        taken = kit.store.claim(
            ClaimRequest(frozenset({"kit-half"}), 1, now, now + 60 * _NS, "kit-node")
        )
        assert len(taken) == 1
        before = kit.stored(ref), kit.stored(half)
        assert operator.reschedule(ref, delay=_HOUR) is False
        assert operator.reschedule(half, delay=_HOUR) is False
        assert (kit.stored(ref), kit.stored(half)) == before  # untouched, to the last column
        untaken = next(s for s in kit.stored(half).steps if s.name in "ab" and s.attempt == 0)
        assert untaken.status is cf.StepStatus.READY

    @proves(Cap.RESCHEDULE)
    def test_a_reschedule_racing_claims_moves_a_run_whole_or_not_at_all(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        flow = _two_roots("kit-race")
        operator = kit.client(flow, start=False)
        refs = [operator.enqueue("kit-race", n) for n in range(40)]
        target = time.time_ns() + 10 * _HOUR * _NS
        workers = [
            kit.client(flow, store=s, node_id=f"kit-w{n}", workers=2)
            for n, s in enumerate(kit.peer_stores(2))
        ]
        moved: dict[str, bool] = {}
        for ref in refs:  # while the workers claim the same runs
            moved[ref.id] = operator.reschedule(ref, at=target)
        for ref in refs:
            if not moved[ref.id]:
                _succeeds(workers[0], ref)
        for ref in refs:
            steps = {s.name: s for s in kit.stored(ref).steps}
            if moved[ref.id]:
                assert [(steps[n].status, steps[n].due_at, steps[n].attempt) for n in "ab"] == [
                    (cf.StepStatus.SCHEDULED, target, 0)
                ] * 2, f"run {ref.id} was reported moved but is not: {steps}"
            else:
                assert kit.stored(ref).run_at != target, f"run {ref.id} half moved"

    @proves(Cap.RESCHEDULE)
    def test_a_reschedule_at_the_spi_is_fenced_by_the_claim(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        timing = _timing(kit)
        operator = kit.client(_one_step("kit-spi"), start=False)
        ref = operator.enqueue("kit-spi", 1)
        now = time.time_ns()
        assert timing.reschedule_run(ref.id, now + _HOUR * _NS, now) is True
        assert timing.reschedule_run(ref.id, now - _NS, now) is True  # back: ready at now
        assert kit.stored_step(ref, "a").status is cf.StepStatus.READY
        assert [a.run_id for a in claim_all(kit.store, "kit-spi")] == [ref.id]
        assert timing.reschedule_run(ref.id, now + _HOUR * _NS, now) is False
        step = kit.stored_step(ref, "a")
        assert (step.status, step.attempt) == (cf.StepStatus.RUNNING, 1)

    @proves(Cap.RESCHEDULE)
    def test_a_bad_reschedule_is_refused_and_writes_nothing(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        operator = kit.client(_one_step("kit-bad"), start=False)
        ref = operator.enqueue("kit-bad", 1)
        before = kit.stored(ref)
        bad: list[dict[str, Any]] = [
            {},
            {"at": time.time_ns(), "delay": 1},
            {"delay": -1},
            {"delay": float("nan")},
            {"at": "tomorrow"},
            {"at": True},
        ]
        for arguments in bad:
            with pytest.raises(ValueError, match="reschedule"):
                operator.reschedule(ref, **arguments)
        assert kit.stored(ref) == before
        with pytest.raises(cf.RunNotFound):
            operator.reschedule("run_kitnosuchrun", delay=1)


class ForceRunTests:
    """``Cap.FORCE_RUN``: a delayed or paused run starts now."""

    @proves(Cap.FORCE_RUN, requires=[Cap.DELAYED_START])
    def test_a_delayed_run_is_started_now(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        client = kit.client(_one_step("kit-forced"))
        ref = client.enqueue("kit-forced", 7, delay=_HOUR)
        other = client.enqueue("kit-forced", 8, delay=_HOUR)
        assert client.force_run(ref) is True
        _succeeds(client, ref)
        assert client.force_run(ref) is False  # finished: nothing changes
        assert kit.stored_step(other, "a").attempt == 0  # only the forced run started
        with pytest.raises(cf.RunNotFound):
            client.force_run("run_kitnosuchrun")

    @proves(Cap.FORCE_RUN, requires=[Cap.PAUSE_QUEUE])
    def test_a_forced_run_passes_a_paused_queue_with_every_step(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        flow = cf.Workflow(
            "kit-through",
            queue="kit-q-through",
            steps=[cf.Step("a", lambda c, d: d), cf.Step("b", lambda c, d: d, after=["a"])],
        )
        operator = kit.client(flow, _one_step("kit-free", "kit-q-free"), start=False)
        operator.pause_queue("kit-q-through")
        held = [operator.enqueue("kit-through", n) for n in range(3)]
        forced = operator.enqueue("kit-through", 9)
        assert operator.force_run(forced) is True
        assert operator.force_run(forced) is False  # forced already, nothing scheduled
        client = kit.client(flow, _one_step("kit-free", "kit-q-free"))
        _succeeds(client, forced)  # both steps: the later one passed the pause too
        _succeeds(client, client.enqueue("kit-free", 1))  # a claim after the forced run's
        assert [kit.stored_step(r, "a").attempt for r in held] == [0, 0, 0]
        assert [(p.kind, p.name) for p in operator.pauses()] == [(PauseKind.QUEUE, "kit-q-through")]

    @proves(Cap.FORCE_RUN, requires=[Cap.PAUSE_QUEUE, Cap.COMPENSATION])
    def test_a_forced_run_compensates_through_a_paused_queue(self, cairnflow_kit: Kit) -> None:
        # Compensations wait, skipped, until their run fails: forced before that, they pass
        # the pause as its other steps do, or the run would stay active, half undone.
        kit = cairnflow_kit
        undone: list[str] = []
        saga = cf.Workflow("kit-forced-saga", queue="kit-q-saga")

        @saga.step
        def charge(ctx: cf.StepContext, order: int) -> str:
            return f"charged {order}"

        @saga.step(after=[charge])
        def ship(ctx: cf.StepContext, charged: str) -> None:
            raise cf.Permanent("the courier refused the parcel")

        @saga.compensation(for_=charge)
        def refund(ctx: cf.StepContext, charged: str) -> str:
            undone.append(charged)
            return "refunded"

        operator = kit.client(saga, start=False)
        operator.pause_queue("kit-q-saga")
        held = operator.enqueue("kit-forced-saga", 1)
        forced = operator.enqueue("kit-forced-saga", 2)
        assert operator.force_run(forced) is True
        client = kit.client(saga)
        info = client.wait(forced, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.step == "ship"
        assert info.steps["refund"].status is cf.StepStatus.SUCCEEDED
        assert undone == ["charged 2"]
        assert kit.stored_output(forced, "refund") == "refunded"
        assert kit.stored_step(held, "charge").attempt == 0  # the pause still holds the other

    @proves(Cap.FORCE_RUN, requires=[Cap.PAUSE_WORKFLOW])
    def test_a_forced_run_passes_a_paused_workflow(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        operator = kit.client(_one_step("kit-paused-wf"), start=False)
        operator.pause_workflow("kit-paused-wf")
        held = operator.enqueue("kit-paused-wf", 1)
        forced = operator.enqueue("kit-paused-wf", 2)
        assert operator.force_run(forced) is True
        client = kit.client(_one_step("kit-paused-wf"))
        _succeeds(client, forced)
        assert kit.stored_step(held, "a").attempt == 0


class DueQueryTests:
    """``Cap.DUE_QUERY``: when the next piece of work falls due, exactly."""

    @proves(Cap.DUE_QUERY, requires=[Cap.DELAYED_START])
    def test_the_next_due_time_is_the_earliest_pending_work(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = Fake(START)
        flows = [_one_step("kit-due"), _one_step("kit-due-other", "kit-q-other")]
        client = kit.client(*flows, start=False, clock=clock)
        assert client.next_due() is None  # nothing pending
        later = client.enqueue("kit-due", 1, delay=2 * _HOUR)
        sooner = client.enqueue("kit-due", 2, delay=_HOUR)
        assert client.next_due() == START + _HOUR * _NS
        assert client.next_due() == kit.stored_step(sooner, "a").due_at
        clock.advance(10)
        client.reschedule(sooner, at=START + 3 * _HOUR * _NS)
        assert client.next_due() == kit.stored_step(later, "a").due_at
        # A run another client's queue serves does not count for this one.
        other = kit.client(flows[0], start=False, clock=clock)
        other.enqueue("kit-due", 3)  # ready now, on this client's queue
        assert client.next_due() == clock.now_ns()
        mine_only = kit.client(flows[1], start=False, clock=clock)
        assert mine_only.next_due() is None

    @proves(Cap.DUE_QUERY, requires=[Cap.PAUSE_QUEUE, Cap.FORCE_RUN])
    def test_a_paused_ready_run_is_not_due_until_it_is_forced(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = Fake(START)
        client = kit.client(_one_step("kit-held", "kit-q-held"), start=False, clock=clock)
        client.pause_queue("kit-q-held")
        ref = client.enqueue("kit-held", 1)
        assert client.next_due() is None  # ready, but no claim would take it
        client.force_run(ref)
        assert client.next_due() == START

    @proves(Cap.DUE_QUERY, requires=[Cap.DELAYED_START])
    def test_leases_and_delays_are_due_at_their_stored_times(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        timing = _timing(kit)
        operator = kit.client(_one_step("kit-lease"), start=False)
        ref = operator.enqueue("kit-lease", 1)
        now = time.time_ns()
        assert timing.next_due(workflows=["kit-lease"], queues=["default"], now=now) == now
        assert timing.next_due(workflows=["kit-lease"], queues=["elsewhere"], now=now) is None
        lease_until = now + 60 * _NS
        request = ClaimRequest(frozenset({"kit-lease"}), 1, now, lease_until, "kit-node")
        assert [a.run_id for a in kit.store.claim(request)] == [ref.id]
        # The lease can be taken over once it has run out: just after its end.
        assert timing.next_due(workflows=["kit-lease"], queues=["default"], now=now) == (
            lease_until + 1
        )
        late = lease_until + 120 * _NS  # past the lease's end, the expired lease is due now
        assert timing.next_due(workflows=["kit-lease"], queues=["default"], now=late) == late
        assert timing.next_due(workflows=["kit-other"], queues=["default"], now=now) is None
        # A delayed run of the workflow counts once it is the earliest.
        delayed = operator.enqueue("kit-lease", 2, delay=30)
        assert timing.next_due(workflows=["kit-lease"], queues=["default"], now=now) == (
            kit.stored_step(delayed, "a").due_at
        )
        # Not for a client of other queues: it would not claim the run when it falls due.
        assert timing.next_due(workflows=["kit-lease"], queues=["elsewhere"], now=now) == (
            lease_until + 1
        )

    @proves(Cap.DUE_QUERY, requires=[Cap.SLEEP])
    def test_a_sleeping_step_is_due_when_it_wakes(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        flow = cf.Workflow("kit-nap")
        flow.sleep("nap", seconds=_HOUR)
        client = kit.client(flow)
        ref = client.enqueue("kit-nap")
        wait_until(lambda: step_status_is(client, ref, "nap", cf.StepStatus.SLEEPING), TIMEOUT)
        wakes = kit.stored_step(ref, "nap").due_at
        assert wakes is not None
        timing = _timing(kit)
        assert timing.next_due(workflows=["kit-nap"], queues=["default"], now=wakes - 5) == wakes
        assert client.next_due() == wakes

    @proves(Cap.DUE_QUERY, requires=[Cap.CRON])
    def test_a_schedule_is_due_at_its_next_fire(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = Fake(START)
        client = kit.client(_one_step("kit-cron"), start=False, clock=clock)
        client.add_schedule("kit-cron", cf.Schedule("hourly", "0 * * * *"))
        [info] = client.schedules("kit-cron")
        assert client.next_due() == info.next_fire_ns
        client.enqueue("kit-cron", 1)
        assert client.next_due() == START
