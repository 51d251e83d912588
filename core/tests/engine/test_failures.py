"""Failures: retries with backoff, Permanent, timeouts (sync and async), snooze."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.testing import wait_until


def flaky(fails: int, *, policy: cf.RetryPolicy) -> tuple[cf.Workflow, list[int]]:
    attempts: list[int] = []
    wf = cf.Workflow("flaky")

    @wf.step(retry=policy)
    def call(ctx: cf.StepContext, data: Any) -> str:
        attempts.append(ctx.attempt)
        if len(attempts) <= fails:
            raise ConnectionError(f"failure {len(attempts)}")
        return "ok"

    wf.step(lambda ctx, d: d + "!", name="after", after=[call])
    return wf, attempts


def test_backoff_holds_the_retry_until_it_is_due(make_client: Any) -> None:
    clock = cf.clock.Fake()
    policy = cf.RetryPolicy(
        max_attempts=3, backoff=cf.Backoff(initial=60, factor=2, max=600, jitter=0.5)
    )
    wf, attempts = flaky(2, policy=policy)
    client = make_client(wf, clock=clock, jitter=lambda: 0.0)  # jitter pinned: 50% shorter
    ref = client.enqueue("flaky")
    wait_until(lambda: client.info(ref).steps["call"].failures == 1, what="the first failure")
    step = client.info(ref).steps["call"]
    assert step.status is cf.StepStatus.SCHEDULED
    assert step.due_at_ns == clock.now_ns() + 30 * 10**9  # 60 s * (1 - 0.5)
    time.sleep(0.3)
    assert attempts == [1]  # not due: nobody may claim it
    clock.advance(30)
    wait_until(lambda: client.info(ref).steps["call"].failures == 2, what="the second failure")
    assert attempts == [1, 2]
    assert client.info(ref).steps["call"].due_at_ns == clock.now_ns() + 60 * 10**9  # 120 s * 0.5
    clock.advance(60)
    assert client.wait(ref, timeout=10).status is cf.Status.SUCCEEDED


def test_sync_step_timeout_interrupts_python_code(make_client: Any) -> None:
    wf = cf.Workflow("slow")
    interrupted = threading.Event()

    @wf.step(timeout=0.2)
    def spin(ctx: cf.StepContext, data: Any) -> str:
        try:
            while True:  # pure Python: the interrupt lands between bytecodes
                time.sleep(0.001)
        except cf.StepTimeout:
            interrupted.set()
            raise

    client = make_client(wf)
    info = client.wait(client.enqueue("slow"), timeout=10)
    assert info.status is cf.Status.FAILED
    assert info.error is not None and info.error.type == "StepTimeout"
    assert "ran past its timeout of 0.2s" in info.error.message
    assert interrupted.wait(5)


def test_sync_step_blocked_in_c_is_timed_out_on_time(make_client: Any) -> None:
    wf = cf.Workflow("blocked")
    release = threading.Event()
    returned: list[str] = []

    @wf.step(timeout=0.2, retry=cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01)))
    def stuck(ctx: cf.StepContext, data: Any) -> str:
        if ctx.attempt == 1:
            try:
                release.wait(30)  # a C-level wait: nothing interrupts it
                return "late value"
            finally:
                returned.append("late")
        return "second attempt"

    client = make_client(wf)
    started = time.monotonic()
    info = client.wait(client.enqueue("blocked"), timeout=10)
    elapsed = time.monotonic() - started
    release.set()
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == "second attempt"  # the late value of attempt 1 is never written
    assert info.steps["stuck"].failures == 1
    assert elapsed < 10
    wait_until(lambda: returned == ["late"], what="the blocked attempt to return")
    time.sleep(0.1)
    assert client.info(info.ref).result == "second attempt"


def test_async_step_timeout_cancels_the_task(make_client: Any) -> None:
    wf = cf.Workflow("async-slow")
    cancelled = threading.Event()

    @wf.step(timeout=0.2)
    async def nap(ctx: cf.StepContext, data: Any) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    client = make_client(wf)
    info = client.wait(client.enqueue("async-slow"), timeout=10)
    assert info.status is cf.Status.FAILED
    assert info.error is not None and info.error.type == "StepTimeout"
    assert cancelled.wait(5)


def test_timeout_applies_per_attempt_with_remaining_time_visible(make_client: Any) -> None:
    wf = cf.Workflow("deadline")
    seen: list[float | None] = []
    wf.step(lambda ctx, d: seen.append(ctx.remaining), name="probe", timeout=5)
    client = make_client(wf)
    client.wait(client.enqueue("deadline"), timeout=10)
    assert seen and seen[0] is not None and 4 < seen[0] <= 5


def test_snooze_reschedules_without_counting_a_failure(make_client: Any) -> None:
    clock = cf.clock.Fake()
    wf = cf.Workflow("snoozy")
    calls: list[int] = []

    @wf.step
    def poll(ctx: cf.StepContext, data: Any) -> str:
        calls.append(ctx.attempt)
        if len(calls) < 3:
            raise cf.Snooze(10)
        return "ready"

    client = make_client(wf, clock=clock)
    ref = client.enqueue("snoozy")
    wait_until(lambda: len(calls) == 1, what="the first attempt")
    wait_until(
        lambda: client.info(ref).steps["poll"].status is cf.StepStatus.SCHEDULED, what="snoozed"
    )
    clock.advance(10)
    wait_until(lambda: len(calls) == 2, what="the second attempt")
    wait_until(
        lambda: client.info(ref).steps["poll"].status is cf.StepStatus.SCHEDULED, what="snoozed"
    )
    clock.advance(10)
    info = client.wait(ref, timeout=10)
    assert info.status is cf.Status.SUCCEEDED
    assert (info.steps["poll"].attempts, info.steps["poll"].failures) == (3, 0)


def test_an_output_the_codec_cannot_encode_fails_permanently(make_client: Any) -> None:
    wf = cf.Workflow("bad-output")
    wf.step(lambda ctx, d: {1, 2}, name="sets", retry=cf.RetryPolicy(max_attempts=5))
    client = make_client(wf)
    info = client.wait(client.enqueue("bad-output"), timeout=10)
    assert info.status is cf.Status.FAILED
    assert info.steps["sets"].attempts == 1
    assert info.error is not None
    assert "the output of step 'sets' cannot be encoded by the json codec" in info.error.message


def test_an_output_over_the_payload_limit_fails_the_attempt_naming_size_and_limit(
    make_client: Any,
) -> None:
    wf = cf.Workflow("big-output")
    wf.step(lambda ctx, d: "x" * 5000, name="big", retry=cf.RetryPolicy(max_attempts=5))
    wf.step(lambda ctx, d: "fine", name="small")
    client = make_client(wf, payload_limit=1000)
    info = client.wait(client.enqueue("big-output"), timeout=10)
    assert info.status is cf.Status.FAILED
    big = info.steps["big"]
    assert (big.attempts, big.output) == (1, None)  # refused before any write: no retry
    assert big.error is not None and big.error.type == "PayloadTooLarge"
    assert "the output of step 'big' is 5002 bytes encoded, over the limit of 1000" in (
        big.error.message
    )


def test_progress_over_the_payload_limit_is_refused_inside_the_step(make_client: Any) -> None:
    seen: list[str] = []

    def report(ctx: cf.StepContext, data: Any) -> str:
        try:
            ctx.progress("y" * 5000)
        except cf.PayloadTooLarge as error:
            seen.append(str(error))
        ctx.progress("ok")
        return "done"

    wf = cf.Workflow("big-progress", steps=[cf.Step("report", report)])
    client = make_client(wf, payload_limit=1000)
    info = client.wait(client.enqueue("big-progress"), timeout=10)
    assert info.status is cf.Status.SUCCEEDED
    assert info.steps["report"].progress == "ok"
    assert seen and "the progress of step 'report' is 5002 bytes" in seen[0]


def test_a_payload_nested_too_deep_is_refused_and_nothing_is_written(make_client: Any) -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    wf = cf.Workflow("deep", steps=[cf.Step("a", lambda c, d: d)])
    client = make_client(wf)
    with pytest.raises(TypeError, match=r"payload of workflow 'deep' cannot be encoded.*too deep"):
        client.enqueue("deep", deep)
    assert client.runs(workflow="deep").runs == ()


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt()])
def test_base_exceptions_from_steps_are_failures_not_crashes(
    make_client: Any, error: BaseException
) -> None:
    wf = cf.Workflow("exits")

    def bail(ctx: cf.StepContext, data: Any) -> None:
        raise error

    wf.step(bail, name="bail")
    client = make_client(wf)
    assert client.wait(client.enqueue("exits"), timeout=10).status is cf.Status.FAILED
    wf2 = cf.Workflow("still-works", steps=[cf.Step("ok", lambda c, d: "fine")])
    client.register(wf2)
    assert client.result(client.enqueue("still-works"), timeout=10) == "fine"
