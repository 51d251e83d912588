"""Stopping as a fleet needs it: drains, recycles, idle stops, enqueue-only clients.

The kit proves the capabilities on every store (``suite/fleet.py``); these pin
the engine's side on the memory store: attempts claimed ahead that a drain
never starts, the time and memory recycles, the settings' checks, a stop
during a drain, and what an enqueue-only client refuses.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cairnflow as cf
from cairnflow._engine._watch import resident_mib
from cairnflow.store import MemoryStore
from cairnflow.testing import wait_until


def _blocking(began: list[str], release: threading.Event) -> cf.Workflow:
    def step(ctx: cf.StepContext, data: str) -> str:
        began.append(data)
        while not release.wait(0.01) and not ctx.cancelled:
            pass
        return data

    return cf.Workflow("fleet", steps=[cf.Step("a", step)])


def test_a_drain_never_starts_what_it_claimed_ahead_and_hands_it_back_at_once(
    make_client: Any, store: MemoryStore
) -> None:
    began: list[str] = []
    release = threading.Event()
    wf = _blocking(began, release)
    client = make_client(wf, workers=1, prefetch=3, start=False)
    refs = [client.enqueue(wf, f"run-{n}") for n in range(4)]
    state = client._state
    state.attempt_time, state.write_time = 1e-6, 1.0  # steps shorter than writes: claim ahead
    client.start()
    wait_until(lambda: len(state.held_attempts()) == 4, timeout=10, what="the claim ahead")
    wait_until(lambda: began == ["run-0"], timeout=10, what="the first attempt to begin")
    threading.Timer(0.2, release.set).start()
    report = client.drain(timeout=10)
    assert began == ["run-0"], "the drain started an attempt claimed ahead"
    assert {h.run_id for h in report.handed_back} == {ref.id for ref in refs[1:]}
    assert client.info(refs[0]).status is cf.Status.SUCCEEDED
    for ref in refs[1:]:
        step = store.get_run(ref.id).steps[0]  # type: ignore[union-attr]
        assert (step.status, step.attempt, step.failures) == (cf.StepStatus.READY, 1, 0)


def test_a_recycle_after_its_jobs_runs_the_ones_it_claimed_ahead_too(
    make_client: Any, store: MemoryStore
) -> None:
    # Recycle.jobs: the client claims no more than its jobs and lets them all finish. One
    # claimed ahead that no worker began when the recycle drains is one of its jobs: it runs
    # here, never handed back (a drain for any other cause hands it back, as above).
    began: list[str] = []
    release = threading.Event()
    wf = _blocking(began, release)
    client = make_client(wf, workers=1, prefetch=3, recycle=cf.Recycle(jobs=3), start=False)
    refs = [client.enqueue(wf, f"run-{n}") for n in range(5)]
    state = client._state
    state.attempt_time, state.write_time = 1e-6, 1.0  # steps shorter than writes: claim ahead
    client.start()
    wait_until(lambda: state.claims_spent.is_set(), timeout=10, what="the jobs to be claimed")
    assert len(state.held_attempts()) == 3  # one begun, two claimed ahead, none begun
    wait_until(lambda: not client.running or client.draining, timeout=10, what="the recycle")
    release.set()
    report = client.wait_stopped(timeout=10)
    assert report == cf.StopReport(cf.StopCause.RECYCLE_JOBS), report
    assert sorted(began) == ["run-0", "run-1", "run-2"]
    for ref in refs[:3]:
        assert client.info(ref).status is cf.Status.SUCCEEDED
    for ref in refs[3:]:
        step = store.get_run(ref.id).steps[0]  # type: ignore[union-attr]
        assert (step.status, step.attempt) == (cf.StepStatus.READY, 0)


def test_a_stop_during_a_drain_hands_back_at_once(make_client: Any) -> None:
    began: list[str] = []
    release = threading.Event()
    wf = _blocking(began, release)
    client = make_client(wf, workers=1)
    ref = client.enqueue(wf, "x")
    wait_until(lambda: began == ["x"], timeout=10, what="the attempt to begin")
    drained: list[cf.StopReport] = []
    drainer = threading.Thread(target=lambda: drained.append(client.drain(timeout=600)))
    drainer.start()
    wait_until(lambda: client.draining, timeout=10, what="the drain to begin")
    client.stop()  # returns once the drain it cut short has stopped the client
    drainer.join(10)
    assert not client.draining
    assert drained == [client.wait_stopped(0)]
    assert drained[0].handed_back == (cf.HandedBack(ref.id, "a", 1),)
    release.set()


def test_a_client_recycles_after_its_time(make_client: Any) -> None:
    wf = cf.Workflow("fleet", steps=[cf.Step("a", lambda c, d: d)])
    client = make_client(wf, recycle=cf.Recycle(seconds=0.2))
    report = client.wait_stopped(timeout=10)
    assert report == cf.StopReport(cf.StopCause.RECYCLE_TIME)
    assert report.cause.recycle
    assert not client.running


def test_a_client_recycles_at_its_memory(make_client: Any) -> None:
    assert resident_mib() > 1
    wf = cf.Workflow("fleet", steps=[cf.Step("a", lambda c, d: d)])
    client = make_client(wf, recycle=cf.Recycle(memory_mb=1))
    assert client.wait_stopped(timeout=10).cause is cf.StopCause.RECYCLE_MEMORY
    roomy = make_client(wf, recycle=cf.Recycle(memory_mb=resident_mib() * 100, seconds=0.5))
    assert roomy.wait_stopped(timeout=10).cause is cf.StopCause.RECYCLE_TIME


@pytest.mark.parametrize(
    ("recycle", "message"),
    [
        (cf.Recycle(), "at least one limit"),
        (cf.Recycle(jobs=0), "recycle.jobs must be an int >= 1"),
        (cf.Recycle(jobs=True), "recycle.jobs must be an int"),
        (cf.Recycle(seconds=-1), "recycle.seconds must be > 0"),
        (cf.Recycle(memory_mb=float("nan")), "recycle.memory_mb must be a finite number of MiB"),
        (cf.Recycle(jobs=1, drain_timeout=-1), "recycle.drain_timeout must be >= 0"),
    ],
)
def test_a_bad_recycle_is_refused_at_construction(recycle: cf.Recycle, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cf.Client(MemoryStore(), recycle=recycle)


def test_recycle_and_enqueue_only_are_checked(store: MemoryStore) -> None:
    with pytest.raises(TypeError, match=r"cairnflow\.Recycle"):
        cf.Client(store, recycle={"jobs": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="enqueue_only must be True or False"):
        cf.Client(store, enqueue_only="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes no recycle"):
        cf.Client(store, enqueue_only=True, recycle=cf.Recycle(jobs=1))


def test_an_enqueue_only_client_refuses_to_run(store: MemoryStore) -> None:
    client = cf.Client(store, enqueue_only=True)
    for refused in (client.start, client.drain, lambda: client.stop_when_idle(1)):
        with pytest.raises(RuntimeError, match="enqueue_only"):
            refused()
    with pytest.raises(RuntimeError, match="never started"):
        client.wait_stopped(0)
    assert not client.running


def test_a_client_armed_for_idle_before_start_stops_once_idle(make_client: Any) -> None:
    wf = cf.Workflow("fleet", steps=[cf.Step("a", lambda c, d: d)])
    client = make_client(wf, start=False)
    refs = [client.enqueue(wf, n) for n in range(3)]
    client.stop_when_idle(0.1)
    client.start()
    assert client.wait_stopped(timeout=10).cause is cf.StopCause.IDLE
    assert all(client.info(ref).status is cf.Status.SUCCEEDED for ref in refs)
