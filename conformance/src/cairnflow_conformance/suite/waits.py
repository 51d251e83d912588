"""Waiting that holds no worker: SLEEP, SIGNAL (and signals sent early), and CANCEL."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import AttemptState, ClaimRequest, Succeeded, WaitFor

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, step_status_is, wait_until

__all__ = ["CancelTests", "SignalTests", "SleepTests"]


def _approval(timeout: float | None = None) -> cf.Workflow:
    wf = cf.Workflow("kit-approval-flow")
    wf.step(lambda ctx, d: {"order": d}, name="prepare")
    gate = wf.wait("approve", signal="approved", timeout=timeout, after=["prepare"])
    wf.step(lambda ctx, d: f"{ctx.parents['approve']['by']} approved", name="ship", after=[gate])
    return wf


def _busy() -> cf.Workflow:
    wf = cf.Workflow("kit-busy")
    wf.step(lambda ctx, n: n * 2, name="double")
    return wf


def _all_succeed(client: cf.Client, refs: list[cf.RunRef]) -> None:
    for ref in refs:
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error


class SleepTests:
    """``Cap.SLEEP``: durable sleeps that hold no worker."""

    @proves(Cap.SLEEP)
    def test_a_sleep_ends_exactly_when_it_is_due(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        wf = cf.Workflow("kit-nap")
        after: list[Any] = []
        wf.step(lambda ctx, d: d + 1, name="before")
        nap = wf.sleep("nap", seconds=3600, after=["before"])
        wf.step(lambda ctx, d: after.append(d), name="after", after=[nap])
        client = cairnflow_kit.client(wf, clock=clock)
        ref = client.enqueue("kit-nap", 1)
        wait_until(
            lambda: step_status_is(client, ref, "nap", cf.StepStatus.SLEEPING),
            timeout=TIMEOUT,
            what="the sleep",
        )
        info = client.info(ref)
        assert info.status is cf.Status.WAITING
        assert info.steps["nap"].due_at_ns == clock.now_ns() + 3600 * 10**9
        clock.advance(3599)
        time.sleep(0.3)
        assert client.info(ref).steps["nap"].status is cf.StepStatus.SLEEPING
        assert after == []
        clock.advance(1)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert after == [2], "a sleep passes its input through to the next step"
        assert info.steps["nap"].attempts == 1

    @proves(Cap.SLEEP, requires=[Cap.RESULT])
    def test_a_sleeping_run_holds_no_worker(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        wf = cf.Workflow("kit-napper")
        wf.step(lambda ctx, d: d + 1, name="before")
        nap = wf.sleep("nap", seconds=3600, after=["before"])
        wf.step(lambda ctx, d: d * 10, name="after", after=[nap])
        client = cairnflow_kit.client(wf, _busy(), workers=1, clock=clock)
        sleepers = [client.enqueue("kit-napper", n) for n in range(3)]
        wait_until(
            lambda: all(
                step_status_is(client, ref, "nap", cf.StepStatus.SLEEPING) for ref in sleepers
            ),
            timeout=TIMEOUT,
            what="the sleeps",
        )
        # One worker, three sleeping runs: other work still gets through.
        others = [client.enqueue("kit-busy", n) for n in range(30)]
        assert [client.result(ref, timeout=TIMEOUT) for ref in others] == [n * 2 for n in range(30)]
        clock.advance(3600)
        for n, ref in enumerate(sleepers):
            info = client.wait(ref, timeout=TIMEOUT)
            assert info.result == (n + 1) * 10
            assert info.steps["nap"].output == n + 1


class SignalTests:
    """``Cap.SIGNAL``: waits resolved by named signals, held by no worker."""

    @proves(Cap.SIGNAL, requires=[Cap.RESULT])
    def test_a_waiting_run_holds_no_worker_and_a_signal_resolves_it(
        self, cairnflow_kit: Kit
    ) -> None:
        client = cairnflow_kit.client(_approval(), _busy(), workers=1)
        waiting = [client.enqueue("kit-approval-flow", f"A-{n}") for n in range(3)]
        wait_until(
            lambda: all(client.info(ref).status is cf.Status.WAITING for ref in waiting),
            timeout=TIMEOUT,
            what="the waits",
        )
        others = [client.enqueue("kit-busy", n) for n in range(30)]
        assert [client.result(ref, timeout=TIMEOUT) for ref in others] == [n * 2 for n in range(30)]
        assert client.info(waiting[0]).steps["approve"].status is cf.StepStatus.WAITING
        assert client.signal(waiting[0], "approved", {"by": "ops"}) is cf.SignalResult.DELIVERED
        info = client.wait(waiting[0], timeout=TIMEOUT)
        assert info.result == "ops approved"
        assert info.steps["approve"].output == {"by": "ops"}
        # The other runs still wait: a signal reaches only the run it was sent to.
        assert client.info(waiting[1]).status is cf.Status.WAITING

    @proves(Cap.SIGNAL, requires=[Cap.RESULT])
    def test_a_signal_sent_before_the_wait_is_kept_for_it(self, cairnflow_kit: Kit) -> None:
        gate = threading.Event()
        wf = cf.Workflow("kit-early")
        wf.step(lambda ctx, d: gate.wait(TIMEOUT), name="slow")
        wf.wait("approve", signal="approved", after=["slow"])
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-early")
        assert client.signal(ref, "approved", "early bird") is cf.SignalResult.STORED
        gate.set()
        assert client.result(ref, timeout=TIMEOUT) == "early bird"

    @proves(Cap.SIGNAL, requires=[Cap.RESULT])
    def test_each_wait_consumes_one_signal_oldest_first(self, cairnflow_kit: Kit) -> None:
        gate = threading.Event()
        wf = cf.Workflow("kit-three-gates")
        wf.step(lambda ctx, d: gate.wait(TIMEOUT), name="slow")
        first = wf.wait("first", signal="go", after=["slow"])
        second = wf.wait("second", signal="go", after=[first])
        wf.wait("third", signal="go", after=[second])
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-three-gates")
        assert client.signal(ref, "go", 1) is cf.SignalResult.STORED
        assert client.signal(ref, "go", 2) is cf.SignalResult.STORED
        assert client.signal(ref, "other", 0) is cf.SignalResult.STORED
        gate.set()
        wait_until(
            lambda: step_status_is(client, ref, "third", cf.StepStatus.WAITING),
            timeout=TIMEOUT,
            what="the third wait",
        )
        assert client.info(ref).status is cf.Status.WAITING
        assert client.signal(ref, "go", 3) is cf.SignalResult.DELIVERED
        info = client.wait(ref, timeout=TIMEOUT)
        outputs = tuple(info.steps[name].output for name in ("first", "second", "third"))
        assert outputs == (1, 2, 3)

    @proves(Cap.SIGNAL)
    def test_a_wait_past_its_deadline_fails_with_step_timeout(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        client = cairnflow_kit.client(_approval(timeout=60), clock=clock)
        ref = client.enqueue("kit-approval-flow", "A-2")
        wait_until(
            lambda: client.info(ref).status is cf.Status.WAITING,
            timeout=TIMEOUT,
            what="the wait",
        )
        clock.advance(59)
        time.sleep(0.3)
        assert client.info(ref).status is cf.Status.WAITING, "a wait failed before its deadline"
        clock.advance(2)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.type == "StepTimeout"
        assert info.steps["approve"].status is cf.StepStatus.FAILED
        assert info.steps["ship"].status is cf.StepStatus.CANCELLED

    @proves(Cap.SIGNAL)
    def test_one_pass_fails_a_run_whose_waits_all_passed_their_deadlines(
        self, cairnflow_kit: Kit
    ) -> None:
        # Two waits of one run fall due in the same advance_due pass: the first
        # fails the run and cancels the second, and the pass must go on, whole.
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-two-deadlines")
        wf.wait("a", signal="x", timeout=1)
        wf.wait("b", signal="y", timeout=1)
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-two-deadlines")
        now = time.time_ns()
        names = frozenset({"kit-two-deadlines"})
        claimed = store.claim(ClaimRequest(names, 5, now, now + 60 * 10**9, "kit-node"))
        assert sorted(c.step for c in claimed) == ["a", "b"]
        for attempt in claimed:
            signal = "x" if attempt.step == "a" else "y"
            assert store.finish(attempt.token, WaitFor(signal, now + 1), now).applied
        result = store.advance_due(now=now + 5, workflows=names, limit=10)
        assert (result.woken, result.timed_out) == (0, 1)
        stored = cairnflow_kit.stored(ref)
        assert stored.state == cf.Status.FAILED.value
        assert sorted(s.status.value for s in stored.steps) == ["cancelled", "failed"]
        again = store.advance_due(now=now + 10, workflows=names, limit=10)
        assert (again.woken, again.timed_out) == (0, 0)

    @proves(Cap.SIGNAL)
    def test_signals_to_unknown_and_finished_runs(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-quick", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf)
        with pytest.raises(cf.RunNotFound):
            client.signal("run_kitnosuchrun", "approved")
        ref = client.enqueue("kit-quick")
        client.wait(ref, timeout=TIMEOUT)
        assert client.signal(ref, "approved", {"by": "late"}) is cf.SignalResult.RUN_FINISHED


class CancelTests:
    """``Cap.CANCEL``: runs are cancelled; their running steps see it; outcomes are not written."""

    @proves(Cap.CANCEL)
    def test_a_queued_run_is_cancelled_with_all_its_steps(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-cancel-me", steps=[cf.Step("a", lambda c, d: d)])
        wf.step(lambda c, d: d, name="b", after=["a"])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-cancel-me", 1)
        kept = client.enqueue("kit-cancel-me", 2)
        assert client.cancel(ref) is True
        info = client.info(ref)
        assert info.status is cf.Status.CANCELLED
        assert info.finished_at_ns is not None
        assert {s.status for s in info.steps.values()} == {cf.StepStatus.CANCELLED}
        assert client.cancel(ref) is False
        with pytest.raises(cf.RunNotFound):
            client.cancel("run_kitnosuchrun")
        worker = cairnflow_kit.client(wf)
        assert worker.wait(kept, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert worker.info(ref).status is cf.Status.CANCELLED  # nothing ran it
        assert worker.cancel(kept) is False

    @proves(Cap.CANCEL, requires=[Cap.IDEMPOTENCY])
    def test_cancelling_a_run_releases_its_idempotency_key(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-cancel-key", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-cancel-key", 1, key="order-7")
        with pytest.raises(cf.DuplicateRun):
            client.enqueue("kit-cancel-key", 1, key="order-7")
        assert client.cancel(ref)
        again = client.enqueue("kit-cancel-key", 1, key="order-7")
        assert again.id != ref.id

    @proves(Cap.CANCEL)
    def test_a_cancelled_attempt_keeps_its_token_and_hears_cancelled(
        self, cairnflow_kit: Kit
    ) -> None:
        # Through the SPI: the holder of a cancelled run's attempt must learn
        # "cancelled" (not "lost") at its next renewal, and write nothing.
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-cancel-spi", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-cancel-spi", 1)
        now = time.time_ns()
        claimed = store.claim(
            ClaimRequest(frozenset({"kit-cancel-spi"}), 1, now, now + 60 * 10**9, "kit-holder")
        )
        assert [c.run_id for c in claimed] == [ref.id]
        token = claimed[0].token
        assert client.cancel(ref) is True
        renewed = store.renew([token], now + 120 * 10**9)
        assert token in renewed.cancelled, "the holder must hear 'cancelled', not 'lost'"
        late = store.finish(token, Succeeded(b'"late"'), time.time_ns())
        assert late.state is AttemptState.CANCELLED
        assert not late.applied
        step = cairnflow_kit.stored_step(ref, "a")
        assert (step.status, step.output) == (cf.StepStatus.CANCELLED, None)
        assert store.hand_back([token], time.time_ns()) == 0
        assert cairnflow_kit.stored(ref).state == cf.Status.CANCELLED.value

    @proves(Cap.CANCEL)
    def test_cancel_reaches_a_running_step_and_its_outcome_is_not_written(
        self, cairnflow_kit: Kit
    ) -> None:
        started = threading.Event()
        saw_cancel = threading.Event()
        returned = threading.Event()
        wf = cf.Workflow("kit-long")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            started.set()
            if ctx.cancel_event.wait(TIMEOUT):
                saw_cancel.set()
            returned.set()
            return "finished anyway"

        wf.step(lambda c, d: d, name="after", after=[work])
        client = cairnflow_kit.client(wf, interrupt=False)
        ref = client.enqueue("kit-long")
        assert started.wait(TIMEOUT)
        assert client.cancel(ref) is True
        assert saw_cancel.wait(TIMEOUT)
        assert returned.wait(TIMEOUT)
        client.stop(timeout=TIMEOUT)
        info = client.info(ref)
        assert info.status is cf.Status.CANCELLED
        assert info.steps["work"].status is cf.StepStatus.CANCELLED
        assert info.steps["after"].status is cf.StepStatus.CANCELLED
        assert cairnflow_kit.stored_output(ref, "work") is None

    @proves(Cap.CANCEL)
    def test_a_cancel_from_another_client_arrives_at_the_next_renewal(
        self, cairnflow_kit: Kit
    ) -> None:
        started = threading.Event()
        stopped = threading.Event()
        wf = cf.Workflow("kit-remote")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            started.set()
            if ctx.cancel_event.wait(TIMEOUT):
                stopped.set()
            return "finished anyway"

        worker = cairnflow_kit.client(wf, lease=0.6, interrupt=False)
        operator_store = cairnflow_kit.peer_stores(1)[0]
        operator = cairnflow_kit.client(wf, start=False, store=operator_store)
        ref = operator.enqueue("kit-remote")
        assert started.wait(TIMEOUT)
        assert operator.cancel(ref)
        assert stopped.wait(TIMEOUT), "the running step never saw the cancellation"
        worker.stop(timeout=TIMEOUT)
        assert operator.info(ref).status is cf.Status.CANCELLED
        assert cairnflow_kit.stored_output(ref, "work") is None
