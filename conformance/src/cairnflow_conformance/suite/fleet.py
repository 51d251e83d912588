"""A fleet that deploys cleanly: drains (DRAIN), stop reports (SHUTDOWN_REQUEUE),
idle stops and recycles (DRAIN), and clients that only enqueue (ENQUEUE_ONLY).

The engine enforces these over the kernel (``hand_back``, ``list_runs``, the
claim), so the kit checks them on every store that declares them, against what
the store recorded: which attempt ran where (a step returns its node id), each
step's attempt and failure counts, which runs are still waiting. What a step
must do during a drain is driven by events the test sets, never by sleeps; the
only timed thing is the drain's own deadline, which a step that waits for its
cancellation runs into by construction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.testing import faults

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

__all__ = ["FleetTests"]

_DRAINER = "kit-drainer"
_FINISHER = "kit-finisher"
_LONG_POLL = 120.0
"""Longer than any of these tests may take: a poll cannot be what admits the work."""


class _Steps:
    """A step body the test steers: ``gate`` runs wait for :attr:`gate`, ``hold`` runs on the
    draining node wait for their cancellation; each records that it began."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self._lock = threading.Lock()
        self.began: list[tuple[str, str]] = []
        """(payload, node) of each attempt that began, in order."""

    def count(self, payload: str, node: str | None = None) -> int:
        with self._lock:
            return sum(1 for p, n in self.began if p == payload and node in (None, n))

    def step(self, ctx: cf.StepContext, data: str) -> str:
        with self._lock:
            self.began.append((data, ctx.node_id))
        if data.startswith("gate"):
            self.gate.wait(TIMEOUT)
        elif data.startswith("hold") and ctx.node_id == _DRAINER:
            ctx.cancel_event.wait(TIMEOUT * 3)  # until the drain's deadline hands it back
        return ctx.node_id


def _workflow(name: str, steps: _Steps) -> cf.Workflow:
    return cf.Workflow(name, steps=[cf.Step("a", steps.step)])


def _began(steps: _Steps, payload: str, n: int = 1) -> Callable[[], bool]:
    return lambda: steps.count(payload) >= n


class FleetTests:
    """``Cap.DRAIN``, ``Cap.SHUTDOWN_REQUEUE`` and ``Cap.ENQUEUE_ONLY``."""

    @proves(Cap.DRAIN, Cap.SHUTDOWN_REQUEUE)
    def test_a_drain_lets_running_attempts_finish_and_hands_back_the_rest(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-drain", steps)
        drainer = kit.client(wf, workers=3, prefetch=0, node_id=_DRAINER)
        finishing = [drainer.enqueue(wf, f"gate-{n}") for n in range(2)]
        held = drainer.enqueue(wf, "hold")
        wait_until(lambda: len(steps.began) == 3, timeout=TIMEOUT, what="three attempts to run")
        late: list[cf.RunRef] = []

        def meanwhile() -> None:
            # Once the drain began: a new run (the drainer must not take it, though
            # its finishing attempts free workers), then the gated attempts finish.
            wait_until(lambda: drainer.draining, timeout=TIMEOUT, what="the drain to begin")
            late.append(drainer.enqueue(wf, "late"))
            steps.gate.set()

        helper = threading.Thread(target=meanwhile, name="kit-drain-helper", daemon=True)
        helper.start()
        # The deadline is what hands "hold" back: it waits for its cancellation. The
        # gated attempts are released at the drain's start, far inside it.
        report = drainer.drain(timeout=5.0)
        helper.join(TIMEOUT)
        assert report.cause is cf.StopCause.DRAINED
        assert report.handed_back == (cf.HandedBack(held.id, "a", 1),), report
        assert drainer.wait_stopped(timeout=TIMEOUT) == report
        assert not drainer.running
        for ref in finishing:  # finished and written by the draining client
            step = kit.stored_step(ref, "a")
            assert (step.status, step.attempt, step.node) == (
                cf.StepStatus.SUCCEEDED,
                1,
                _DRAINER,
            ), step
        back = kit.stored_step(held, "a")
        assert back.status is cf.StepStatus.READY, back
        assert (back.attempt, back.failures) == (1, 0), back
        (late_ref,) = late
        waiting = kit.stored_step(late_ref, "a")
        assert (waiting.status, waiting.attempt) == (cf.StepStatus.READY, 0), waiting
        assert steps.count("late") == 0, "the draining client started a new attempt"
        # Another client takes what was handed back, and the new run, at once.
        finisher = kit.client(wf, node_id=_FINISHER)
        for ref in (held, late_ref):
            info = finisher.wait(ref, timeout=TIMEOUT)
            assert (info.status, info.result) == (cf.Status.SUCCEEDED, _FINISHER), info
        step = kit.stored_step(held, "a")
        assert (step.attempt, step.failures, step.node) == (2, 0, _FINISHER), step
        assert steps.count("hold", _DRAINER) == 1
        assert steps.count("hold", _FINISHER) == 1

    @proves(Cap.DRAIN, Cap.SHUTDOWN_REQUEUE)
    def test_a_drain_hands_back_at_once_what_no_worker_began(self, cairnflow_kit: Kit) -> None:
        # Attempts a client claimed ahead of a free worker are not started by a drain:
        # they go back at its start, and the report names them with the ones cut off.
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-drain-ahead", steps)
        drainer = kit.client(wf, workers=1, node_id=_DRAINER, start=False)
        refs = [drainer.enqueue(wf, f"hold-{n}") for n in range(3)]
        drainer.start()
        wait_until(_began(steps, "hold-0"), timeout=TIMEOUT, what="the first attempt to run")
        # Whatever else it holds (claimed ahead or not), none of it may begin.
        report = drainer.drain(timeout=0.5)
        assert len(steps.began) == 1, steps.began
        running = next(ref for ref in refs if kit.stored_step(ref, "a").attempt == 1)
        named = {(h.run_id, h.step) for h in report.handed_back}
        assert (running.id, "a") in named, report
        for ref in refs:
            step = kit.stored_step(ref, "a")
            assert step.status is cf.StepStatus.READY, (ref.id, step)
            assert step.failures == 0, step
            assert ((ref.id, "a") in named) == (step.attempt == 1), (report, ref.id, step)

    @proves(Cap.SHUTDOWN_REQUEUE)
    def test_stop_reports_each_attempt_it_handed_back(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-stop-report", steps)
        drainer = kit.client(wf, workers=2, prefetch=0, node_id=_DRAINER)
        refs = [drainer.enqueue(wf, f"hold-{n}") for n in range(2)]
        wait_until(lambda: len(steps.began) == 2, timeout=TIMEOUT, what="both attempts to run")
        drainer.stop()
        report = drainer.wait_stopped(timeout=TIMEOUT)
        assert report.cause is cf.StopCause.REQUESTED
        assert sorted(report.handed_back, key=lambda h: h.run_id) == sorted(
            (cf.HandedBack(ref.id, "a", 1) for ref in refs), key=lambda h: h.run_id
        )
        for ref in refs:
            step = kit.stored_step(ref, "a")
            assert (step.status, step.attempt, step.failures) == (cf.StepStatus.READY, 1, 0)
        # A stop with nothing running hands nothing back.
        quiet = kit.client(wf, node_id="kit-quiet")
        for ref in refs:
            assert quiet.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        quiet.stop(grace=TIMEOUT)
        assert quiet.wait_stopped(timeout=TIMEOUT).handed_back == ()

    @pytest.mark.parametrize("fault", ["stall:1.5#1", "raise#1"])
    @proves(Cap.DRAIN)
    def test_a_drain_while_an_outcome_is_written_writes_it_once(
        self, cairnflow_kit: Kit, fault: str
    ) -> None:
        # The drain's deadline passes while the committer writes (stalled, or failing
        # once as if the connection dropped): the outcome is decided, so it is written,
        # once, and nothing is handed back; no other client runs the step again.
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-drain-commit", steps)
        drainer = kit.client(wf, workers=2, prefetch=0, node_id=_DRAINER)
        ref = drainer.enqueue(wf, "gate")
        wait_until(_began(steps, "gate"), timeout=TIMEOUT, what="the attempt to run")
        writing = threading.Event()
        with faults(f"outcome.before_commit={fault}", observe=lambda _: writing.set()):
            steps.gate.set()
            wait_until(writing.is_set, timeout=TIMEOUT, what="the outcome's write to begin")
            report = drainer.drain(timeout=0.05)
        assert report.handed_back == (), report
        step = kit.stored_step(ref, "a")
        assert (step.status, step.attempt, step.node) == (cf.StepStatus.SUCCEEDED, 1, _DRAINER)
        other = kit.client(wf, node_id=_FINISHER)
        info = other.wait(ref, timeout=TIMEOUT)
        assert (info.status, info.result) == (cf.Status.SUCCEEDED, _DRAINER)
        other.stop(grace=TIMEOUT)
        assert steps.count("gate") == 1, steps.began
        assert kit.stored_step(ref, "a").attempt == 1

    @proves(Cap.DRAIN)
    def test_a_client_stops_when_idle_only_once_no_run_of_its_is_unfinished(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-idle", steps)
        client = kit.client(wf, node_id=_DRAINER)
        first = client.enqueue(wf, "gate")
        wait_until(_began(steps, "gate"), timeout=TIMEOUT, what="the first attempt to run")
        client.stop_when_idle(0.3)
        # A delayed run is unfinished though nothing runs: the client must wait for it.
        delayed = client.enqueue(wf, "later", delay=1.5)
        elsewhere = None
        if kit.declares(Cap.QUEUE_OVERRIDE):
            # A run on a queue the client does not serve does not keep it up.
            elsewhere = client.enqueue(wf, "elsewhere", queue="kit-not-served")
        steps.gate.set()
        report = client.wait_stopped(timeout=TIMEOUT)
        assert report == cf.StopReport(cf.StopCause.IDLE), report
        for ref in (first, delayed):
            assert kit.stored(ref).state == cf.Status.SUCCEEDED.value, ref
        if elsewhere is not None:
            assert kit.stored_step(elsewhere, "a").attempt == 0

    @proves(Cap.DRAIN)
    def test_a_recycling_client_takes_its_jobs_then_drains_and_stops(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-recycle", steps)
        client = kit.client(
            wf, workers=2, node_id=_DRAINER, recycle=cf.Recycle(jobs=3), start=False
        )
        refs = [client.enqueue(wf, f"run-{n}") for n in range(6)]
        client.start()
        report = client.wait_stopped(timeout=TIMEOUT)
        assert report == cf.StopReport(cf.StopCause.RECYCLE_JOBS), report
        assert report.cause.recycle
        stored = [kit.stored_step(ref, "a") for ref in refs]
        done = [s for s in stored if s.status is cf.StepStatus.SUCCEEDED]
        assert len(done) == 3, stored
        assert all(s.node == _DRAINER for s in done), stored
        assert all(s.attempt == 0 for s in stored if s not in done), stored
        successor = kit.client(wf, node_id=_FINISHER)
        for ref in refs:
            assert successor.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert len(steps.began) == 6, steps.began

    @proves(Cap.ENQUEUE_ONLY)
    def test_an_enqueue_only_client_enqueues_and_reads_and_never_runs_steps(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        steps = _Steps()
        wf = _workflow("kit-enqueue-only", steps)
        front = kit.client(wf, start=False, enqueue_only=True, node_id="kit-front")
        assert front.enqueue_only
        refs = [front.enqueue(wf, f"run-{n}") for n in range(3)]
        with pytest.raises(RuntimeError, match="enqueue_only"):
            front.start()
        assert not front.running
        if kit.declares(Cap.DRAIN):
            with pytest.raises(RuntimeError, match="enqueue_only"):
                front.drain()
        for ref in refs:  # written, ready, leased by nobody
            step = kit.stored_step(ref, "a")
            assert (step.status, step.attempt, step.node) == (cf.StepStatus.READY, 0, None)
            assert front.info(ref).status is cf.Status.QUEUED
        kit.client(wf, node_id=_FINISHER)
        for ref in refs:
            info = front.wait(ref, timeout=TIMEOUT)
            assert (info.status, info.result) == (cf.Status.SUCCEEDED, _FINISHER)
        assert {node for _, node in steps.began} == {_FINISHER}

    @proves(Cap.ENQUEUE_ONLY, requires=(Cap.NOTIFY, Cap.MULTI_PROCESS))
    def test_an_enqueue_only_client_wakes_an_idle_worker_process(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        # The worker polls once at its start, then only a notification admits work.
        worker = kit.processes.spawn("kit-sleeper", poll=_LONG_POLL)
        front = kit.client(
            workflows.fanout(), start=False, enqueue_only=True, store=kit.open_store()
        )
        time.sleep(1.0)  # its first poll (at start) is behind it
        ref = front.enqueue(workflows.FANOUT, {"traces": str(kit.traces.directory)})
        info = front.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, (info.error, worker.log())
        assert {s.node for s in kit.stored(ref).steps} == {"kit-sleeper"}
        assert worker.stop() == 0, worker.log()
