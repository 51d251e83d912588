"""Runs end to end on the memory store: data flow, results, enqueue rules, queries."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import MemoryStore


def diamond() -> cf.Workflow:
    wf = cf.Workflow("diamond")

    @wf.step
    def start(ctx: cf.StepContext, n: int) -> int:
        return n + 1

    @wf.step(after=[start])
    def left(ctx: cf.StepContext, n: int) -> int:
        return n * 10

    @wf.step(after=[start])
    async def right(ctx: cf.StepContext, n: int) -> int:
        return n * 100

    @wf.step(after=[left, right])
    def join(ctx: cf.StepContext, parents: dict[str, int]) -> dict[str, Any]:
        return {"sum": parents["left"] + parents["right"], "payload": ctx.payload}

    return wf


def test_the_context_describes_the_attempt(make_client: Any) -> None:
    seen: dict[str, Any] = {}
    wf = cf.Workflow("ctx")

    @wf.step
    def first(ctx: cf.StepContext, data: Any) -> str:
        return "one"

    @wf.step(after=[first])
    def probe(ctx: cf.StepContext, data: Any) -> None:
        seen.update(
            run_id=ctx.run_id,
            workflow=ctx.workflow,
            step=ctx.step,
            attempt=ctx.attempt,
            payload=ctx.payload,
            parents=dict(ctx.parents),
            labels=dict(ctx.labels),
            node_id=ctx.node_id,
            queue=ctx.queue,
            data=data,
            cancelled=ctx.cancelled,
            remaining=ctx.remaining,
        )

    client = make_client(wf, node_id="node-a")
    ref = client.enqueue("ctx", {"x": 1}, labels={"tenant": "acme"})
    client.wait(ref, timeout=10)
    assert seen == {
        "run_id": ref.id,
        "workflow": "ctx",
        "step": "probe",
        "attempt": 1,
        "payload": {"x": 1},
        "parents": {"first": "one"},
        "labels": {"tenant": "acme"},
        "node_id": "node-a",
        "queue": "default",
        "data": "one",
        "cancelled": False,
        "remaining": None,
    }
    assert client.info(ref).steps["probe"].node == "node-a"


def test_unknown_workflow_and_bad_payloads_write_nothing(
    make_client: Any, store: MemoryStore
) -> None:
    client = make_client(diamond(), start=False)
    with pytest.raises(
        cf.UnknownWorkflow, match=r"'nope' is not registered on this client \(registered: diamond\)"
    ):
        client.enqueue("nope", 1)
    with pytest.raises(cf.InvalidName):
        client.enqueue("bad name", 1)
    with pytest.raises(TypeError, match="cannot be encoded by the json codec"):
        client.enqueue("diamond", {1, 2})
    with pytest.raises(ValueError, match="delay must be >= 0 seconds"):
        client.enqueue("diamond", 1, delay=-1)
    assert client.runs().runs == ()


def test_payload_limit_refuses_before_any_write(make_client: Any) -> None:
    client = make_client(diamond(), payload_limit=64, start=False)
    client.enqueue("diamond", "x" * 10)
    with pytest.raises(
        cf.PayloadTooLarge, match=r"is 102 bytes encoded, over the limit of 64 bytes"
    ):
        client.enqueue("diamond", "x" * 100)
    with pytest.raises(cf.PayloadTooLarge):
        client.enqueue_many([cf.Job("diamond", 1), cf.Job("diamond", "y" * 100)])
    assert len(client.runs().runs) == 1


def test_idempotency_key_is_held_until_the_run_finishes(make_client: Any) -> None:
    gate = threading.Event()
    wf = cf.Workflow("keyed")
    wf.step(lambda ctx, d: gate.wait(10), name="hold")
    client = make_client(wf)
    first = client.enqueue("keyed", None, key="order-1")
    with pytest.raises(
        cf.DuplicateRun, match=rf"already holds key 'order-1' \(run {first.id}\)"
    ) as caught:
        client.enqueue("keyed", None, key="order-1")
    assert caught.value.run_id == first.id
    other = client.enqueue("keyed", None, key="order-2")
    gate.set()
    client.wait(first, timeout=10)
    client.wait(other, timeout=10)
    again = client.enqueue("keyed", None, key="order-1")
    assert again.id != first.id


def test_idempotency_race_50_threads_make_exactly_one_run(make_client: Any) -> None:
    client = make_client(diamond(), start=False)
    barrier = threading.Barrier(50)
    won: list[cf.RunRef] = []
    lost: list[cf.DuplicateRun] = []
    lock = threading.Lock()

    def enqueue() -> None:
        barrier.wait()
        try:
            ref = client.enqueue("diamond", 1, key="the-key")
        except cf.DuplicateRun as error:
            with lock:
                lost.append(error)
        else:
            with lock:
                won.append(ref)

    threads = [threading.Thread(target=enqueue) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert len(lost) == 49
    assert {e.run_id for e in lost} == {won[0].id}
    assert [r.id for r in client.runs().runs] == [won[0].id]


def test_enqueue_many_is_all_or_none(make_client: Any) -> None:
    # Not started yet: the run holding "taken" must stay unfinished while keys collide
    # (a key is unique among unfinished runs only, and a started client could finish it).
    client = make_client(diamond(), start=False)
    client.enqueue("diamond", 1, key="taken")
    with pytest.raises(cf.DuplicateRun):
        client.enqueue_many([cf.Job("diamond", 1, key="a"), cf.Job("diamond", 2, key="taken")])
    with pytest.raises(cf.DuplicateRun):
        client.enqueue_many([cf.Job("diamond", 1, key="b"), cf.Job("diamond", 2, key="b")])
    assert len(client.runs().runs) == 1
    client.start()
    refs = client.enqueue_many([cf.Job("diamond", n, key=f"k{n}") for n in range(5)])
    assert [client.result(ref, timeout=10)["sum"] for ref in refs] == [
        110 * (n + 1) for n in range(5)
    ]
    assert client.enqueue_many([]) == []


def test_delayed_start_waits_for_the_scheduling_clock(make_client: Any) -> None:
    clock = cf.clock.Fake()
    client = make_client(diamond(), clock=clock)
    ref = client.enqueue("diamond", 1, delay=timedelta(minutes=5))
    assert client.info(ref).status is cf.Status.PENDING
    with pytest.raises(cf.WaitTimeout, match="still pending"):
        client.wait(ref, timeout=0.3)
    clock.advance(299)
    with pytest.raises(cf.WaitTimeout):
        client.wait(ref, timeout=0.2)
    clock.advance(1)
    assert client.wait(ref, timeout=10).status is cf.Status.SUCCEEDED


def test_runs_lists_filters_and_pages(make_client: Any) -> None:
    wf = cf.Workflow("listed")

    @wf.step
    def check(ctx: cf.StepContext, n: int) -> int:
        if n % 3 == 0:
            raise cf.Permanent("multiple of three")
        return n

    client = make_client(wf, diamond())
    refs = [
        client.enqueue("listed", n, labels={"parity": "even" if n % 2 == 0 else "odd"})
        for n in range(1, 10)
    ]
    other = client.enqueue("diamond", 1)
    for ref in [*refs, other]:
        client.wait(ref, timeout=10)
    everything = client.runs(limit=100)
    assert [r.id for r in everything.runs] == [other.id, *[r.id for r in reversed(refs)]]
    failed = client.runs(workflow="listed", status="failed")
    assert sorted(r.id for r in failed.runs) == sorted(refs[i].id for i in (2, 5, 8))
    assert all(r.error is not None and r.error.message == "multiple of three" for r in failed.runs)
    even = client.runs(labels={"parity": "even"})
    assert len(even.runs) == 4
    pages, cursor = [], None
    while True:
        page = client.runs(workflow="listed", limit=4, cursor=cursor)
        pages.append([r.id for r in page.runs])
        cursor = page.cursor
        if cursor is None:
            break
    assert [len(p) for p in pages] == [4, 4, 1]
    assert sum(pages, []) == [r.id for r in reversed(refs)]
    with pytest.raises(ValueError, match="limit"):
        client.runs(limit=0)


def test_result_of_a_failed_run_raises_run_failed(make_client: Any) -> None:
    wf = cf.Workflow("boom")
    wf.step(lambda ctx, d: 1 / 0, name="divide")
    client = make_client(wf)
    ref = client.enqueue("boom")
    with pytest.raises(
        cf.RunFailed, match=r"ended failed: ZeroDivisionError in step 'divide'"
    ) as caught:
        client.result(ref, timeout=10)
    info = caught.value.info
    assert info.error is not None and info.error.traceback and "1 / 0" in info.error.traceback


def test_info_of_unknown_run(make_client: Any) -> None:
    client = make_client(start=False)
    with pytest.raises(cf.RunNotFound, match="no run with id 'run_x'"):
        client.info("run_x")


def test_register_rules(make_client: Any) -> None:
    client = make_client(start=False)
    with pytest.raises(cf.InvalidName, match="reserved"):
        client.register(cf.Workflow("cairnflow.mine", steps=[cf.Step("a", lambda c, d: d)]))
    client.register(diamond())
    with pytest.raises(ValueError, match="already registered"):
        client.register(diamond())


def test_a_client_starts_once(make_client: Any) -> None:
    client = make_client(diamond())
    with pytest.raises(RuntimeError, match="already started"):
        client.start()
    client.stop()
    client.stop()  # idempotent
    assert not client.running


def test_work_due_later_is_scheduled_then_ready(make_client: Any, store: MemoryStore) -> None:
    clock = cf.clock.Fake()
    client = make_client(diamond(), clock=clock, start=False)
    ref = client.enqueue("diamond", 1, delay=60)
    assert client.info(ref).steps["start"].status is cf.StepStatus.SCHEDULED
    assert store.advance_due(now=clock.now_ns(), workflows={"diamond"}, limit=10).promoted == 0
    clock.advance(60)
    assert store.advance_due(now=clock.now_ns(), workflows={"diamond"}, limit=10).promoted == 1
    assert client.info(ref).steps["start"].status is cf.StepStatus.READY
    assert client.info(ref).status is cf.Status.QUEUED
