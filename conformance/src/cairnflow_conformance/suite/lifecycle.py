"""Lifecycle events and on_failure handlers (LIFECYCLE): from the tables, once, fenced.

Events are read from the store's outbox, so a client sees the transitions other
clients made; the subscribing clients of a fleet share them, so each event is
delivered by one of them; one that stalls after its claim past its lease
leaves its events to another (redelivered, counted) and delivers nothing
itself. An ``on_failure`` handler runs once per failed run across clients; a
stalled handler is taken over after its lease, and a lease no longer held
writes nothing (proven at the SPI, where the tokens are the test's).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap, ErrorInfo
from cairnflow.store import Failed, Lifecycle, Succeeded
from cairnflow.testing import faults

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_all

__all__ = ["LifecycleTests"]

_PROBE = "kit-probe"
_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)
_STALL = 8.0
"""How long a stalled dispatcher sleeps: several leases of the kit's clients (2 s)."""


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _outbox(kit: Kit) -> Lifecycle:
    store = kit.store
    assert isinstance(store, Lifecycle), "a store declaring LIFECYCLE has the Lifecycle facet"
    return store


class _Collector:
    """Events delivered to one or more clients, with who got them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: list[tuple[str, cf.LifecycleEvent]] = []

    def into(self, name: str) -> Callable[[cf.LifecycleEvent], None]:
        def collect(event: cf.LifecycleEvent) -> None:
            with self.lock:
                self.got.append((name, event))

        return collect

    def events(self) -> list[cf.LifecycleEvent]:
        with self.lock:
            return [event for _, event in self.got]

    def kinds(self, run_id: str) -> Counter[tuple[str, str | None, int]]:
        return Counter((e.kind, e.step, e.attempt) for e in self.events() if e.run_id == run_id)


class LifecycleTests:
    """``Cap.LIFECYCLE``: run and step events across clients, and ``on_failure`` handlers."""

    @proves(Cap.LIFECYCLE, Cap.RETRY)
    def test_a_client_observes_the_events_of_runs_another_client_ran(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-life")
        calls: list[int] = []

        @wf.step(retry=cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
        def fetch(ctx: cf.StepContext, data: Any) -> str:
            calls.append(ctx.attempt)
            if data == "fail" or len(calls) == 1:
                raise ConnectionError("kit flaky")
            return "fetched"

        seen = _Collector()
        observer = cairnflow_kit.client()  # runs nothing: it only subscribes
        observer.on_event(seen.into("observer"))
        assert observer.running
        worker = cairnflow_kit.client(wf)
        ok = worker.enqueue("kit-life", "ok")
        assert worker.wait(ok, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        bad = worker.enqueue("kit-life", "fail")
        assert worker.wait(bad, timeout=TIMEOUT).status is cf.Status.FAILED
        _until(
            lambda: {e.kind for e in seen.events()} >= {"run.succeeded", "run.failed"},
            "both runs' final events",
        )
        assert seen.kinds(ok.id) == Counter(
            {
                ("run.started", None, 1): 1,
                ("step.started", "fetch", 1): 1,
                ("step.retried", "fetch", 1): 1,
                ("step.started", "fetch", 2): 1,
                ("step.succeeded", "fetch", 2): 1,
                ("run.succeeded", None, 0): 1,
            }
        )
        assert seen.kinds(bad.id) == Counter(
            {
                ("run.started", None, 1): 1,
                ("step.started", "fetch", 1): 1,
                ("step.retried", "fetch", 1): 1,
                ("step.started", "fetch", 2): 1,
                ("step.retried", "fetch", 2): 1,
                ("step.started", "fetch", 3): 1,
                ("step.failed", "fetch", 3): 1,
                ("run.failed", None, 0): 1,
            }
        )
        events = seen.events()
        assert all(e.workflow == "kit-life" and e.at_ns > 0 for e in events)
        assert {e.node for e in events if e.step is not None} == {worker.node_id}
        for event in events:
            if event.kind in ("step.retried", "step.failed", "run.failed"):
                assert event.error is not None, event
                assert event.error.message == "kit flaky", event
            else:
                assert event.error is None, event
        assert Counter(e.id for e in events).most_common(1)[0][1] == 1, "an event came twice"

    @proves(Cap.LIFECYCLE, requires=[Cap.SIGNAL, Cap.CANCEL])
    def test_a_cancelled_run_and_its_steps_are_observed(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-life-cancel")
        wf.step(lambda c, d: d, name="a")
        wf.wait("gate", signal="go", after=["a"])
        seen = _Collector()
        cairnflow_kit.client().on_event(seen.into("observer"), workflows=["kit-life-cancel"])
        worker = cairnflow_kit.client(wf)
        ref = worker.enqueue("kit-life-cancel")
        _until(lambda: worker.info(ref).status is cf.Status.WAITING, "the run to wait")
        assert worker.cancel(ref)
        _until(lambda: "run.cancelled" in {e.kind for e in seen.events()}, "run.cancelled")
        time.sleep(0.3)  # anything more would come now
        assert seen.kinds(ref.id) == Counter(
            {
                ("run.started", None, 1): 1,
                ("step.started", "a", 1): 1,
                ("step.succeeded", "a", 1): 1,
                ("step.started", "gate", 1): 1,  # a wait's attempt begins it, then leaves
                ("step.cancelled", "gate", 1): 1,
                ("run.cancelled", None, 0): 1,
            }
        )

    @proves(Cap.LIFECYCLE)
    def test_each_event_is_delivered_once_across_subscribing_clients(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-life-once", steps=[cf.Step("a", lambda c, d: d)])
        seen = _Collector()
        for name in ("first", "second"):
            cairnflow_kit.client().on_event(seen.into(name), workflows=["kit-life-once"])
        worker = cairnflow_kit.client(wf)
        refs = [worker.enqueue("kit-life-once", i) for i in range(8)]
        for ref in refs:
            assert worker.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        _until(lambda: len(seen.events()) >= 4 * len(refs), "every run's four events")
        time.sleep(0.5)  # anything delivered twice would come now
        events = seen.events()
        assert len(events) == 4 * len(refs), Counter(e.kind for e in events)
        assert len({e.id for e in events}) == len(events), "an event was delivered twice"
        for ref in refs:
            assert sorted(seen.kinds(ref.id)) == sorted(
                [
                    ("run.started", None, 1),
                    ("step.started", "a", 1),
                    ("step.succeeded", "a", 1),
                    ("run.succeeded", None, 0),
                ]
            )
        # Nothing is left for anyone: every event was acknowledged.
        assert not _outbox(cairnflow_kit).claim_lifecycle(
            "events", None, token=_PROBE, lease_until=1, now=time.time_ns() * 2, limit=10
        )

    @proves(Cap.LIFECYCLE, Cap.LEASE)
    def test_a_subscriber_stalled_after_its_claim_leaves_its_events_to_another(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-life-stall", steps=[cf.Step("a", lambda c, d: d)])
        seen = _Collector()
        with faults(f"lifecycle.after_claim=stall:{_STALL:g}#1") as armed:
            for name in ("first", "second"):
                cairnflow_kit.client().on_event(seen.into(name))
            worker = cairnflow_kit.client(wf)
            ref = worker.enqueue("kit-life-stall")
            assert worker.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
            _until(lambda: len(seen.events()) >= 4, "the run's four events")
            assert armed.fired() == 1
            redelivered = [e for e in seen.events() if e.deliveries > 1]
            assert redelivered, "the stalled client's events came from another client"
            # Past the stall: the stalled client finds its lease gone and delivers nothing.
            time.sleep(_STALL)
        events = seen.events()
        assert len(events) == 4, [(who, e.kind) for who, e in seen.got]
        assert len({e.id for e in events}) == 4, [(who, e.kind) for who, e in seen.got]
        assert len({who for who, e in seen.got if e.deliveries > 1}) == 1

    @proves(Cap.LIFECYCLE)
    def test_on_failure_runs_once_per_failed_run_across_two_clients(
        self, cairnflow_kit: Kit
    ) -> None:
        handled: list[tuple[str, cf.RunFailure]] = []
        lock = threading.Lock()

        def build(node: str) -> cf.Workflow:
            wf = cf.Workflow("kit-life-fail")

            @wf.step
            def check(ctx: cf.StepContext, data: Any) -> Any:
                if data["fail"]:
                    raise cf.Permanent(ValueError(f"bad {data['n']}"))
                return data

            @wf.on_failure
            def handle(failure: cf.RunFailure) -> None:
                with lock:
                    handled.append((node, failure))

            return wf

        first = cairnflow_kit.client(build("first"))
        cairnflow_kit.client(build("second"))
        refs = {
            first.enqueue("kit-life-fail", {"n": n, "fail": n % 4 != 0}).id: n for n in range(8)
        }
        for run_id in refs:
            first.wait(run_id, timeout=TIMEOUT)
        failed = {run_id for run_id, n in refs.items() if n % 4 != 0}
        _until(lambda: len(handled) >= len(failed), "a handler for every failed run")
        time.sleep(0.5)  # a second handling would come now
        assert sorted(f.run_id for _, f in handled) == sorted(failed)
        for _, failure in handled:
            n = refs[failure.run_id]
            assert failure.workflow == "kit-life-fail"
            assert failure.payload == {"n": n, "fail": True}
            assert failure.step == "check"
            assert failure.error is not None
            assert failure.error.message == f"bad {n}"
            assert failure.attempt == 1

    @proves(Cap.LIFECYCLE)
    def test_a_failing_on_failure_handler_is_retried_by_its_policy(
        self, cairnflow_kit: Kit
    ) -> None:
        calls: list[tuple[str, int]] = []
        retry = cf.RetryPolicy(max_attempts=2, backoff=_QUICK)

        def handle(failure: cf.RunFailure) -> None:
            calls.append((failure.payload, failure.attempt))
            if failure.payload == "never" or failure.attempt == 1:
                raise RuntimeError("kit handler fails")

        wf = cf.Workflow("kit-life-retry", steps=[cf.Step("a", _fails)], on_failure=handle)
        wf.on_failure(handle, retry=retry)
        client = cairnflow_kit.client(wf)
        for payload in ("once", "never"):
            ref = client.enqueue("kit-life-retry", payload)
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        _until(lambda: len(calls) >= 4, "each handler's two attempts")
        time.sleep(0.5)  # a third attempt would come now
        assert sorted(calls) == [("never", 1), ("never", 2), ("once", 1), ("once", 2)]

    @proves(Cap.LIFECYCLE, Cap.LEASE)
    def test_a_stalled_on_failure_handler_is_taken_over_after_its_lease(
        self, cairnflow_kit: Kit
    ) -> None:
        calls: list[cf.RunFailure] = []
        release = threading.Event()

        def build() -> cf.Workflow:
            wf = cf.Workflow("kit-life-takeover", steps=[cf.Step("a", _fails)])

            @wf.on_failure
            def handle(failure: cf.RunFailure) -> None:
                calls.append(failure)
                if len(calls) == 1:
                    release.wait(TIMEOUT)  # the first handler hangs, its renewals stalled

            return wf

        with faults(f"lifecycle.before_renew=stall:{_STALL:g}#1"):
            first = cairnflow_kit.client(build())
            cairnflow_kit.client(build())
            ref = first.enqueue("kit-life-takeover")
            assert first.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
            _until(lambda: len(calls) >= 2, "another client to take the handler over")
            release.set()
            time.sleep(_STALL)  # the stalled one finishes, fenced out
        assert [c.run_id for c in calls] == [ref.id, ref.id]
        assert [c.attempt for c in calls] == [1, 2]

    @proves(Cap.LIFECYCLE)
    def test_a_stopping_client_hands_its_running_on_failure_handler_back(
        self, cairnflow_kit: Kit
    ) -> None:
        calls: list[cf.RunFailure] = []
        release = threading.Event()

        def handle(failure: cf.RunFailure) -> None:
            calls.append(failure)
            if len(calls) == 1:
                release.wait(TIMEOUT)

        def build() -> cf.Workflow:
            return cf.Workflow("kit-life-handback", steps=[cf.Step("a", _fails)], on_failure=handle)

        # The first client's lease is longer than the test waits: only a hand back lets
        # another client run the handler in time.
        first = cairnflow_kit.client(build(), lease=120.0)
        ref = first.enqueue("kit-life-handback")
        assert first.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        _until(lambda: len(calls) == 1, "the first client's handler")
        first.stop(timeout=5)
        cairnflow_kit.client(build())
        try:
            _until(lambda: len(calls) >= 2, "another client to run the handed back handler")
        finally:
            release.set()
        assert [c.attempt for c in calls] == [1, 2]

    @proves(Cap.LIFECYCLE)
    def test_a_lease_taken_over_or_a_fenced_write_records_nothing(self, cairnflow_kit: Kit) -> None:
        # At the SPI, the tokens the test's: a row's lease taken over leaves its first
        # holder nothing to renew, release or delete; a fenced step write writes no event.
        store = cairnflow_kit.store
        outbox = _outbox(cairnflow_kit)
        now = time.time_ns()
        outbox.subscribe_lifecycle("events", "kit-life-spi", now)
        outbox.subscribe_lifecycle("events", "kit-life-spi", now)  # idempotent
        client = cairnflow_kit.client(
            cf.Workflow("kit-life-spi", steps=[cf.Step("a", lambda c, d: d)]), start=False
        )
        ref = client.enqueue("kit-life-spi")
        (attempt,) = claim_all(store, "kit-life-spi")
        error = ErrorInfo(type="RuntimeError", message="kit", step="a", attempt=1)
        assert store.finish(attempt.token, Failed(error, retry_at=now), now).applied
        (again,) = claim_all(store, "kit-life-spi")
        for stale in (attempt,):
            assert not store.finish(stale.token, Succeeded(b"null"), now).applied

        def claim(token: str, at: int) -> list[cf.LifecycleEvent]:
            return outbox.claim_lifecycle(
                "events", ["kit-life-spi"], token=token, lease_until=at + 1_000, now=at, limit=10
            )

        held = claim("kit-one", now)
        assert [(e.kind, e.step, e.attempt) for e in held] == [
            ("run.started", None, 1),
            ("step.started", "a", 1),
            ("step.retried", "a", 1),
            ("step.started", "a", 2),
        ], "one event per transition; the fenced write wrote none"
        assert all(e.run_id == ref.id and e.deliveries == 1 for e in held)
        assert claim("kit-two", now + 500) == [], "a held row is not leased twice"
        taken = claim("kit-two", now + 2_000)
        ids = [e.id for e in held]
        assert [e.id for e in taken] == ids
        assert all(e.deliveries == 2 for e in taken)
        assert outbox.renew_lifecycle(ids, "kit-one", now + 10_000) == []
        assert not outbox.release_lifecycle(ids[0], "kit-one", now)
        assert outbox.ack_lifecycle(ids, "kit-one") == 0
        assert outbox.release_lifecycle(ids[0], "kit-two", now + 2_000)
        assert outbox.renew_lifecycle(ids, "kit-two", now + 10_000) == ids[1:]
        assert outbox.ack_lifecycle(ids, "kit-two") == 3
        (back,) = claim("kit-three", now + 2_001)
        assert back.id == ids[0]
        assert back.deliveries == 3
        assert outbox.ack_lifecycle([back.id], "kit-three") == 1
        assert store.finish(again.token, Succeeded(b"null"), now).applied
        kinds = [e.kind for e in claim("kit-four", now + 3_000)]
        assert kinds == ["step.succeeded", "run.succeeded"]
        assert outbox.unsubscribe_lifecycle("events", "kit-life-spi") == 2

    @proves(Cap.LIFECYCLE)
    def test_subscriptions_are_listed_with_their_backlog_and_dropped_alone(
        self, cairnflow_kit: Kit
    ) -> None:
        # The operator's view (cairn lifecycle): every recorded subscription with the rows it
        # covers, leased ones included until acknowledged; dropping one deletes only the rows
        # no other subscription of its channel wants, and a client never started does it.
        store = cairnflow_kit.store
        outbox = _outbox(cairnflow_kit)
        good, bad = "kit-life-subs-a", "kit-life-subs-b"
        since = time.time_ns()
        outbox.subscribe_lifecycle("events", good, since)
        outbox.subscribe_lifecycle("events", "", since)
        outbox.subscribe_lifecycle("on_failure", bad, since)
        client = cairnflow_kit.client(
            cf.Workflow(good, steps=[cf.Step("a", lambda c, d: d)]),
            cf.Workflow(bad, steps=[cf.Step("a", lambda c, d: d)]),
            start=False,
        )
        client.enqueue(good)
        client.enqueue(bad)
        now = time.time_ns()
        (won,) = claim_all(store, good)
        assert store.finish(won.token, Succeeded(b"null"), now).applied
        (lost,) = claim_all(store, bad)
        error = ErrorInfo(type="RuntimeError", message="kit", step="a", attempt=1)
        assert store.finish(lost.token, Failed(error), now).applied
        # Each run wrote run.started, step.started, its step's end and its run's end on the
        # events channel (once, though two subscriptions cover the first); the failed one a
        # run.failed on on_failure.
        holder = "kit-subs"
        leased = outbox.claim_lifecycle(
            "events", [good], token=holder, lease_until=now + 60 * 10**9, now=now, limit=2
        )
        assert len(leased) == 2

        def listed() -> list[tuple[str, str, int]]:
            subs = client.lifecycle_subscriptions()
            for sub in subs:
                assert sub.since_ns == since, sub
                assert (sub.oldest_ns is None) == (sub.backlog == 0), sub
            return [(sub.channel, sub.workflow, sub.backlog) for sub in subs]

        assert listed() == [("events", "", 8), ("events", good, 4), ("on_failure", bad, 1)]
        # The subscription to every workflow still wants the dropped one's rows.
        assert client.drop_lifecycle_subscription("events", good) == 0
        assert listed() == [("events", "", 8), ("on_failure", bad, 1)]
        outbox.subscribe_lifecycle("events", good, since)
        # Dropping the one to every workflow keeps the rows a workflow's own still wants.
        assert client.drop_lifecycle_subscription("events") == 4
        assert listed() == [("events", good, 4), ("on_failure", bad, 1)]
        assert client.drop_lifecycle_subscription("events", "kit-life-subs-none") is None
        with pytest.raises(ValueError, match="lifecycle channel"):
            client.drop_lifecycle_subscription("event", good)
        assert listed() == [("events", good, 4), ("on_failure", bad, 1)]
        assert client.drop_lifecycle_subscription("on_failure", bad) == 1
        assert client.drop_lifecycle_subscription("events", good) == 4
        assert listed() == []
        assert outbox.ack_lifecycle([e.id for e in leased], holder) == 0


def _fails(ctx: cf.StepContext, data: Any) -> None:
    raise cf.Permanent(ValueError("kit fails"))
