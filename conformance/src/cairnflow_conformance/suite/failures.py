"""Failures: retries with backoff and Permanent (RETRY), timeouts (STEP_TIMEOUT), SNOOZE."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import ClaimedAttempt, ClaimRequest, Failed, Outcome, Snoozed

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, enqueue_and_claim, step_status_is, wait_until

__all__ = ["RetryTests", "SnoozeTests", "StepTimeoutTests"]


def _flaky(fails: int, policy: cf.RetryPolicy) -> tuple[cf.Workflow, list[int]]:
    """A step failing its first ``fails`` attempts, then a step after it."""
    attempts: list[int] = []
    wf = cf.Workflow("kit-flaky")

    @wf.step(retry=policy)
    def call(ctx: cf.StepContext, data: Any) -> str:
        attempts.append(ctx.attempt)
        if len(attempts) <= fails:
            raise ConnectionError(f"failure {len(attempts)}")
        return "ok"

    wf.step(lambda ctx, d: d + "!", name="after", after=[call])
    return wf, attempts


_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)


class RetryTests:
    """``Cap.RETRY``: failed steps run again by their policy, with backoff; Permanent does not."""

    @proves(Cap.RETRY)
    def test_a_retried_step_succeeds_and_counts_its_failures(self, cairnflow_kit: Kit) -> None:
        wf, attempts = _flaky(2, cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-flaky")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert attempts == [1, 2, 3]
        step = info.steps["call"]
        assert (step.attempts, step.failures) == (3, 2)
        assert step.error is not None
        assert step.error.message == "failure 2"
        assert cairnflow_kit.stored_output(ref, "after") == "ok!"

    @proves(Cap.RETRY)
    def test_out_of_retries_fails_the_run_and_cancels_the_rest(self, cairnflow_kit: Kit) -> None:
        wf, attempts = _flaky(5, cf.RetryPolicy(max_attempts=2, backoff=_QUICK))
        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-flaky"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert attempts == [1, 2]
        assert info.error is not None
        assert (info.error.type, info.error.step, info.error.attempt) == (
            "ConnectionError",
            "call",
            2,
        )
        assert info.steps["call"].status is cf.StepStatus.FAILED
        assert info.steps["call"].failures == 2
        assert info.steps["after"].status is cf.StepStatus.CANCELLED

    @proves(Cap.RETRY)
    def test_permanent_skips_the_retries(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-permanent")
        calls: list[int] = []

        @wf.step(retry=cf.RetryPolicy(max_attempts=10, backoff=_QUICK))
        def charge(ctx: cf.StepContext, data: Any) -> None:
            calls.append(ctx.attempt)
            raise cf.Permanent(ValueError("card declined"))

        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-permanent"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert calls == [1]
        assert info.error is not None
        assert (info.error.type, info.error.message) == ("ValueError", "card declined")

    @proves(Cap.RETRY)
    def test_backoff_holds_each_retry_until_it_is_due(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        policy = cf.RetryPolicy(
            max_attempts=3, backoff=cf.Backoff(initial=60, factor=2, max=600, jitter=0.5)
        )
        wf, attempts = _flaky(2, policy)
        # Jitter pinned to its lowest draw: each delay is half its nominal length.
        client = cairnflow_kit.client(wf, clock=clock, jitter=lambda: 0.0)
        ref = client.enqueue("kit-flaky")
        wait_until(
            lambda: client.info(ref).steps["call"].failures == 1,
            timeout=TIMEOUT,
            what="the first failure",
        )
        step = client.info(ref).steps["call"]
        assert step.status is cf.StepStatus.SCHEDULED  # due later: out of the claim's way
        assert step.due_at_ns == clock.now_ns() + 30 * 10**9  # 60 s * (1 - 0.5)
        time.sleep(0.3)
        assert attempts == [1], "a retry ran before it was due"
        clock.advance(29)
        time.sleep(0.3)
        assert attempts == [1], "a retry ran before it was due"
        clock.advance(1)
        wait_until(
            lambda: client.info(ref).steps["call"].failures == 2,
            timeout=TIMEOUT,
            what="the second failure",
        )
        assert attempts == [1, 2]
        assert client.info(ref).steps["call"].due_at_ns == clock.now_ns() + 60 * 10**9
        clock.advance(60)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert attempts == [1, 2, 3]

    @proves(Cap.RETRY)
    def test_a_retry_is_claimable_only_once_its_backoff_is_over(self, cairnflow_kit: Kit) -> None:
        # At the SPI, on explicit times (a store never reads a clock): a failure with a
        # retry time leaves the step out of every claim and promotion until that time.
        assert_held_until(cairnflow_kit, "kit-backoff-spi", _retry_in)


class StepTimeoutTests:
    """``Cap.STEP_TIMEOUT``: an attempt past its timeout fails with StepTimeout."""

    @proves(Cap.STEP_TIMEOUT)
    def test_a_sync_step_past_its_timeout_is_interrupted_and_fails(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-slow")
        interrupted = threading.Event()

        @wf.step(timeout=0.3)
        def spin(ctx: cf.StepContext, data: Any) -> str:
            try:
                while True:  # pure Python: the interrupt lands between bytecodes
                    time.sleep(0.001)
            except cf.StepTimeout:
                interrupted.set()
                raise

        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-slow"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.type == "StepTimeout"
        assert "ran past its timeout of 0.3s" in info.error.message
        assert interrupted.wait(TIMEOUT)

    @proves(Cap.STEP_TIMEOUT, requires=[Cap.RETRY])
    def test_a_late_value_after_the_timeout_is_never_written(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-blocked")
        release = threading.Event()
        returned: list[str] = []

        @wf.step(timeout=0.3, retry=cf.RetryPolicy(max_attempts=2, backoff=_QUICK))
        def stuck(ctx: cf.StepContext, data: Any) -> str:
            if ctx.attempt == 1:
                try:
                    release.wait(TIMEOUT)  # a C-level wait: nothing interrupts it
                    return "late value"
                finally:
                    returned.append("late")
            return "second attempt"

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-blocked")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.steps["stuck"].failures == 1
        assert info.steps["stuck"].error is not None
        assert info.steps["stuck"].error.type == "StepTimeout"
        release.set()
        wait_until(lambda: returned == ["late"], timeout=TIMEOUT, what="the late attempt")
        client.stop(timeout=TIMEOUT)
        assert cairnflow_kit.stored_output(ref, "stuck") == "second attempt"

    @proves(Cap.STEP_TIMEOUT)
    def test_an_async_step_past_its_timeout_is_cancelled(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-async-slow")
        cancelled = threading.Event()

        @wf.step(timeout=0.3)
        async def nap(ctx: cf.StepContext, data: Any) -> str:
            try:
                await asyncio.sleep(TIMEOUT)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-async-slow"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.type == "StepTimeout"
        assert cancelled.wait(TIMEOUT)

    @proves(Cap.STEP_TIMEOUT)
    def test_a_step_sees_the_time_it_has_left(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-deadline")
        seen: list[float | None] = []
        wf.step(lambda ctx, d: seen.append(ctx.remaining), name="probe", timeout=30)
        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-deadline"), timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert seen
        assert seen[0] is not None
        assert 0 < seen[0] <= 30


class SnoozeTests:
    """``Cap.SNOOZE``: a step puts itself back for later without counting a failure."""

    @proves(Cap.SNOOZE)
    def test_snooze_runs_the_step_again_later_without_a_failure(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        wf = cf.Workflow("kit-snoozy")
        calls: list[int] = []

        @wf.step
        def poll(ctx: cf.StepContext, data: Any) -> str:
            calls.append(ctx.attempt)
            if len(calls) < 3:
                raise cf.Snooze(10)
            return "ready"

        client = cairnflow_kit.client(wf, clock=clock)
        ref = client.enqueue("kit-snoozy")
        for round_ in (1, 2):

            def attempted(n: int = round_) -> bool:
                return len(calls) == n

            wait_until(attempted, timeout=TIMEOUT, what=f"attempt {round_}")
            wait_until(
                lambda: step_status_is(client, ref, "poll", cf.StepStatus.SCHEDULED),
                timeout=TIMEOUT,
                what="the snooze",
            )
            step = client.info(ref).steps["poll"]
            assert step.due_at_ns == clock.now_ns() + 10 * 10**9
            assert step.failures == 0
            time.sleep(0.2)
            assert len(calls) == round_, "a snoozed step ran before it was due"
            clock.advance(10)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert (info.steps["poll"].attempts, info.steps["poll"].failures) == (3, 0)
        assert info.steps["poll"].error is None

    @proves(Cap.SNOOZE)
    def test_a_snoozed_step_is_claimable_only_once_it_is_due(self, cairnflow_kit: Kit) -> None:
        assert_held_until(cairnflow_kit, "kit-snooze-spi", lambda due: Snoozed(until=due))


_S = 10**9


def _retry_in(due: int) -> Outcome:
    return Failed(cf.ErrorInfo("ConnectionError", "try again"), retry_at=due)


def assert_held_until(kit: Kit, workflow: str, held: Callable[[int], Outcome]) -> None:
    """Finish a claimed attempt with ``held(due)``: no claim or promotion takes the step
    before ``due``, and the first one at ``due`` does (with the attempt counted once)."""
    store = kit.store
    (ref,), token_of = enqueue_and_claim(kit, workflow, 1)
    names = frozenset({workflow})
    now = time.time_ns()
    due = now + 600 * _S
    assert store.finish(token_of[ref.id], held(due), now).applied

    def claim(at: int) -> list[ClaimedAttempt]:
        store.advance_due(now=at, workflows=names, limit=10)
        return store.claim(ClaimRequest(names, 10, at, at + 60 * _S, "kit-node"))

    for early in (now, now + 1 * _S, due - 1):
        assert claim(early) == [], f"taken {(due - early) / _S:.9f}s before it was due"
    (again,) = claim(due)
    assert (again.run_id, again.attempt) == (ref.id, 2)
