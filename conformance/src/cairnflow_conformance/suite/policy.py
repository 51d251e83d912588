"""Failure policies and history: RETRY_UNTIL, RETRY_MAX_ERRORS, DISCARD, ERROR_HISTORY.

Each policy is judged by the store in the transaction that records a failure
(``Failed.retry_stands``, the run row locked), so the tests drive it twice:
through a client, as an application declares it, and at the SPI, on explicit
times and racing peer stores, where a store that judged on a stale read (or
counted an attempt that was handed back or retaken as an error) is caught.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.clock import from_ns
from cairnflow.store import ClaimedAttempt, ErrorHistory, Failed, FinishResult, Store
from cairnflow.testing import FAULTS_ENV

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_all, wait_until

__all__ = [
    "BudgetProcessTests",
    "DiscardTests",
    "ErrorHistoryTests",
    "MaxErrorsTests",
    "RecoveredStepTests",
    "RetryUntilTests",
]

_S = 1_000_000_000
_GROUP = pytest.mark.xdist_group("cairnflow-conformance-processes")
_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)
_MINUTE = cf.Backoff(initial=60, factor=1.0, max=60)


def _always_failing(
    name: str, policy: cf.RetryPolicy, **options: Any
) -> tuple[cf.Workflow, list[int]]:
    """A workflow whose step ``call`` always raises, then a step ``after`` it."""
    attempts: list[int] = []
    wf = cf.Workflow(name, **options)

    @wf.step(retry=policy)
    def call(ctx: cf.StepContext, data: Any) -> str:
        attempts.append(ctx.attempt)
        raise ConnectionError(f"failure {len(attempts)}")

    wf.step(lambda ctx, d: d, name="after", after=[call])
    return wf, attempts


def _error(step: str, attempt: int = 1) -> cf.ErrorInfo:
    return cf.ErrorInfo(type="ConnectionError", message="down", step=step, attempt=attempt)


def _two_roots(kit: Kit, name: str, runs: int = 1) -> tuple[list[cf.RunRef], list[ClaimedAttempt]]:
    """``runs`` runs of a workflow with two root steps, every step claimed."""
    wf = cf.Workflow(name, steps=[cf.Step("a", lambda c, d: d), cf.Step("b", lambda c, d: d)])
    client = kit.client(wf, start=False)
    refs = [client.enqueue(name, n) for n in range(runs)]
    claimed = claim_all(kit.store, name)
    assert len(claimed) == 2 * runs
    return refs, claimed


def _failures_are(client: cf.Client, ref: cf.RunRef, count: int) -> Callable[[], bool]:
    """True once step ``call`` of ``ref`` failed ``count`` times (for :func:`wait_until`)."""
    return lambda: client.info(ref).steps["call"].failures == count


def _fail_at_once(
    stores: list[Store], pair: list[ClaimedAttempt], **policy: Any
) -> list[FinishResult | BaseException]:
    """Fail each attempt of ``pair`` through its own store at the same moment (``policy``:
    the rest of the :class:`Failed`)."""
    gate = threading.Barrier(len(pair))
    results: list[FinishResult | BaseException] = [RuntimeError("not run")] * len(pair)

    def race(i: int) -> None:
        try:
            gate.wait(TIMEOUT)
            now = time.time_ns()
            outcome = Failed(_error(pair[i].step), retry_at=now, **policy)
            results[i] = stores[i].finish(pair[i].token, outcome, now)
        except BaseException as error:  # noqa: BLE001 - the test asserts on it
            results[i] = error

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(pair))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    return results


def _races(kit: Kit, name: str, **policy: Any) -> list[tuple[cf.RunRef, list[FinishResult]]]:
    """Three runs of two root steps; each run's two attempts failed at once through two
    store objects (:func:`_fail_at_once`), every failure written. Per run: its results."""
    refs, claimed = _two_roots(kit, name, runs=3)
    stores: list[Store] = kit.peer_stores(2)
    by_run: dict[str, list[ClaimedAttempt]] = {}
    for attempt in claimed:
        by_run.setdefault(attempt.run_id, []).append(attempt)
    raced: list[tuple[cf.RunRef, list[FinishResult]]] = []
    for ref in refs:
        results: list[FinishResult] = []
        for result in _fail_at_once(stores, by_run[ref.id], **policy):
            assert isinstance(result, FinishResult), result
            assert result.applied
            results.append(result)
        raced.append((ref, results))
    return raced


class RetryUntilTests:
    """``Cap.RETRY_UNTIL``: retries stop at a deadline as well as a count."""

    @proves(Cap.RETRY_UNTIL)
    def test_retries_stop_at_a_deadline_counted_from_the_run_start(
        self, cairnflow_kit: Kit
    ) -> None:
        clock = cf.clock.Fake()
        policy = cf.RetryPolicy(max_attempts=10, backoff=_MINUTE, until=150)
        wf, attempts = _always_failing("kit-until-span", policy)
        client = cairnflow_kit.client(wf, clock=clock)
        ref = client.enqueue("kit-until-span")
        for failures in (1, 2):  # retries due at +60 s and +120 s: inside the 150 s
            wait_until(_failures_are(client, ref, failures), timeout=TIMEOUT, what="a failure")
            assert client.info(ref).steps["call"].status is cf.StepStatus.SCHEDULED
            clock.advance(60)
        # The third failure's retry would be due at +180 s: past the deadline, so none.
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert attempts == [1, 2, 3]
        assert info.steps["call"].failures == 3
        assert info.steps["after"].status is cf.StepStatus.CANCELLED

    @proves(Cap.RETRY_UNTIL)
    def test_an_absolute_deadline_stops_the_retries(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        deadline = from_ns(clock.now_ns() + 90 * _S)
        policy = cf.RetryPolicy(max_attempts=10, backoff=_MINUTE, until=deadline)
        wf, attempts = _always_failing("kit-until-abs", policy)
        client = cairnflow_kit.client(wf, clock=clock)
        ref = client.enqueue("kit-until-abs")
        wait_until(
            lambda: client.info(ref).steps["call"].failures == 1,
            timeout=TIMEOUT,
            what="the first failure",
        )
        clock.advance(60)  # the retry at +60 s runs; the next would be at +120 s
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert attempts == [1, 2]

    @proves(Cap.RETRY_UNTIL)
    def test_the_store_judges_the_deadline_on_the_retry_time(self, cairnflow_kit: Kit) -> None:
        # At the SPI: the deadline is on the retry's due time, inclusive, absolute or
        # counted from the run's run_at.
        store = cairnflow_kit.store
        refs, claimed = _two_roots(cairnflow_kit, "kit-until-spi")
        run_at = cairnflow_kit.stored(refs[0]).run_at
        now = time.time_ns()
        first, second = sorted(claimed, key=lambda a: a.step)
        kept = store.finish(
            first.token,
            Failed(_error("a"), retry_at=run_at + 10 * _S, retry_window=10 * _S),
            now,
        )
        assert kept.applied
        assert kept.run_status is None
        assert cairnflow_kit.stored_step(refs[0], "a").status is cf.StepStatus.SCHEDULED
        ended = store.finish(
            second.token,
            Failed(_error("b"), retry_at=now + 10 * _S, retry_deadline=now + 10 * _S - 1),
            now,
        )
        assert ended.run_status is cf.Status.FAILED
        stored = cairnflow_kit.stored(refs[0])
        assert stored.state == cf.Status.FAILED.value
        assert {s.name: s.status for s in stored.steps} == {
            "a": cf.StepStatus.CANCELLED,
            "b": cf.StepStatus.FAILED,
        }


class MaxErrorsTests:
    """``Cap.RETRY_MAX_ERRORS``: retries stop after N failed attempts across the whole run."""

    @proves(Cap.RETRY_MAX_ERRORS)
    def test_the_failures_of_every_step_count_against_the_run(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-max-errors", max_errors=3)
        policy = cf.RetryPolicy(max_attempts=10, backoff=_QUICK)

        def fail(ctx: cf.StepContext, data: Any) -> None:
            raise ConnectionError(ctx.step)

        wf.add(cf.Step("a", fail, retry=policy))
        wf.add(cf.Step("b", fail, retry=policy))
        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-max-errors"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert sum(step.failures for step in info.steps.values()) == 3
        assert info.error is not None
        assert info.error.type == "ConnectionError"

    @proves(Cap.RETRY_MAX_ERRORS)
    def test_two_failures_at_once_on_two_stores_do_not_both_slip_under(
        self, cairnflow_kit: Kit
    ) -> None:
        # Two steps of a run fail at the same moment through two store objects (two
        # connections): with max_errors=2 exactly one may be retried. A store that
        # counted outside the run's lock would retry both.
        for ref, results in _races(cairnflow_kit, "kit-max-race", max_errors=2):
            assert sorted(str(r.run_status) for r in results) == [
                "None",
                cf.Status.FAILED.value,
            ], "both failures were judged under the limit, or both over it"
            stored = cairnflow_kit.stored(ref)
            assert stored.state == cf.Status.FAILED.value
            assert sum(step.failures for step in stored.steps) == 2

    @proves(Cap.RETRY_MAX_ERRORS)
    def test_handed_back_and_retaken_attempts_are_not_errors(self, cairnflow_kit: Kit) -> None:
        # A stop (hand back) and a dead worker (lease lapsed, retaken) count as no error:
        # the first failure afterwards is still under max_errors=2.
        store = cairnflow_kit.store
        refs, claimed = _two_roots(cairnflow_kit, "kit-max-cutoff")
        now = time.time_ns()
        assert store.hand_back([a.token for a in claimed], now) == 2
        again = claim_all(store, "kit-max-cutoff")
        assert len(again) == 2
        reclaimed = store.reclaim_expired(
            lease_now=now + 3600 * _S,
            now=time.time_ns(),
            workflows=["kit-max-cutoff"],
            max_reclaims=5,
            limit=10,
        )
        assert reclaimed.requeued == 2
        third = sorted(claim_all(store, "kit-max-cutoff"), key=lambda a: a.step)
        assert [a.attempt for a in third] == [3, 3]
        result = store.finish(
            third[0].token,
            Failed(_error("a", 3), retry_at=time.time_ns(), max_errors=2),
            time.time_ns(),
        )
        assert result.applied
        assert result.run_status is None, "a cut-off attempt was counted"
        assert cairnflow_kit.stored(refs[0]).state == "active"
        final = store.finish(
            third[1].token,
            Failed(_error("b", 3), retry_at=time.time_ns(), max_errors=2),
            time.time_ns(),
        )
        assert final.run_status is cf.Status.FAILED


class BudgetProcessTests:
    """A worker process killed at the worst moment for the failure policy."""

    @_GROUP
    @proves(Cap.RETRY_MAX_ERRORS, Cap.DISCARD, requires=[Cap.MULTI_PROCESS, Cap.LEASE])
    def test_a_worker_killed_as_it_writes_a_failure_spends_none_of_the_budget(
        self, cairnflow_kit: Kit, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The victim's step raised and its committer is about to write the failure
        # when the process dies: nothing of it is recorded, the attempt is retaken after
        # its lease, and the run's two errors are spent by the two attempts after it.
        kit = cairnflow_kit
        monkeypatch.setenv(FAULTS_ENV, "outcome.before_commit=kill#1")
        victim = kit.processes.spawn("kit-budget-victim", workers=1, lease=1.0)
        monkeypatch.delenv(FAULTS_ENV)
        client = kit.client(workflows.budget(), start=False)
        ref = client.enqueue(workflows.BUDGET, {"traces": str(kit.traces.directory)})
        wait_until(lambda: not victim.alive, timeout=TIMEOUT, what="the victim to die")
        assert victim.returncode == -signal.SIGKILL, victim.log()
        assert kit.stored_step(ref, "flaky").failures == 0
        rescuer = kit.processes.spawn("kit-budget-rescuer", workers=1)
        info = client.wait(ref, timeout=TIMEOUT * 2)
        assert info.status is cf.Status.DISCARDED, (info.error, kit.processes.logs())
        step = kit.stored_step(ref, "flaky")
        assert (step.attempt, step.failures) == (3, 2)
        executed = sorted(
            kit.traces.read("exec", run=ref.id, step="flaky"), key=lambda e: e["attempt"]
        )
        assert [(e["node"], e["attempt"]) for e in executed] == [
            ("kit-budget-victim", 1),
            ("kit-budget-rescuer", 2),
            ("kit-budget-rescuer", 3),
        ]
        assert rescuer.stop() == 0, rescuer.log()


class DiscardTests:
    """``Cap.DISCARD``: a run out of retries can end ``discarded`` instead of ``failed``."""

    @proves(Cap.DISCARD)
    def test_a_run_out_of_retries_is_discarded(self, cairnflow_kit: Kit) -> None:
        policy = cf.RetryPolicy(max_attempts=2, backoff=_QUICK, on_exhausted="discard")
        wf, attempts = _always_failing("kit-discard", policy)
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-discard")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.DISCARDED
        assert info.finished
        assert attempts == [1, 2]
        assert info.error is not None
        assert (info.error.type, info.error.attempt) == ("ConnectionError", 2)
        assert info.steps["call"].status is cf.StepStatus.FAILED
        assert info.steps["after"].status is cf.StepStatus.CANCELLED
        assert cairnflow_kit.stored(ref).state == cf.Status.DISCARDED.value
        with pytest.raises(cf.RunFailed):
            client.result(ref, timeout=TIMEOUT)

    @proves(Cap.DISCARD)
    def test_an_error_never_retried_still_fails_the_run(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-discard-permanent")

        @wf.step(retry=cf.RetryPolicy(max_attempts=5, backoff=_QUICK, on_exhausted="discard"))
        def charge(ctx: cf.StepContext, data: Any) -> None:
            raise cf.Permanent(ValueError("card declined"))

        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-discard-permanent"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED

    @proves(Cap.DISCARD, Cap.RETRY_MAX_ERRORS)
    def test_a_run_out_of_its_error_budget_is_discarded(self, cairnflow_kit: Kit) -> None:
        policy = cf.RetryPolicy(max_attempts=10, backoff=_QUICK, on_exhausted="discard")
        wf, attempts = _always_failing("kit-discard-budget", policy, max_errors=2)
        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-discard-budget"), timeout=TIMEOUT)
        assert info.status is cf.Status.DISCARDED
        assert attempts == [1, 2]

    @proves(Cap.DISCARD, Cap.RETRY_UNTIL)
    def test_the_store_discards_when_its_judgement_ends_the_retries(
        self, cairnflow_kit: Kit
    ) -> None:
        store = cairnflow_kit.store
        refs, claimed = _two_roots(cairnflow_kit, "kit-discard-spi")
        now = time.time_ns()
        result = store.finish(
            claimed[0].token,
            Failed(
                _error(claimed[0].step),
                retry_at=now + 10 * _S,
                discard=True,
                retry_deadline=now,
            ),
            now,
        )
        assert result.run_status is cf.Status.DISCARDED
        assert cairnflow_kit.stored(refs[0]).state == cf.Status.DISCARDED.value


class RecoveredStepTests:
    """``Cap.RETRY``: a step that failed, then succeeded, reads as succeeded."""

    @proves(Cap.RETRY)
    def test_a_step_that_failed_then_succeeded_shows_its_output_not_an_old_error(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-recovered")
        calls: list[int] = []

        @wf.step(retry=cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
        def fetch(ctx: cf.StepContext, data: Any) -> dict[str, int]:
            calls.append(ctx.attempt)
            if len(calls) < 3:
                raise ConnectionError(f"failure {len(calls)}")
            return {"rows": 7}

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-recovered")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert info.error is None, "a run that succeeded carries an error"
        assert info.result == {"rows": 7}
        assert client.result(ref, timeout=TIMEOUT) == {"rows": 7}
        step = info.steps["fetch"]
        assert step.status is cf.StepStatus.SUCCEEDED
        assert step.output == {"rows": 7}
        assert (step.attempts, step.failures) == (3, 2)
        # The earlier error is history (the step's last error), never its result.
        assert step.error is not None
        assert step.error.message == "failure 2"
        stored = cairnflow_kit.stored(ref)
        assert stored.state == cf.Status.SUCCEEDED.value
        assert stored.error is None
        assert cairnflow_kit.stored_output(ref, "fetch") == {"rows": 7}


def _history_store(kit: Kit) -> ErrorHistory:
    store = kit.store
    assert isinstance(store, ErrorHistory), "a store declaring ERROR_HISTORY has run_errors"
    return store


class ErrorHistoryTests:
    """``Cap.ERROR_HISTORY``: a run keeps the errors of its last N failed attempts."""

    @proves(Cap.ERROR_HISTORY, Cap.RETRY)
    def test_a_recovered_step_keeps_its_errors_as_history_and_its_output_as_result(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-history")
        calls: list[int] = []

        @wf.step(retry=cf.RetryPolicy(max_attempts=5, backoff=_QUICK))
        def fetch(ctx: cf.StepContext, data: Any) -> str:
            calls.append(ctx.attempt)
            if len(calls) < 4:
                raise ConnectionError(f"failure {len(calls)}")
            return "fetched"

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-history")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert info.result == "fetched"
        assert info.error is None
        errors = client.errors(ref)
        assert [(e.seq, e.step, e.attempt) for e in errors] == [
            (3, "fetch", 3),
            (2, "fetch", 2),
            (1, "fetch", 1),
        ]
        assert [e.message for e in errors] == ["failure 3", "failure 2", "failure 1"]
        for error in errors:
            assert error.type == "ConnectionError"
            assert error.node == client.node_id
            assert error.traceback is not None
            assert "ConnectionError: failure" in error.traceback
            assert error.at_ns > 0
        assert errors[0].at_ns >= errors[-1].at_ns

    @proves(Cap.ERROR_HISTORY)
    def test_only_the_newest_errors_are_kept_and_zero_keeps_none(self, cairnflow_kit: Kit) -> None:
        policy = cf.RetryPolicy(max_attempts=5, backoff=_QUICK)
        wf, attempts = _always_failing("kit-history-bound", policy)
        client = cairnflow_kit.client(wf, error_history=2)
        ref = client.enqueue("kit-history-bound")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert attempts == [1, 2, 3, 4, 5]
        errors = client.errors(ref)
        assert [(e.seq, e.attempt, e.message) for e in errors] == [
            (5, 5, "failure 5"),
            (4, 4, "failure 4"),
        ]
        # A workflow's own setting overrides the client's: 0 keeps none.
        quiet, _ = _always_failing(
            "kit-history-off", cf.RetryPolicy(max_attempts=2, backoff=_QUICK), error_history=0
        )
        client.register(quiet)
        off = client.wait(client.enqueue("kit-history-off"), timeout=TIMEOUT)
        assert off.status is cf.Status.FAILED
        assert client.errors(off.ref) == []

    @proves(Cap.ERROR_HISTORY)
    def test_the_history_is_trimmed_in_the_transaction_that_records_a_failure(
        self, cairnflow_kit: Kit
    ) -> None:
        # At the SPI, with no client running (nothing could trim later): after every
        # failure the run holds at most keep_errors rows, the newest.
        store = cairnflow_kit.store
        history = _history_store(cairnflow_kit)
        refs, claimed = _two_roots(cairnflow_kit, "kit-history-spi")
        run_id = refs[0].id
        attempts = {a.step: a for a in claimed}
        for n in range(1, 5):
            attempt = attempts["a"]
            now = time.time_ns()
            outcome = Failed(
                _error("a", attempt.attempt), retry_at=now, keep_errors=2, node=f"kit-node-{n}"
            )
            assert store.finish(attempt.token, outcome, now).applied
            kept = history.run_errors(run_id)
            assert [e.seq for e in kept] == list(range(n, max(n - 2, 0), -1))
            assert kept[0].node == f"kit-node-{n}"
            assert kept[0].at_ns == now
            assert (kept[0].step, kept[0].attempt) == ("a", attempt.attempt)
            assert kept[0].error == outcome.error
            again = [a for a in claim_all(store, "kit-history-spi") if a.step == "a"]
            assert len(again) == 1
            attempts["a"] = again[0]
        assert history.run_errors("run_kitnosuchrun") == []

    @proves(Cap.ERROR_HISTORY)
    def test_two_failures_of_a_run_at_once_take_two_numbers(self, cairnflow_kit: Kit) -> None:
        history = _history_store(cairnflow_kit)
        for ref, _results in _races(cairnflow_kit, "kit-history-race", keep_errors=5):
            kept = history.run_errors(ref.id)
            assert [e.seq for e in kept] == [2, 1]
            assert sorted(e.step for e in kept) == ["a", "b"]
