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
