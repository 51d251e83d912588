"""Sleeps, waits, signals and cancellation; none of the waiting holds a worker."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.testing import wait_until


def approval_flow(timeout: float | None = None) -> cf.Workflow:
    wf = cf.Workflow("approval")
    wf.step(lambda ctx, d: {"order": d}, name="prepare")
    gate = wf.wait("approve", signal="approved", timeout=timeout, after=["prepare"])
    wf.step(lambda ctx, d: f"{ctx.parents['approve']['by']} approved", name="ship", after=[gate])
    return wf


def busy_work() -> cf.Workflow:
    wf = cf.Workflow("busy")
    wf.step(lambda ctx, n: n * 2, name="double")
    return wf


def test_a_waiting_run_holds_no_worker(make_client: Any) -> None:
    client = make_client(approval_flow(), busy_work(), workers=1)
    waiting = client.enqueue("approval", "A-1")
    wait_until(lambda: client.info(waiting).status is cf.Status.WAITING, what="the wait")
    others = [client.enqueue("busy", n) for n in range(100)]
    assert [client.result(ref, timeout=20) for ref in others] == [n * 2 for n in range(100)]
    assert client.info(waiting).status is cf.Status.WAITING
    assert client.signal(waiting, "approved", {"by": "ops"}) is cf.SignalResult.DELIVERED
    info = client.wait(waiting, timeout=10)
    assert info.result == "ops approved"
    assert info.steps["approve"].output == {"by": "ops"}


def test_a_sleeping_run_holds_no_worker(make_client: Any) -> None:
    clock = cf.clock.Fake()
    wf = cf.Workflow("napper")
    wf.step(lambda ctx, d: d + 1, name="before")
    nap = wf.sleep("nap", seconds=3600, after=["before"])
    wf.step(lambda ctx, d: d * 10, name="after", after=[nap])
    client = make_client(wf, busy_work(), workers=1, clock=clock)
    sleeper = client.enqueue("napper", 1)
    wait_until(
        lambda: client.info(sleeper).steps["nap"].status is cf.StepStatus.SLEEPING, what="the sleep"
    )
    assert client.info(sleeper).status is cf.Status.WAITING
    others = [client.enqueue("busy", n) for n in range(100)]
    assert [client.result(ref, timeout=20) for ref in others] == [n * 2 for n in range(100)]
    clock.advance(3599)
    with pytest.raises(cf.WaitTimeout):
        client.wait(sleeper, timeout=0.3)
    clock.advance(1)
    info = client.wait(sleeper, timeout=10)
    assert info.result == 20
    assert info.steps["nap"].output == 2  # a sleep passes its input through


def test_a_signal_sent_before_the_wait_is_kept_for_it(make_client: Any) -> None:
    gate = threading.Event()
    wf = cf.Workflow("early")
    wf.step(lambda ctx, d: gate.wait(10), name="slow")
    wf.wait("approve", signal="approved", after=["slow"])
    client = make_client(wf)
    ref = client.enqueue("early")
    assert client.signal(ref, "approved", "early bird") is cf.SignalResult.STORED
    gate.set()
    assert client.result(ref, timeout=10) == "early bird"


def test_each_wait_consumes_one_signal(make_client: Any) -> None:
    wf = cf.Workflow("two-gates")
    first = wf.wait("first", signal="go")
    wf.wait("second", signal="go", after=[first])
    client = make_client(wf)
    ref = client.enqueue("two-gates")
    wait_until(
        lambda: client.info(ref).steps["first"].status is cf.StepStatus.WAITING, what="first wait"
    )
    client.signal(ref, "go", 1)
    wait_until(
        lambda: client.info(ref).steps["second"].status is cf.StepStatus.WAITING, what="second wait"
    )
    assert client.info(ref).status is cf.Status.WAITING
    client.signal(ref, "go", 2)
    info = client.wait(ref, timeout=10)
    assert (info.steps["first"].output, info.steps["second"].output) == (1, 2)


def test_a_wait_past_its_deadline_fails_with_step_timeout(make_client: Any) -> None:
    clock = cf.clock.Fake()
    client = make_client(approval_flow(timeout=60), clock=clock)
    ref = client.enqueue("approval", "A-2")
    wait_until(lambda: client.info(ref).status is cf.Status.WAITING, what="the wait")
    clock.advance(61)
    info = client.wait(ref, timeout=10)
    assert info.status is cf.Status.FAILED
    assert info.error is not None and info.error.type == "StepTimeout"
    assert "no signal 'approved' arrived" in info.error.message
    assert info.steps["ship"].status is cf.StepStatus.CANCELLED
    assert client.signal(ref, "approved", {"by": "late"}) is cf.SignalResult.RUN_FINISHED


def test_signals_are_checked(make_client: Any) -> None:
    client = make_client(approval_flow(), start=False)
    with pytest.raises(cf.RunNotFound):
        client.signal("run_missing", "approved")
    ref = client.enqueue("approval")
    with pytest.raises(cf.InvalidName, match="invalid signal name"):
        client.signal(ref, "no spaces please")
    with pytest.raises(TypeError, match="cannot be encoded"):
        client.signal(ref, "approved", object())


def test_cancel_a_queued_run(make_client: Any) -> None:
    client = make_client(approval_flow(), start=False)
    ref = client.enqueue("approval", "A-3", key="k")
    assert client.cancel(ref) is True
    info = client.info(ref)
    assert info.status is cf.Status.CANCELLED
    assert {s.status for s in info.steps.values()} == {cf.StepStatus.CANCELLED}
    assert client.cancel(ref) is False
    client.enqueue("approval", "A-3", key="k")  # the key is free again


def test_cancel_reaches_a_running_step_and_its_outcome_is_not_written(make_client: Any) -> None:
    started = threading.Event()
    saw_cancel = threading.Event()
    wf = cf.Workflow("long")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> str:
        started.set()
        ctx.cancel_event.wait(10)
        if ctx.cancelled:
            saw_cancel.set()
        return "finished anyway"

    client = make_client(wf, interrupt=False)
    ref = client.enqueue("long")
    assert started.wait(5)
    assert client.cancel(ref) is True
    assert saw_cancel.wait(5)
    info = client.wait(ref, timeout=10)
    assert info.status is cf.Status.CANCELLED
    assert info.steps["work"].output is None
    assert info.steps["work"].status is cf.StepStatus.CANCELLED


def test_cancel_from_another_client_arrives_at_the_next_renewal(
    make_client: Any, store: Any
) -> None:
    started = threading.Event()
    stopped = threading.Event()
    wf = cf.Workflow("remote")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> None:
        started.set()
        if ctx.cancel_event.wait(10):
            stopped.set()

    worker = make_client(wf, lease=0.6, interrupt=False)
    operator = make_client(wf, start=False)
    ref = operator.enqueue("remote")
    assert started.wait(5)
    assert operator.cancel(ref)
    assert stopped.wait(5)  # a third of the lease later, not at once
    assert worker.info(ref).status is cf.Status.CANCELLED
