"""A store that declares less: start refuses, APIs raise Unsupported, nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import MemoryStore


class BareStore(MemoryStore):
    """The memory store declaring only what every store must do."""

    capabilities = frozenset({cf.Cap.RESULT, cf.Cap.RUN_QUERY})


def plain() -> cf.Workflow:
    return cf.Workflow("plain", steps=[cf.Step("a", lambda c, d: d)])


@pytest.mark.parametrize(
    ("build", "cap", "reason"),
    [
        (lambda wf: wf.sleep("nap", seconds=1), cf.Cap.SLEEP, "sleep step 'nap'"),
        (lambda wf: wf.wait("gate", signal="go"), cf.Cap.SIGNAL, "wait step 'gate'"),
        (
            lambda wf: wf.step(lambda c, d: d, name="r", retry=cf.RetryPolicy(max_attempts=2)),
            cf.Cap.RETRY,
            "the retry policy of step 'r'",
        ),
        (
            lambda wf: wf.step(lambda c, d: d, name="t", timeout=1),
            cf.Cap.STEP_TIMEOUT,
            "the timeout of step 't'",
        ),
    ],
)
def test_start_refuses_a_workflow_naming_it_and_the_capability(
    build: Any, cap: cf.Cap, reason: str
) -> None:
    wf = cf.Workflow("needy")
    build(wf)
    client = cf.Client(BareStore())
    client.register(wf)
    with pytest.raises(
        cf.Unsupported, match=rf"workflow 'needy' \({reason}\) needs capability {cap.name}"
    ) as caught:
        client.start()
    assert caught.value.capability is cap
    assert not client.running


def test_register_on_a_running_client_checks_at_once() -> None:
    client = cf.Client(BareStore(), poll_interval=0.05)
    client.register(plain())
    client.start()
    try:
        wf = cf.Workflow("late")
        wf.sleep("nap", seconds=1)
        with pytest.raises(cf.Unsupported, match="SLEEP"):
            client.register(wf)
    finally:
        client.stop()


def test_payload_limit_needs_its_capability() -> None:
    with pytest.raises(cf.Unsupported, match="PAYLOAD_LIMIT"):
        cf.Client(BareStore(), payload_limit=10)


def test_result_and_runs_need_their_capabilities() -> None:
    class Blind(MemoryStore):
        capabilities = frozenset[cf.Cap]()

    client = cf.Client(Blind())
    client.register(plain())
    ref = client.enqueue("plain", 1)
    with pytest.raises(cf.Unsupported, match="RUN_QUERY"):
        client.runs()
    with pytest.raises(cf.Unsupported, match="RESULT"):
        client.result(ref)


def test_snooze_heartbeat_and_progress_fail_the_step_without_their_capabilities() -> None:
    wf = cf.Workflow("asks")
    wf.step(lambda c, d: (_ for _ in ()).throw(cf.Snooze(1)), name="snooze")
    wf.step(lambda c, d: c.heartbeat(), name="beat")
    wf.step(lambda c, d: c.progress(1), name="progress")
    client = cf.Client(BareStore(), poll_interval=0.05)
    client.register(wf)
    client.start()
    try:
        info = client.wait(client.enqueue("asks"), timeout=10)
    finally:
        client.stop()
    assert info.status is cf.Status.FAILED
    errors = {n: s.error for n, s in info.steps.items() if s.error is not None}
    assert errors
    for name, error in errors.items():
        assert error.type == "Unsupported", name
