"""DURABLE: runs, outcomes, keys and schedules outlive the objects and processes that made them."""

from __future__ import annotations

from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, diamond, step_status_is, wait_until

__all__ = ["DurabilityTests"]


class DurabilityTests:
    """``Cap.DURABLE``: what one store object wrote, a brand-new one reads after a restart."""

    @proves(Cap.DURABLE, requires=[Cap.RESULT])
    def test_a_finished_run_is_read_back_by_a_new_store_object(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        first = kit.open_store()
        client = kit.client(diamond(), store=first)
        ref = client.enqueue("kit-diamond", 1, labels={"kept": "yes"})
        before = client.wait(ref, timeout=TIMEOUT)
        assert before.status is cf.Status.SUCCEEDED
        client.stop()
        kit.close_store(first)  # the first store object, and all it held in memory, is gone
        second = kit.open_store()
        second.check_schema()  # no migration needed: the schema is where it was
        after = kit.client(diamond(), start=False, store=second).info(ref)
        assert (after.status, after.result, after.payload) == (
            cf.Status.SUCCEEDED,
            {"sum": 220, "payload": 1},
            1,
        )
        assert dict(after.labels) == {"kept": "yes"}
        assert (after.created_at_ns, after.run_at_ns, after.finished_at_ns) == (
            before.created_at_ns,
            before.run_at_ns,
            before.finished_at_ns,
        )
        for name, step in before.steps.items():
            again = after.steps[name]
            assert (again.status, again.output, again.attempts, again.node) == (
                step.status,
                step.output,
                step.attempts,
                step.node,
            )

    @proves(Cap.DURABLE, requires=[Cap.SLEEP])
    def test_a_sleeping_run_resumes_after_a_restart(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = cf.clock.Fake()
        ran: list[tuple[str, Any]] = []
        wf = cf.Workflow("kit-restart-nap")

        @wf.step
        def before(ctx: cf.StepContext, n: int) -> int:
            ran.append(("before", n))
            return n + 1

        nap = wf.sleep("nap", seconds=3600, after=[before])

        @wf.step(after=[nap])
        def after(ctx: cf.StepContext, n: int) -> None:
            ran.append(("after", n))

        first = kit.open_store()
        client = kit.client(wf, store=first, clock=clock)
        ref = client.enqueue("kit-restart-nap", 1)
        wait_until(
            lambda: step_status_is(client, ref, "nap", cf.StepStatus.SLEEPING),
            timeout=TIMEOUT,
            what="the sleep",
        )
        client.stop()
        kit.close_store(first)
        clock.advance(3600)  # the sleep fell due while nothing ran
        second = kit.open_store()
        info = kit.client(wf, store=second, clock=clock).wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert ran == [("before", 1), ("after", 2)]
        assert info.steps["before"].attempts == 1

    @proves(Cap.DURABLE, requires=[Cap.IDEMPOTENCY])
    def test_an_idempotency_key_is_still_held_after_a_restart(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        wf = cf.Workflow("kit-restart-key", steps=[cf.Step("a", lambda c, d: d)])
        first = kit.open_store()
        ref = kit.client(wf, start=False, store=first).enqueue("kit-restart-key", key="k-1")
        kit.close_store(first)
        second = kit.client(wf, start=False, store=kit.open_store())
        with pytest.raises(cf.DuplicateRun):
            second.enqueue("kit-restart-key", key="k-1")
        assert second.info(ref).status is cf.Status.QUEUED

    @pytest.mark.xdist_group("cairnflow-conformance-processes")
    @proves(Cap.DURABLE, requires=[Cap.MULTI_PROCESS, Cap.SIGNAL])
    def test_a_run_survives_a_killed_process_and_completes_in_a_new_one(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.approval(), start=False)
        payload = {"traces": str(kit.traces.directory)}
        ref = client.enqueue(workflows.APPROVAL, payload)
        first_life = kit.processes.spawn("kit-first-life")
        wait_until(
            lambda: step_status_is(client, ref, "approve", cf.StepStatus.WAITING),
            timeout=TIMEOUT,
            what="the run to wait for its signal",
        )
        first_life.kill()
        # Nothing of the run lives in any process now; a fresh store object signals it.
        sender = kit.client(workflows.approval(), start=False, store=kit.open_store())
        assert sender.signal(ref, "go", {"by": "kit"}) is cf.SignalResult.DELIVERED
        second_life = kit.processes.spawn("kit-second-life")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        assert kit.stored_output(ref, "before")["node"] == "kit-first-life"
        after = kit.stored_output(ref, "after")
        assert (after["node"], after["approval"]) == ("kit-second-life", {"by": "kit"})
        assert kit.traces.count("exec", run=ref.id, step="before") == 1
        assert kit.traces.count("exec", run=ref.id, step="after") == 1
        assert second_life.stop() == 0, second_life.log()
