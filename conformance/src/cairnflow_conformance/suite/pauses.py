"""Pauses: a paused queue (PAUSE_QUEUE) or workflow (PAUSE_WORKFLOW) holds every client.

A pause is set and lifted by a client that is never started, as an operator's
script would. That a paused run waits is read from the store (its step has no
attempt) once the runs that must not wait, enqueued after it and claimed by the
same clients, have all finished: no assertion is on time.
"""

from __future__ import annotations

import threading
from typing import Any

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import PauseKind, QueueControl, StoreFacets

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["PauseTests"]


def _workflow(name: str, queue: str, step: Any = None) -> cf.Workflow:
    return cf.Workflow(name, queue=queue, steps=[cf.Step("a", step or (lambda c, d: d))])


def _attempts(kit: Kit, run: cf.RunRef) -> int:
    return kit.stored_step(run, "a").attempt


def _all_succeed(client: cf.Client, refs: list[cf.RunRef]) -> None:
    for ref in refs:
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error


def _none_started(kit: Kit, refs: list[cf.RunRef]) -> None:
    started = [ref.id for ref in refs if _attempts(kit, ref)]
    assert not started, f"runs of a paused queue or workflow were started: {started}"


class PauseTests:
    """``Cap.PAUSE_QUEUE`` and ``Cap.PAUSE_WORKFLOW``: the ``QueueControl`` facet."""

    @proves(Cap.PAUSE_QUEUE)
    def test_a_paused_queue_holds_every_client_until_it_is_resumed(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        flows = [_workflow("kit-held", "kit-q-held"), _workflow("kit-free", "kit-q-free")]
        operator = kit.client(*flows, start=False)  # never started
        assert operator.pause_queue("kit-q-held") is True
        assert operator.pause_queue("kit-q-held") is False  # paused already
        clients = [
            kit.client(*flows, store=s, node_id=f"kit-w{n}")
            for n, s in enumerate(kit.peer_stores(2))
        ]
        held = [operator.enqueue("kit-held", n) for n in range(6)]  # enqueueing goes on
        free = [operator.enqueue("kit-free", n) for n in range(6)]
        _all_succeed(clients[0], free)
        _none_started(kit, held)
        assert [(p.kind, p.name) for p in operator.pauses()] == [(PauseKind.QUEUE, "kit-q-held")]
        assert operator.resume_queue("kit-q-held") is True
        assert operator.resume_queue("kit-q-held") is False  # not paused any more
        _all_succeed(clients[1], held)
        assert operator.pauses() == []

    @proves(Cap.PAUSE_QUEUE)
    def test_running_attempts_finish_while_a_pause_holds_new_ones(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        release = threading.Event()
        entered = threading.Event()

        def blocks(ctx: cf.StepContext, data: Any) -> Any:
            if data == "first":
                entered.set()
                assert release.wait(TIMEOUT), "the test never released the step"
            return data

        flows = [_workflow("kit-long", "kit-q-long", blocks), _workflow("kit-free", "kit-q-free")]
        client = kit.client(*flows, workers=2)
        first = client.enqueue("kit-long", "first")
        assert entered.wait(TIMEOUT), "the first attempt never started"
        operator = kit.client(*flows, start=False)
        operator.pause_queue("kit-q-long")
        later = [operator.enqueue("kit-long", n) for n in range(3)]
        release.set()
        assert client.wait(first, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        # Work the client claims after the pause: once it is done, the paused runs had
        # every chance to be claimed too.
        _all_succeed(client, [operator.enqueue("kit-free", n) for n in range(3)])
        _none_started(kit, later)
        operator.resume_queue("kit-q-long")
        _all_succeed(client, later)

    @proves(Cap.PAUSE_QUEUE, requires=[Cap.BATCH_ENQUEUE])
    def test_a_paused_queue_full_of_ready_runs_does_not_hold_back_the_others(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        flows = [_workflow("kit-backlog", "kit-q-backlog"), _workflow("kit-free", "kit-q-free")]
        operator = kit.client(*flows, start=False)
        operator.pause_queue("kit-q-backlog")
        backlog = operator.enqueue_many([cf.Job("kit-backlog", n) for n in range(500)])
        # One pool for both queues (no queues=): the paused queue is asked first half the
        # time, and must neither take a slot nor stop the claim of the other.
        client = kit.client(*flows, workers=2)
        _all_succeed(client, [operator.enqueue("kit-free", n) for n in range(20)])
        assert [_attempts(kit, ref) for ref in backlog[:10] + backlog[-10:]] == [0] * 20
        counts = client.runs(workflow="kit-backlog", status=cf.Status.QUEUED, limit=1).runs
        assert counts, "the paused queue's runs are gone"

    @proves(Cap.PAUSE_WORKFLOW)
    def test_a_paused_workflow_holds_its_runs_beside_the_others_of_its_queue(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        flows = [_workflow("kit-paused", "kit-q-shared"), _workflow("kit-going", "kit-q-shared")]
        operator = kit.client(*flows, start=False)
        assert operator.pause_workflow("kit-paused") is True
        assert operator.pause_workflow("kit-paused") is False
        clients = [
            kit.client(*flows, store=s, node_id=f"kit-w{n}")
            for n, s in enumerate(kit.peer_stores(2))
        ]
        # The paused workflow's runs are older and would be claimed first.
        paused = [operator.enqueue("kit-paused", n) for n in range(4)]
        going = [operator.enqueue("kit-going", n) for n in range(4)]
        _all_succeed(clients[0], going)
        _none_started(kit, paused)
        assert [(p.kind, p.name) for p in operator.pauses()] == [(PauseKind.WORKFLOW, "kit-paused")]
        assert operator.resume_workflow("kit-paused") is True
        _all_succeed(clients[1], paused)

    @proves(Cap.PAUSE_QUEUE, Cap.PAUSE_WORKFLOW, requires=[Cap.DURABLE])
    def test_pauses_survive_reopening_the_store(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        first = kit.open_store()
        operator = kit.client(_workflow("kit-wf", "kit-q-wf"), store=first, start=False)
        operator.pause_queue("kit-q-wf")
        operator.pause_workflow("kit-wf")
        listed = operator.pauses()
        kit.close_store(first)
        again = kit.client(_workflow("kit-wf", "kit-q-wf"), store=kit.open_store(), start=False)
        assert again.pauses() == listed
        assert [(p.kind, p.name) for p in listed] == [
            (PauseKind.QUEUE, "kit-q-wf"),
            (PauseKind.WORKFLOW, "kit-wf"),
        ]
        assert all(p.paused_at > 0 for p in listed)

    @proves(Cap.PAUSE_QUEUE, Cap.PAUSE_WORKFLOW)
    def test_a_pause_is_set_once_and_lifted_once_at_the_spi(self, cairnflow_kit: Kit) -> None:
        control: QueueControl | None = StoreFacets.of(cairnflow_kit.store).queue_control
        assert control is not None
        for kind in (PauseKind.QUEUE, PauseKind.WORKFLOW):
            assert control.pause(kind, "kit-x", 5) is True
            assert control.pause(kind, "kit-x", 9) is False  # the first pause's time is kept
        assert [(p.kind, p.name, p.paused_at) for p in control.pauses()] == [
            (PauseKind.QUEUE, "kit-x", 5),
            (PauseKind.WORKFLOW, "kit-x", 5),
        ]
        assert control.resume(PauseKind.QUEUE, "kit-x") is True
        assert control.resume(PauseKind.QUEUE, "kit-x") is False
        assert [p.kind for p in control.pauses()] == [PauseKind.WORKFLOW]
