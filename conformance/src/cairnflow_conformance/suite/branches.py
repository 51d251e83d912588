"""Failure paths, not only failure: WAIT_BRANCH (a wait's timeout takes a branch) and
COMPENSATION (a failed run undoes its succeeded steps, in reverse order: a saga)."""

from __future__ import annotations

import threading
import time
from typing import Any

import cairnflow as cf
from cairnflow import Cap

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, step_status_is, wait_until

__all__ = ["CompensationTests", "WaitBranchTests"]


def _approval(ran: list[str]) -> cf.Workflow:
    """``prepare`` → ``approve`` (a wait, one hour) → ``ship``; on timeout ``refund`` → ``tell``."""
    wf = cf.Workflow("kit-branching")
    wf.step(lambda ctx, d: {"order": d}, name="prepare")
    wf.wait("approve", signal="approved", timeout=3600, after=["prepare"], on_timeout="refund")

    @wf.step(after=["approve"])
    def ship(ctx: cf.StepContext, approval: dict[str, str]) -> str:
        ran.append("ship")
        return f"shipped, approved by {approval['by']}"

    @wf.step(branch=True)
    def refund(ctx: cf.StepContext, payload: str) -> dict[str, str]:
        ran.append("refund")
        return {"refunded": payload}

    @wf.step(after=[refund])
    def tell(ctx: cf.StepContext, refunded: dict[str, str]) -> str:
        ran.append("tell")
        return f"told the customer: {refunded['refunded']} refunded"

    return wf


def _waiting(client: cf.Client, workflow: str, payload: Any, wait: str) -> cf.RunRef:
    """Enqueue a run of ``workflow`` and return once its step ``wait`` waits."""
    ref = client.enqueue(workflow, payload)
    wait_until(
        lambda: step_status_is(client, ref, wait, cf.StepStatus.WAITING),
        timeout=TIMEOUT,
        what="the wait",
    )
    return ref


class WaitBranchTests:
    """``Cap.WAIT_BRANCH``: a wait whose timeout passes continues down a named branch."""

    @proves(Cap.WAIT_BRANCH, requires=[Cap.RESULT])
    def test_a_wait_that_times_out_continues_down_its_branch(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        ran: list[str] = []
        client = cairnflow_kit.client(_approval(ran), clock=clock)
        ref = _waiting(client, "kit-branching", "A-1", "approve")
        clock.advance(3600)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.error is None
        statuses = {name: step.status for name, step in info.steps.items()}
        assert statuses == {
            "prepare": cf.StepStatus.SUCCEEDED,
            "approve": cf.StepStatus.TIMED_OUT,
            "ship": cf.StepStatus.SKIPPED,
            "refund": cf.StepStatus.SUCCEEDED,
            "tell": cf.StepStatus.SUCCEEDED,
        }
        assert ran == ["refund", "tell"], "a step after the timed-out wait ran"
        assert info.result == "told the customer: A-1 refunded"
        approve = info.steps["approve"]
        assert approve.error is not None
        assert approve.error.type == "StepTimeout"
        assert approve.failures == 0, "a wait that took its branch counted a failure"
        stored = cairnflow_kit.stored(ref)
        assert stored.state == cf.Status.SUCCEEDED.value
        assert cairnflow_kit.stored_step(ref, "ship").attempt == 0
        assert cairnflow_kit.stored_output(ref, "refund") == {"refunded": "A-1"}
        assert client.signal(ref, "approved", {"by": "late"}) is cf.SignalResult.RUN_FINISHED

    @proves(Cap.WAIT_BRANCH, requires=[Cap.RESULT])
    def test_a_signal_in_time_skips_the_branch(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        ran: list[str] = []
        client = cairnflow_kit.client(_approval(ran), clock=clock)
        ref = _waiting(client, "kit-branching", "A-2", "approve")
        client.signal(ref, "approved", {"by": "ops"})
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        statuses = {name: step.status for name, step in info.steps.items()}
        assert statuses == {
            "prepare": cf.StepStatus.SUCCEEDED,
            "approve": cf.StepStatus.SUCCEEDED,
            "ship": cf.StepStatus.SUCCEEDED,
            "refund": cf.StepStatus.SKIPPED,
            "tell": cf.StepStatus.SKIPPED,
        }
        assert info.result == "shipped, approved by ops"
        clock.advance(7200)  # the deadline passes: nothing is left to time out
        assert client.info(ref).steps["refund"].status is cf.StepStatus.SKIPPED
        assert ran == ["ship"], "the branch ran though the signal came in time"

    @proves(Cap.WAIT_BRANCH, requires=[Cap.STEP_HISTORY])
    def test_the_step_history_records_the_timeout_and_the_skipped_steps(
        self, cairnflow_kit: Kit
    ) -> None:
        clock = cf.clock.Fake()
        client = cairnflow_kit.client(_approval([]), clock=clock)
        ref = _waiting(client, "kit-branching", "A-6", "approve")
        clock.advance(3600)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        events: dict[str, list[str]] = {}
        for event in client.step_history(ref):
            events.setdefault(event.step, []).append(event.event)
        assert events["approve"] == ["claimed", "waiting", "timed_out"]
        assert events["ship"] == ["skipped"]
        assert events["refund"] == ["claimed", "succeeded"]
        assert events["tell"] == ["claimed", "succeeded"]

    @proves(Cap.WAIT_BRANCH, requires=[Cap.CANCEL_STEP])
    def test_cancelling_a_wait_cancels_its_branch_too(self, cairnflow_kit: Kit) -> None:
        ran: list[str] = []
        client = cairnflow_kit.client(_approval(ran), clock=cf.clock.Fake())
        ref = _waiting(client, "kit-branching", "A-8", "approve")
        assert client.cancel_step(ref, "approve") is True
        info = client.wait(ref, timeout=TIMEOUT)  # the run ends: no branch is left blocked
        assert info.status is cf.Status.CANCELLED
        for name in ("approve", "ship", "refund", "tell"):
            assert info.steps[name].status is cf.StepStatus.CANCELLED, name
        assert ran == []

    @proves(Cap.WAIT_BRANCH)
    def test_a_branch_that_fails_fails_the_run(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        wf = cf.Workflow("kit-branch-fails")
        wf.wait("gate", signal="go", timeout=60, on_timeout="escalate")
        wf.step(lambda ctx, d: d, name="done", after=["gate"])

        @wf.step(branch=True)
        def escalate(ctx: cf.StepContext, payload: Any) -> None:
            raise cf.Permanent("nobody to escalate to")

        client = cairnflow_kit.client(wf, clock=clock)
        ref = _waiting(client, "kit-branch-fails", 1, "gate")
        clock.advance(60)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.step == "escalate"
        assert info.steps["gate"].status is cf.StepStatus.TIMED_OUT
        assert info.steps["done"].status is cf.StepStatus.SKIPPED


def _saga(done: list[str], *, refund_fails: bool = False) -> cf.Workflow:
    """``reserve`` → ``charge`` → ``ship`` (fails for good); each with a compensation."""
    wf = cf.Workflow("kit-saga")

    @wf.step
    def reserve(ctx: cf.StepContext, order: str) -> str:
        return f"reserved {order}"

    @wf.step(after=[reserve])
    def charge(ctx: cf.StepContext, reserved: str) -> str:
        return f"charged for {reserved}"

    @wf.step(after=[charge])
    def ship(ctx: cf.StepContext, charged: str) -> str:
        raise cf.Permanent("the courier refused the parcel")

    @wf.compensation(for_=reserve)
    def unreserve(ctx: cf.StepContext, reserved: str) -> str:
        done.append(f"unreserve: {reserved}")
        time.sleep(0.05)  # a compensation started behind it would show up in between
        done.append("unreserve ends")
        return "released"

    @wf.compensation(for_=charge)
    def refund(ctx: cf.StepContext, charged: str) -> str:
        done.append(f"refund: {charged}")
        time.sleep(0.05)
        if refund_fails:
            raise cf.Permanent("the card was closed")
        done.append("refund ends")
        return "refunded"

    @wf.compensation(for_=ship)
    def recall(ctx: cf.StepContext, shipped: str) -> None:
        done.append("recall")  # never: ship did not succeed

    return wf


class CompensationTests:
    """``Cap.COMPENSATION``: a failed run compensates its succeeded steps, latest first."""

    @proves(Cap.COMPENSATION)
    def test_a_failed_run_compensates_its_succeeded_steps_in_reverse_order(
        self, cairnflow_kit: Kit
    ) -> None:
        done: list[str] = []
        client = cairnflow_kit.client(_saga(done))
        ref = client.enqueue("kit-saga", "A-3")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert (info.error.step, info.error.message) == ("ship", "the courier refused the parcel")
        assert done == [
            "refund: charged for reserved A-3",
            "refund ends",
            "unreserve: reserved A-3",
            "unreserve ends",
        ], "the compensations ran out of order, or at once"
        statuses = {name: step.status for name, step in info.steps.items()}
        assert statuses == {
            "reserve": cf.StepStatus.SUCCEEDED,
            "charge": cf.StepStatus.SUCCEEDED,
            "ship": cf.StepStatus.FAILED,
            "unreserve": cf.StepStatus.SUCCEEDED,
            "refund": cf.StepStatus.SUCCEEDED,
            "recall": cf.StepStatus.SKIPPED,
        }
        assert info.steps["unreserve"].attempts == info.steps["refund"].attempts == 1
        stored = cairnflow_kit.stored(ref)
        assert stored.state == cf.Status.FAILED.value
        assert cairnflow_kit.stored_output(ref, "refund") == "refunded"

    @proves(Cap.COMPENSATION, requires=[Cap.STEP_HISTORY])
    def test_the_step_history_shows_each_compensation_run_once(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client(_saga([]))
        ref = client.enqueue("kit-saga", "A-7")
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        events: dict[str, list[str]] = {}
        for event in client.step_history(ref):
            events.setdefault(event.step, []).append(event.event)
        assert events["ship"] == ["claimed", "failed"]
        assert events["refund"] == ["claimed", "succeeded"]
        assert events["unreserve"] == ["claimed", "succeeded"]
        assert "recall" not in events, "a compensation that never ran has a history"
        order = [(e.step, e.event) for e in client.step_history(ref)]
        assert order.index(("refund", "succeeded")) < order.index(("unreserve", "claimed"))

    @proves(Cap.COMPENSATION, requires=[Cap.RETRY_RUN])
    def test_a_run_whose_compensations_ran_is_not_retried(self, cairnflow_kit: Kit) -> None:
        done: list[str] = []
        client = cairnflow_kit.client(_saga(done))
        ref = client.enqueue("kit-saga", "A-9")
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        assert client.retry_run(ref) is False, "a run whose steps were undone was retried"
        info = client.info(ref)
        assert info.status is cf.Status.FAILED
        assert info.steps["reserve"].status is cf.StepStatus.SUCCEEDED
        assert len(done) == 4, "a compensation ran again"

    @proves(Cap.COMPENSATION, requires=[Cap.RESCHEDULE, Cap.DELAYED_START])
    def test_a_delayed_run_with_compensations_can_be_rescheduled(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-saga-later")
        wf.step(lambda ctx, d: d, name="charge")
        wf.compensation(for_="charge", name="refund")(lambda ctx, d: d)
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-saga-later", 1, delay=3600)
        assert client.reschedule(ref, delay=7200) is True, "a compensation counted as started"

    @proves(Cap.COMPENSATION, requires=[Cap.RESULT])
    def test_a_run_that_succeeds_runs_no_compensation(self, cairnflow_kit: Kit) -> None:
        done: list[str] = []
        wf = cf.Workflow("kit-saga-ok")
        wf.step(lambda ctx, d: d + 1, name="charge")
        wf.compensation(for_="charge", name="refund")(lambda ctx, d: done.append(d))
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-saga-ok", 1)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.result == 2
        assert info.steps["refund"].status is cf.StepStatus.SKIPPED
        assert done == []

    @proves(Cap.COMPENSATION)
    def test_a_compensation_that_fails_ends_the_run_failed_with_the_first_error(
        self, cairnflow_kit: Kit
    ) -> None:
        done: list[str] = []
        client = cairnflow_kit.client(_saga(done, refund_fails=True))
        ref = client.enqueue("kit-saga", "A-4")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.step == "ship"
        assert done == ["refund: charged for reserved A-4"], "a compensation ran after one failed"
        refund = info.steps["refund"]
        assert refund.status is cf.StepStatus.FAILED
        assert refund.error is not None
        assert refund.error.message == "the card was closed"
        assert info.steps["unreserve"].status is cf.StepStatus.CANCELLED
        assert info.steps["recall"].status is cf.StepStatus.SKIPPED

    @proves(Cap.COMPENSATION, requires=[Cap.CANCEL])
    def test_cancelling_a_compensating_run_stops_its_compensations(
        self, cairnflow_kit: Kit
    ) -> None:
        started, release = threading.Event(), threading.Event()
        undone: list[str] = []
        wf = cf.Workflow("kit-saga-cancel")
        wf.step(lambda ctx, d: "reserved", name="reserve")
        wf.step(lambda ctx, d: "charged", name="charge", after=["reserve"])

        @wf.step(after=["charge"])
        def ship(ctx: cf.StepContext, charged: str) -> None:
            raise cf.Permanent("no courier")

        @wf.compensation(for_="charge")
        def refund(ctx: cf.StepContext, charged: str) -> None:
            started.set()
            release.wait(TIMEOUT)

        @wf.compensation(for_="reserve")
        def unreserve(ctx: cf.StepContext, reserved: str) -> None:
            undone.append(reserved)

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-saga-cancel")
        assert started.wait(TIMEOUT)
        running = client.info(ref)
        assert not running.finished, "the run ended before its compensations"
        assert running.error is not None
        assert running.error.step == "ship"  # a compensating run shows why it failed
        assert client.cancel(ref) is True
        release.set()
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.CANCELLED
        assert info.steps["unreserve"].status is cf.StepStatus.CANCELLED
        assert info.steps["refund"].status is cf.StepStatus.CANCELLED
        assert undone == [], "a compensation ran after its run was cancelled"

    @proves(Cap.COMPENSATION, requires=[Cap.ERROR_HISTORY])
    def test_a_failed_compensation_is_in_the_error_history(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client(_saga([], refund_fails=True), error_history=10)
        ref = client.enqueue("kit-saga", "A-10")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.step == "ship", "the compensation's error replaced the run's"
        errors = client.errors(ref)  # newest first
        assert [(e.step, e.message) for e in errors] == [
            ("refund", "the card was closed"),
            ("ship", "the courier refused the parcel"),
        ]

    @proves(Cap.COMPENSATION, requires=[Cap.LEASE])
    def test_a_stalled_compensation_is_taken_over_and_never_runs_again_after_success(
        self, cairnflow_kit: Kit
    ) -> None:
        runs_on: list[str] = []
        first_started = threading.Event()
        release_first = threading.Event()
        first_returned = threading.Event()
        wf = cf.Workflow("kit-saga-stall")
        wf.step(lambda ctx, d: f"charged {d}", name="charge")

        @wf.step(after=["charge"])
        def ship(ctx: cf.StepContext, charged: str) -> None:
            raise cf.Permanent("no courier")

        @wf.compensation(for_="charge")
        def refund(ctx: cf.StepContext, charged: str) -> str:
            runs_on.append(ctx.node_id)
            if ctx.node_id == "kit-stalled":
                first_started.set()
                release_first.wait(TIMEOUT)  # the node is stalled mid-compensation...
                first_returned.set()
                return "from the stalled node"
            return f"refunded ({charged})"

        partition = cairnflow_kit.partition()
        stalled = cairnflow_kit.client(
            wf, store=partition, node_id="kit-stalled", lease=0.5, interrupt=False
        )
        ref = stalled.enqueue("kit-saga-stall", "A-5")
        assert first_started.wait(TIMEOUT)
        partition.cut()  # ...and can neither renew nor write
        rescuer = cairnflow_kit.client(wf, node_id="kit-rescuer", lease=5)
        info = rescuer.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.step == "ship"
        step = info.steps["refund"]
        assert step.status is cf.StepStatus.SUCCEEDED
        assert (step.attempts, step.reclaims) == (2, 1)
        finished_at = info.finished_at_ns
        release_first.set()
        partition.heal()  # the stalled node wakes up and offers its late outcome
        assert first_returned.wait(TIMEOUT)
        stalled.stop(timeout=TIMEOUT)
        assert cairnflow_kit.stored_output(ref, "refund") == "refunded (charged A-5)"
        after = rescuer.info(ref)
        assert after.finished_at_ns == finished_at
        assert after.status is cf.Status.FAILED
        assert after.steps["refund"].attempts == 2
        assert runs_on == ["kit-stalled", "kit-rescuer"], "a compensation ran again"
