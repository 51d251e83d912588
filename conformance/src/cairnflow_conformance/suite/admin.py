"""Acting on runs: RETRY_RUN, JOB_RETRY, DELETE_RUN, CANCEL_ALL, CANCEL_STEP (issue #17).

What an operator does to runs that exist, from a client that is never started
(as ``cairn retry`` is). Where a worker may be caught in the middle, the test
plays the worker at the SPI, holding its lease token while the operator acts,
and then has it write at the worst moment: the late outcome of an attempt from
before a retry, the success of an attempt whose step is being cancelled. That
outcome must be refused, and the store must show only what the operator did.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import AttemptState, Failed, Journaling, Succeeded

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_all, wait_until

__all__ = ["CancelAllTests", "CancelStepTests", "DeleteRunTests", "JobRetryTests", "RetryRunTests"]

_MINUTE = 60 * 10**9


def _flaky(name: str, fails: dict[str, int]) -> tuple[cf.Workflow, dict[str, int]]:
    """``a`` → ``b`` → ``c``; ``b`` fails while ``fails["b"]`` is positive (no retries).

    Returns the workflow and how many times each step's code ran.
    """
    wf = cf.Workflow(name)
    runs: dict[str, int] = {"a": 0, "b": 0, "c": 0}

    @wf.step
    def a(ctx: cf.StepContext, n: int) -> int:
        runs["a"] += 1
        return n + 1

    @wf.step(after=[a])
    def b(ctx: cf.StepContext, n: int) -> int:
        runs["b"] += 1
        if fails["b"] > 0:
            fails["b"] -= 1
            raise cf.Permanent(RuntimeError("b is broken"))
        return n * 10

    @wf.step(after=[b])
    def c(ctx: cf.StepContext, n: int) -> int:
        runs["c"] += 1
        return n + 5

    return wf, runs


def _pair(name: str) -> cf.Workflow:
    """Two roots ``a`` and ``b``, and ``c`` after ``a``: played at the SPI."""
    wf = cf.Workflow(name)
    wf.step(lambda c, d: d, name="a")
    wf.step(lambda c, d: d, name="b")
    wf.step(lambda c, d: d, name="c", after=["a"])
    return wf


def _held_pair(kit: Kit, name: str) -> tuple[cf.Client, cf.RunRef, dict[str, str]]:
    """An idle client, a run of :func:`_pair` ``name``, and the tokens of its claimed roots."""
    client = kit.client(_pair(name), start=False)
    ref = client.enqueue(name, 1)
    tokens = {held.step: held.token for held in claim_all(kit.store, name)}
    assert set(tokens) == {"a", "b"}
    return client, ref, tokens


def _statuses(kit: Kit, run: cf.RunRef) -> dict[str, cf.StepStatus]:
    return {step.name: step.status for step in kit.stored(run).steps}


def _error(message: str) -> cf.ErrorInfo:
    return cf.ErrorInfo(type="RuntimeError", message=message)


class RetryRunTests:
    """``Cap.RETRY_RUN``: a failed or cancelled run runs again from what did not succeed."""

    @proves(Cap.RETRY_RUN)
    def test_a_failed_run_runs_again_from_the_failed_step_keeping_earlier_outputs(
        self, cairnflow_kit: Kit
    ) -> None:
        fails = {"b": 1}
        wf, runs = _flaky("kit-retry-run", fails)
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-retry-run", 1)
        failed = client.wait(ref, timeout=TIMEOUT)
        assert failed.status is cf.Status.FAILED
        assert failed.steps["c"].status is cf.StepStatus.CANCELLED
        operator = cairnflow_kit.client(wf, start=False)
        assert operator.retry_run(ref) is True
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.result == 25
        assert info.error is None
        assert runs == {"a": 1, "b": 2, "c": 1}, "a step that succeeded ran again"
        assert (info.steps["a"].attempts, info.steps["b"].attempts) == (1, 2)
        assert info.steps["b"].output == 20
        assert operator.retry_run(ref) is False, "a succeeded run has nothing to retry"

    @proves(Cap.RETRY_RUN)
    def test_an_unfinished_run_is_not_retried_and_nothing_changes(self, cairnflow_kit: Kit) -> None:
        wf = _pair("kit-retry-unfinished")
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-retry-unfinished", 1)
        before = cairnflow_kit.stored(ref)
        assert client.retry_run(ref) is False
        assert cairnflow_kit.stored(ref) == before
        with pytest.raises(cf.RunNotFound):
            client.retry_run("run_kitnosuchrun")

    @proves(Cap.RETRY_RUN, requires=[Cap.IDEMPOTENCY])
    def test_a_retried_run_takes_its_key_again_unless_another_run_holds_it(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-retry-key")
        client = cairnflow_kit.client(wf, start=False)
        first = client.enqueue("kit-retry-key", 1, key="order-9")
        assert client.cancel(first)
        second = client.enqueue("kit-retry-key", 2, key="order-9")  # the key was released
        before = cairnflow_kit.stored(first)
        with pytest.raises(cf.DuplicateRun) as caught:
            client.retry_run(first)
        assert caught.value.run_id in (second.id, None)
        assert cairnflow_kit.stored(first) == before, "a refused retry changed the run"
        assert client.cancel(second)
        assert client.retry_run(first) is True
        assert client.info(first).status is cf.Status.QUEUED
        with pytest.raises(cf.DuplicateRun):
            client.enqueue("kit-retry-key", 3, key="order-9")
        with pytest.raises(cf.DuplicateRun):
            client.retry_run(second)

    @proves(Cap.RETRY_RUN)
    def test_a_late_outcome_of_an_attempt_from_before_the_retry_is_refused(
        self, cairnflow_kit: Kit
    ) -> None:
        # A worker holds b while a fails the run; it stalls past the operator's retry and
        # then writes. Its lease is gone with the retry: the outcome must be refused, and b
        # must be ready for a new attempt, not succeeded by the old one.
        store = cairnflow_kit.store
        client, ref, tokens = _held_pair(cairnflow_kit, "kit-retry-late")
        assert store.finish(tokens["a"], Failed(_error("a broke")), time.time_ns()).applied
        assert cairnflow_kit.stored(ref).state == cf.Status.FAILED.value
        assert client.retry_run(ref) is True
        assert _statuses(cairnflow_kit, ref) == {
            "a": cf.StepStatus.READY,
            "b": cf.StepStatus.READY,
            "c": cf.StepStatus.BLOCKED,
        }
        assert cairnflow_kit.stored(ref).state == "active"
        late = store.finish(tokens["b"], Succeeded(b'"late"'), time.time_ns())
        assert not late.applied, "an attempt from before the retry wrote its outcome"
        assert tokens["b"] in store.renew([tokens["b"]], time.time_ns() + _MINUTE).lost
        assert cairnflow_kit.stored_step(ref, "b").status is cf.StepStatus.READY
        assert cairnflow_kit.stored_step(ref, "b").output is None
        fresh = {held.step: held.token for held in claim_all(store, "kit-retry-late")}
        assert set(fresh) == {"a", "b"}
        # Later still, while the new attempt runs: the old lease holds nothing either.
        again = store.finish(tokens["b"], Succeeded(b'"late"'), time.time_ns())
        assert not again.applied
        assert cairnflow_kit.stored_step(ref, "b").status is cf.StepStatus.RUNNING
        for step in ("a", "b"):
            assert store.finish(fresh[step], Succeeded(b"1"), time.time_ns()).applied
        (child,) = claim_all(store, "kit-retry-late")
        assert store.finish(child.token, Succeeded(b"2"), time.time_ns()).run_status is not None
        assert cairnflow_kit.stored(ref).state == cf.Status.SUCCEEDED.value

    @proves(Cap.RETRY_RUN, requires=[Cap.RETRY])
    def test_a_retried_step_gets_a_fresh_retry_budget(self, cairnflow_kit: Kit) -> None:
        calls = {"n": 0}
        wf = cf.Workflow("kit-retry-budget")

        @wf.step(retry=cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01)))
        def shaky(ctx: cf.StepContext, n: int) -> int:
            calls["n"] += 1
            if calls["n"] <= 3:
                raise RuntimeError(f"call {calls['n']}")
            return n

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-retry-budget", 7)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        assert calls["n"] == 2
        assert client.retry_run(ref)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert (calls["n"], info.steps["shaky"].attempts) == (4, 4)


class JobRetryTests:
    """``Cap.JOB_RETRY``: one failed step of a finished run is retried on demand."""

    @proves(Cap.JOB_RETRY)
    def test_the_failed_step_is_retried_and_its_dependents_follow(self, cairnflow_kit: Kit) -> None:
        fails = {"b": 1}
        wf, runs = _flaky("kit-job-retry", fails)
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-job-retry", 2)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        operator = cairnflow_kit.client(wf, start=False)
        before = cairnflow_kit.stored(ref)
        assert operator.retry_step(ref, "a") is False, "a step that succeeded was retried"
        assert operator.retry_step(ref, "c") is False, "a cancelled step is not a failed one"
        assert cairnflow_kit.stored(ref) == before
        with pytest.raises(cf.StepNotFound):
            operator.retry_step(ref, "nosuchstep")
        assert operator.retry_step(ref, "b") is True
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.result == 35
        assert runs == {"a": 1, "b": 2, "c": 1}
        assert operator.retry_step(ref, "b") is False


class DeleteRunTests:
    """``Cap.DELETE_RUN``: finished runs are deleted with their rows; unfinished ones never."""

    @proves(Cap.DELETE_RUN)
    def test_finished_runs_are_deleted_and_unfinished_ones_are_kept(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-delete")
        client = cairnflow_kit.client(wf, start=False)
        done = client.enqueue("kit-delete", 1)
        also = client.enqueue("kit-delete", 2)
        live = client.enqueue("kit-delete", 3)
        assert client.cancel(done)
        assert client.cancel(also)
        assert client.delete_runs(done, live, "run_kitnosuchrun") == 1
        assert cairnflow_kit.store.get_run(done.id) is None
        assert cairnflow_kit.stored(live).state == "active", "an unfinished run was deleted"
        assert cairnflow_kit.stored(also).state == cf.Status.CANCELLED.value
        with pytest.raises(cf.RunNotFound):
            client.info(done)
        assert client.delete_runs(done) == 0
        assert cairnflow_kit.run_count() == 2

    @proves(Cap.DELETE_RUN)
    def test_finished_runs_are_deleted_by_filter_page_by_page(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-delete-many", steps=[cf.Step("a", lambda c, d: d)])
        other = cf.Workflow("kit-delete-other", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, other)
        refs = [client.enqueue("kit-delete-many", i, labels={"batch": "x"}) for i in range(5)]
        spared = client.enqueue("kit-delete-many", 9, labels={"batch": "y"})
        elsewhere = client.enqueue("kit-delete-other", 1, labels={"batch": "x"})
        for ref in (*refs, spared, elsewhere):
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        client.stop()
        operator = cairnflow_kit.client(wf, other, start=False)
        live = operator.enqueue("kit-delete-many", 10, labels={"batch": "x"})
        assert operator.delete_runs(workflow="kit-delete-many", status="failed") == 0
        deleted = operator.delete_runs(workflow="kit-delete-many", labels={"batch": "x"})
        assert deleted == 5
        assert all(cairnflow_kit.store.get_run(ref.id) is None for ref in refs)
        for kept in (spared, elsewhere, live):
            assert cairnflow_kit.store.get_run(kept.id) is not None
        with pytest.raises(ValueError, match="needs run ids or a filter"):
            operator.delete_runs()
        with pytest.raises(ValueError, match="finished runs only"):
            operator.delete_runs(status="running")

    @proves(Cap.DELETE_RUN, requires=[Cap.ERROR_HISTORY, Cap.JOURNAL])
    def test_a_deleted_run_takes_its_error_history_and_journal_with_it(
        self, cairnflow_kit: Kit
    ) -> None:
        def flaky(ctx: cf.StepContext, data: Any) -> None:
            ctx.memo("kit-memo", lambda: data)
            raise RuntimeError("kit: fails once and for all")

        once = cf.RetryPolicy(max_attempts=1)
        wf = cf.Workflow("kit-delete-rows", steps=[cf.Step("a", flaky, retry=once)])
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-delete-rows", 7, labels={"kit": "gone"})
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        client.stop()
        store = cairnflow_kit.store
        assert isinstance(store, Journaling)
        assert [error.step for error in client.errors(ref)] == ["a"]
        assert store.read_journal(ref.id, "a", "kit-memo") is not None
        assert client.delete_runs(ref) == 1
        assert store.get_run(ref.id) is None
        assert client.errors(ref) == [], "a deleted run's error history was kept"
        assert store.read_journal(ref.id, "a", "kit-memo") is None, "its journal was kept"


class CancelAllTests:
    """``Cap.CANCEL_ALL``: every unfinished run matching a filter is cancelled, page by page."""

    @proves(Cap.CANCEL_ALL, requires=[Cap.BATCH_ENQUEUE])
    def test_every_unfinished_run_matching_the_filter_is_cancelled(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-cancel-all")
        other = _pair("kit-cancel-other")
        client = cairnflow_kit.client(wf, other, start=False)
        # More runs than one page (200): the filter is applied page after page.
        many = client.enqueue_many(
            [cf.Job("kit-cancel-all", i, labels={"tenant": "t1"}) for i in range(230)]
        )
        spared = client.enqueue("kit-cancel-all", 1, labels={"tenant": "t2"})
        elsewhere = client.enqueue("kit-cancel-other", 1, labels={"tenant": "t1"})
        finished = client.enqueue("kit-cancel-all", 2, labels={"tenant": "t1"})
        assert client.cancel(finished)
        finished_at = cairnflow_kit.stored(finished).finished_at
        assert client.cancel_runs(workflow="kit-cancel-all", labels={"tenant": "t1"}) == 230
        for ref in (many[0], many[117], many[-1]):
            stored = cairnflow_kit.stored(ref)
            assert stored.state == cf.Status.CANCELLED.value
            assert {s.status for s in stored.steps} == {cf.StepStatus.CANCELLED}
        assert cairnflow_kit.stored(finished).finished_at == finished_at
        for kept in (spared, elsewhere):
            assert cairnflow_kit.stored(kept).state == "active"
        assert client.cancel_runs(workflow="kit-cancel-all", labels={"tenant": "t1"}) == 0
        page = client.runs(workflow="kit-cancel-all", status="cancelled", limit=1000)
        assert len(page.runs) == 231

    @proves(Cap.CANCEL_ALL)
    def test_a_running_attempt_hears_the_cancel_and_its_outcome_is_refused(
        self, cairnflow_kit: Kit
    ) -> None:
        store = cairnflow_kit.store
        client, ref, tokens = _held_pair(cairnflow_kit, "kit-cancel-all-held")
        assert client.cancel_runs(workflow="kit-cancel-all-held") == 1
        renewed = store.renew(list(tokens.values()), time.time_ns() + _MINUTE)
        assert renewed.cancelled == frozenset(tokens.values())
        late = store.finish(tokens["a"], Succeeded(b'"late"'), time.time_ns())
        assert late.state is AttemptState.CANCELLED
        assert cairnflow_kit.stored_step(ref, "a").output is None


class CancelStepTests:
    """``Cap.CANCEL_STEP``: one step is cancelled; the run goes on, then ends cancelled."""

    @proves(Cap.CANCEL_STEP)
    def test_a_cancelled_step_takes_its_dependents_and_the_run_ends_cancelled(
        self, cairnflow_kit: Kit
    ) -> None:
        store = cairnflow_kit.store
        client, ref, tokens = _held_pair(cairnflow_kit, "kit-cancel-step")
        assert client.cancel_step(ref, "a") is True
        assert _statuses(cairnflow_kit, ref) == {
            "a": cf.StepStatus.CANCELLED,
            "b": cf.StepStatus.RUNNING,
            "c": cf.StepStatus.CANCELLED,
        }
        assert cairnflow_kit.stored(ref).state == "active", "the run must go on"
        # The holder of a hears it at its next renewal; its outcome is refused.
        renewed = store.renew(list(tokens.values()), time.time_ns() + _MINUTE)
        assert renewed.cancelled == {tokens["a"]}
        assert not renewed.lost
        late = store.finish(tokens["a"], Succeeded(b'"late"'), time.time_ns())
        assert late.state is AttemptState.CANCELLED
        assert client.cancel_step(ref, "a") is False
        with pytest.raises(cf.StepNotFound):
            client.cancel_step(ref, "nosuchstep")
        # The rest of the run finishes; the run ends cancelled, naming the step.
        assert store.finish(tokens["b"], Succeeded(b'"b"'), time.time_ns()).applied
        stored = cairnflow_kit.stored(ref)
        assert stored.state == cf.Status.CANCELLED.value
        assert stored.error is not None
        assert stored.error.step == "a"
        assert cairnflow_kit.stored_output(ref, "b") == "b"
        assert client.cancel_step(ref, "b") is False
        if cairnflow_kit.declares(Cap.RETRY_RUN):
            assert client.retry_run(ref) is True
            assert _statuses(cairnflow_kit, ref) == {
                "a": cf.StepStatus.READY,
                "b": cf.StepStatus.SUCCEEDED,
                "c": cf.StepStatus.BLOCKED,
            }

    @proves(Cap.CANCEL_STEP)
    def test_a_step_running_on_another_client_stops_at_its_next_lease_renewal(
        self, cairnflow_kit: Kit
    ) -> None:
        started = threading.Event()
        saw: dict[str, bool] = {}
        wf = cf.Workflow("kit-cancel-step-live")

        @wf.step
        def slow(ctx: cf.StepContext, data: Any) -> str:
            started.set()
            try:  # a sync step may be interrupted inside the wait: it hears the cancel either way
                ctx.cancel_event.wait(TIMEOUT)
            finally:
                saw["cancelled"] = ctx.cancelled
            return "finished anyway"

        wf.step(lambda c, d: "after", name="after", after=["slow"])
        wf.step(lambda c, d: "other", name="other")
        worker = cairnflow_kit.client(wf)
        ref = worker.enqueue("kit-cancel-step-live", 1)
        assert started.wait(TIMEOUT)
        operator = cairnflow_kit.client(wf, start=False)  # another client: no local attempt
        assert operator.cancel_step(ref, "slow") is True
        info = worker.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.CANCELLED
        assert (info.steps["slow"].status, info.steps["slow"].output) == (
            cf.StepStatus.CANCELLED,
            None,
        )
        assert info.steps["after"].status is cf.StepStatus.CANCELLED
        assert info.steps["other"].status is cf.StepStatus.SUCCEEDED
        wait_until(lambda: "cancelled" in saw, timeout=TIMEOUT)
        assert saw["cancelled"] is True, "the attempt never heard of the cancel"
        assert cairnflow_kit.stored_step(ref, "slow").output is None

    @proves(Cap.CANCEL_STEP)
    def test_cancelling_the_last_unfinished_step_ends_the_run_at_once(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-cancel-last", steps=[cf.Step("a", lambda c, d: d)])
        wf.step(lambda c, d: d, name="b", after=["a"])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-cancel-last", 1)
        assert client.cancel_step(ref, "a") is True
        info = client.info(ref)
        assert info.status is cf.Status.CANCELLED
        assert {s.status for s in info.steps.values()} == {cf.StepStatus.CANCELLED}

    @proves(Cap.CANCEL_STEP)
    def test_a_cancel_racing_the_attempts_commit_lets_exactly_one_win(
        self, cairnflow_kit: Kit
    ) -> None:
        # The worst moment: the operator cancels the step while its attempt commits its
        # success. Both lock the run first; whichever is second must see the first.
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-cancel-race", steps=[cf.Step("a", lambda c, d: d)])
        wf.step(lambda c, d: d, name="b")
        client = cairnflow_kit.client(wf, start=False)
        for round_ in range(8):
            ref = client.enqueue("kit-cancel-race", round_)
            tokens = {held.step: held.token for held in claim_all(store, "kit-cancel-race")}
            results: dict[str, Any] = {}
            gate = threading.Barrier(2)

            def finish(token: str, gate: threading.Barrier, results: dict[str, Any]) -> None:
                gate.wait()
                results["finish"] = store.finish(token, Succeeded(b"1"), time.time_ns())

            def cancel(run: cf.RunRef, gate: threading.Barrier, results: dict[str, Any]) -> None:
                gate.wait()
                results["cancel"] = client.cancel_step(run, "a")

            threads = [
                threading.Thread(target=finish, args=(tokens["a"], gate, results)),
                threading.Thread(target=cancel, args=(ref, gate, results)),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT)
            step = cairnflow_kit.stored_step(ref, "a")
            if results["cancel"]:
                assert results["finish"].state is AttemptState.CANCELLED
                assert (step.status, step.output) == (cf.StepStatus.CANCELLED, None)
            else:
                assert results["finish"].applied
                assert step.status is cf.StepStatus.SUCCEEDED
            assert store.finish(tokens["b"], Succeeded(b"2"), time.time_ns()).applied
            final = cairnflow_kit.stored(ref).state
            expected = cf.Status.CANCELLED if results["cancel"] else cf.Status.SUCCEEDED
            assert final == expected.value
