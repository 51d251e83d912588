"""Lifecycle events and on_failure handlers: declarations, validation, refusals (Cap.LIFECYCLE).

Delivery across clients is the kit's to prove (conformance/suite/lifecycle.py); here,
what is checked before anything reaches a store.
"""

from __future__ import annotations

from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow._engine._lifecycle import Subscriber, subscribed_workflows
from cairnflow._models import LIFECYCLE_KINDS


def _event(kind: str = "run.failed", workflow: str = "w") -> cf.LifecycleEvent:
    return cf.LifecycleEvent(1, kind, "run_1", workflow, None, 0, None, 1)


def _noop(failure: cf.RunFailure) -> None:
    del failure


def test_on_failure_is_declared_by_argument_or_decorator_and_needs_lifecycle() -> None:
    policy = cf.RetryPolicy(max_attempts=3)
    given = cf.Workflow("given", on_failure=_noop, on_failure_retry=policy)
    assert given.failure_handler is _noop
    assert given.failure_retry is policy
    decorated = cf.Workflow("decorated")

    @decorated.on_failure
    def handle(failure: cf.RunFailure) -> None:
        del failure

    assert decorated.failure_handler is handle
    assert decorated.failure_retry == cf.RetryPolicy()
    for wf in (given, decorated):
        assert Cap.LIFECYCLE in wf.required_capabilities()
    assert Cap.LIFECYCLE not in cf.Workflow("plain").required_capabilities()
    with_retry = cf.Workflow("with-retry")
    assert with_retry.on_failure(retry=policy)(_noop) is _noop
    assert with_retry.failure_retry is policy


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: cf.Workflow("w", on_failure_retry=cf.RetryPolicy()), ValueError),
        (lambda: cf.Workflow("w", on_failure="nope"), TypeError),  # type: ignore[arg-type]
        (lambda: cf.Workflow("w").on_failure(_noop, retry=3), TypeError),  # type: ignore[arg-type]
    ],
)
def test_a_bad_on_failure_is_refused(build: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        build()


def test_on_event_checks_its_arguments_before_the_store() -> None:
    client = cf.Client(cf.open_store("memory://"))
    with pytest.raises(TypeError, match="callable"):
        client.on_event("print")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"run\.nope"):
        client.on_event(print, kinds={"run.nope"})
    with pytest.raises(ValueError, match="kinds"):
        client.on_event(print, kinds=())
    with pytest.raises(ValueError, match="workflows"):
        client.on_event(print, workflows=[])
    with pytest.raises(cf.InvalidName):
        client.on_event(print, workflows=["bad name!"])
    client.on_event(print, kinds=LIFECYCLE_KINDS, workflows="w")


def test_a_store_without_lifecycle_refuses_on_event_and_on_failure() -> None:
    class Plain(cf.store.MemoryStore):
        capabilities = cf.store.MemoryStore.capabilities - {Cap.LIFECYCLE}

    store = Plain()
    client = cf.Client(store)
    with pytest.raises(cf.Unsupported, match="LIFECYCLE"):
        client.on_event(print)
    client.register(cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)], on_failure=_noop))
    with pytest.raises(cf.Unsupported, match="LIFECYCLE"):
        client.start()
    assert not client.running
    with pytest.raises(cf.Unsupported, match="LIFECYCLE"):
        client.lifecycle_subscriptions()
    with pytest.raises(cf.Unsupported, match="LIFECYCLE"):
        client.drop_lifecycle_subscription("events", "w")
    assert store.lifecycle_subscriptions() == []  # nothing was recorded


def test_drop_lifecycle_subscription_checks_its_arguments_before_the_store() -> None:
    store = cf.open_store("memory://")
    assert isinstance(store, cf.store.Lifecycle)
    store.subscribe_lifecycle("events", "w", 5)
    client = cf.Client(store)
    with pytest.raises(ValueError, match="'events' or 'on_failure', got 'Events'"):
        client.drop_lifecycle_subscription("Events", "w")
    with pytest.raises(cf.InvalidName):
        client.drop_lifecycle_subscription("events", "")  # every workflow is spelled None
    assert [(s.channel, s.workflow, s.since_ns) for s in client.lifecycle_subscriptions()] == [
        ("events", "w", 5)
    ]


def test_a_subscriber_wants_its_kinds_and_workflows() -> None:
    everything = Subscriber(print, None, None)
    failures = Subscriber(print, frozenset({"run.failed"}), frozenset({"w"}))
    assert everything.wants(_event("step.started", "v"))
    assert failures.wants(_event())
    assert not failures.wants(_event("run.succeeded"))
    assert not failures.wants(_event(workflow="v"))
    assert subscribed_workflows([failures]) == {"w"}
    assert subscribed_workflows([failures, everything]) is None
    assert _event().at.year >= 1970
