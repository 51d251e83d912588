"""The step history (STEP_HISTORY): every transition of a run's steps, in order, bounded.

A store records each transition in the transaction that makes it, so the
tests read the history after each transition at the SPI (nothing could add a
row later), and check the two things a history written outside that
transaction gets wrong: an attempt fenced out (its lease taken over, its run
cancelled) records nothing, and a stalled worker's takeover shows as a
``reclaimed`` followed by the rescuer's claim.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import cairnflow as cf
from cairnflow import Cap, ErrorInfo
from cairnflow._models import STEP_HISTORY_KEEP
from cairnflow.store import Failed, Snoozed, StepHistory, Succeeded

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_all

__all__ = ["StepHistoryTests"]

_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)


def _history(kit: Kit) -> StepHistory:
    store = kit.store
    assert isinstance(store, StepHistory), "a store declaring STEP_HISTORY has step_history"
    return store


def _events(kit: Kit, run_id: str) -> list[tuple[str, int, str]]:
    """The run's history as (step, attempt, event), oldest first."""
    return [(e.step, e.attempt, e.event) for e in _history(kit).step_history(run_id)]


class StepHistoryTests:
    """``Cap.STEP_HISTORY``: a run keeps the transitions of its steps, in order, bounded."""

    @proves(Cap.STEP_HISTORY, Cap.RETRY)
    def test_every_transition_of_a_run_is_recorded_in_order(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-step-history")
        calls: list[int] = []

        @wf.step(retry=cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
        def fetch(ctx: cf.StepContext, data: Any) -> str:
            calls.append(ctx.attempt)
            if len(calls) < 2:
                raise ConnectionError("fails once")
            return "fetched"

        @wf.step(after=[fetch])
        def store(ctx: cf.StepContext, data: Any) -> str:
            return "stored"

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-step-history")
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        history = client.step_history(ref)
        assert [(e.step, e.attempt, e.event) for e in history] == [
            ("fetch", 1, "claimed"),
            ("fetch", 1, "retried"),
            ("fetch", 2, "claimed"),
            ("fetch", 2, "succeeded"),
            ("store", 1, "claimed"),
            ("store", 1, "succeeded"),
        ]
        seqs = [e.seq for e in history]
        assert seqs == sorted(set(seqs)), "seq orders a run's transitions"
        assert {e.node for e in history} == {client.node_id}
        assert all(e.at_ns > 0 for e in history)
        assert client.step_history("run_kitnosuchrun") == []

    @proves(Cap.STEP_HISTORY)
    def test_each_transition_is_recorded_by_its_own_write_and_a_fenced_one_records_none(
        self, cairnflow_kit: Kit
    ) -> None:
        # At the SPI, with no client running: after each transition the history already
        # holds it (it was written in the transition's transaction), and a write whose
        # lease no longer holds adds nothing.
        store = cairnflow_kit.store
        client = cairnflow_kit.client(
            cf.Workflow("kit-step-spi", steps=[cf.Step("a", lambda c, d: d)]), start=False
        )
        ref = client.enqueue("kit-step-spi")
        (first,) = claim_all(store, "kit-step-spi")
        assert _events(cairnflow_kit, ref.id) == [("a", 1, "claimed")]
        assert _history(cairnflow_kit).step_history(ref.id)[0].node == "kit-node"
        now = time.time_ns()
        assert store.finish(first.token, Snoozed(until=now), now).applied
        (second,) = claim_all(store, "kit-step-spi")
        error = ErrorInfo(type="RuntimeError", message="kit", step="a", attempt=2)
        assert store.finish(second.token, Failed(error, retry_at=now), now).applied
        (third,) = claim_all(store, "kit-step-spi")
        assert store.hand_back([third.token], now) == 1
        expected = [
            ("a", 1, "claimed"),
            ("a", 1, "snoozed"),
            ("a", 2, "claimed"),
            ("a", 2, "retried"),
            ("a", 3, "claimed"),
            ("a", 3, "snoozed"),
        ]
        assert _events(cairnflow_kit, ref.id) == expected
        # Stale tokens: every one of these writes is fenced out and records nothing.
        for stale in (first, second, third):
            assert not store.finish(stale.token, Succeeded(b"null"), now).applied
        assert _events(cairnflow_kit, ref.id) == expected
        (fourth,) = claim_all(store, "kit-step-spi")
        assert store.cancel_run(ref.id, now)
        expected += [("a", 4, "claimed"), ("a", 4, "cancelled")]
        assert _events(cairnflow_kit, ref.id) == expected
        assert not store.finish(fourth.token, Succeeded(b"null"), now).applied
        assert _events(cairnflow_kit, ref.id) == expected, "a cancelled attempt's outcome"

    @proves(Cap.STEP_HISTORY, Cap.LEASE)
    def test_a_stalled_worker_shows_as_reclaimed_and_its_late_outcome_records_nothing(
        self, cairnflow_kit: Kit
    ) -> None:
        started = threading.Event()
        release = threading.Event()
        returned = threading.Event()
        wf = cf.Workflow("kit-step-stall")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            if ctx.node_id == "kit-stalled":
                started.set()
                release.wait(TIMEOUT)  # stalled here, mid-attempt...
                returned.set()
                return "late"
            return "rescued"

        partition = cairnflow_kit.partition()
        stalled = cairnflow_kit.client(
            wf, store=partition, node_id="kit-stalled", lease=0.5, interrupt=False
        )
        ref = stalled.enqueue("kit-step-stall")
        assert started.wait(TIMEOUT)
        partition.cut()  # ...and cannot renew its lease or write
        rescuer = cairnflow_kit.client(wf, node_id="kit-rescuer", lease=5)
        assert rescuer.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        expected = [
            ("work", 1, "claimed", "kit-stalled"),
            ("work", 1, "reclaimed", "kit-stalled"),
            ("work", 2, "claimed", "kit-rescuer"),
            ("work", 2, "succeeded", "kit-rescuer"),
        ]
        history = rescuer.step_history(ref)
        assert [(e.step, e.attempt, e.event, e.node) for e in history] == expected
        release.set()
        partition.heal()  # the stalled worker wakes and offers its outcome: fenced out
        assert returned.wait(TIMEOUT)
        stalled.stop(timeout=TIMEOUT)
        history = rescuer.step_history(ref)
        assert [(e.step, e.attempt, e.event, e.node) for e in history] == expected

    @proves(Cap.STEP_HISTORY)
    def test_a_run_keeps_its_newest_transitions_only(self, cairnflow_kit: Kit) -> None:
        # 60 failed attempts of one step, retried at once: 120 transitions, of which the
        # run keeps the newest STEP_HISTORY_KEEP once a transition other than a claim
        # has been recorded.
        store = cairnflow_kit.store
        client = cairnflow_kit.client(
            cf.Workflow("kit-step-bound", steps=[cf.Step("a", lambda c, d: d)]), start=False
        )
        ref = client.enqueue("kit-step-bound")
        attempts = 60
        for n in range(1, attempts + 1):
            (attempt,) = claim_all(store, "kit-step-bound")
            now = time.time_ns()
            error = ErrorInfo(type="RuntimeError", message="kit", step="a", attempt=n)
            assert store.finish(attempt.token, Failed(error, retry_at=now), now).applied
        expected = [
            ("a", n, event) for n in range(1, attempts + 1) for event in ("claimed", "retried")
        ]
        kept = _events(cairnflow_kit, ref.id)
        assert len(kept) == STEP_HISTORY_KEEP
        assert kept == expected[-STEP_HISTORY_KEEP:], "the newest transitions are kept"

    @proves(Cap.DELETE_RUN, requires=[Cap.STEP_HISTORY])
    def test_a_deleted_run_takes_its_step_history_with_it(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-step-delete", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-step-delete", 1)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        client.stop()
        assert [e.event for e in client.step_history(ref)] == ["claimed", "succeeded"]
        assert client.delete_runs(ref) == 1
        assert client.step_history(ref) == [], "a deleted run's step history was kept"
