"""The workflows that the kit's worker processes run.

In-process kit tests define their workflows inline; a worker process can only
run workflows it can import, so the multi-process and durability tests use
these. Every payload carries ``"traces"``, the directory where steps leave
their :class:`~cairnflow_conformance.traces.Traces`.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import cairnflow as cf

from .traces import Traces

__all__ = [
    "APPROVAL",
    "FANOUT",
    "HOLD",
    "POISON",
    "approval",
    "fanout",
    "hold",
    "poison",
    "process_workflows",
]

FANOUT = "kit-fanout"
HOLD = "kit-hold"
POISON = "kit-poison"
APPROVAL = "kit-approval"

RELEASE = "release"
"""The flag that lets the first attempt of ``kit-hold``'s ``hold`` step return."""


def _executed(ctx: cf.StepContext, **extra: Any) -> dict[str, Any]:
    """Trace one execution of this step and return what identifies it."""
    traces = Traces.of(ctx.payload)
    traces.record(
        "exec",
        run=ctx.run_id,
        step=ctx.step,
        attempt=ctx.attempt,
        node=ctx.node_id,
        **extra,
    )
    return {"step": ctx.step, "node": ctx.node_id, "pid": os.getpid(), "attempt": ctx.attempt}


def fanout() -> cf.Workflow:
    """``a`` → (``b``, ``c``) → ``d``; each step traces itself and works ``payload["work"]`` s."""
    wf = cf.Workflow(FANOUT)

    def work(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        done = _executed(ctx)
        time.sleep(float(ctx.payload.get("work", 0.0)))
        return done

    wf.add(cf.Step("a", work))
    wf.add(cf.Step("b", work, after=["a"]))
    wf.add(cf.Step("c", work, after=["a"]))
    wf.add(cf.Step("d", work, after=["b", "c"]))
    return wf


def hold() -> cf.Workflow:
    """``first`` → ``hold`` → ``last``; the first attempt of ``hold`` waits for the release flag.

    ``hold`` traces ``phase="started"`` when it begins and ``phase="returned"``
    when it returns, so a test knows when a stalled attempt came back.
    """
    wf = cf.Workflow(HOLD)

    def first(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _executed(ctx)

    def holding(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        done = _executed(ctx, phase="started")
        if ctx.attempt == 1:
            # Plain polling, no engine call: a paused or killed process stops right here.
            Traces.of(ctx.payload).wait_for_flag(RELEASE, timeout=60)
        Traces.of(ctx.payload).record(
            "exec", run=ctx.run_id, step=ctx.step, attempt=ctx.attempt, phase="returned"
        )
        return done

    def last(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _executed(ctx)

    wf.add(cf.Step("first", first))
    wf.add(cf.Step("hold", holding, after=["first"]))
    wf.add(cf.Step("last", last, after=["hold"]))
    return wf


def poison() -> cf.Workflow:
    """One step that kills the process running it with SIGKILL, every time."""
    wf = cf.Workflow(POISON)

    def kill(ctx: cf.StepContext, data: Any) -> None:
        _executed(ctx)
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(30)  # SIGKILL is asynchronous on some kernels: never return from here

    wf.add(cf.Step("poison", kill))
    return wf


def approval() -> cf.Workflow:
    """``before`` → wait ``approve`` (signal ``go``) → ``after``."""
    wf = cf.Workflow(APPROVAL)

    def before(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _executed(ctx)

    def after(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return {**_executed(ctx), "approval": ctx.parents["approve"]}

    wf.add(cf.Step("before", before))
    wf.add(cf.Wait("approve", signal="go", after=["before"]))
    wf.add(cf.Step("after", after, after=["approve"]))
    return wf


TICKER = "kit-ticker"
TICKER_SCHEDULE = "every-second"


def ticker() -> cf.Workflow:
    """A workflow fired every second by its schedule (run by ``--schedules`` workers)."""
    wf = cf.Workflow(TICKER, steps=[cf.Step("tick", lambda ctx, data: ctx.node_id)])
    # A catch-up window of an hour (three minutes of a 20x clock): a worker stalled by a
    # loaded machine fires the ticks it is late for instead of skipping them.
    wf.schedule(TICKER_SCHEDULE, cron="* * * * * *", misfire=cf.Misfire.CATCH_UP(3600))
    return wf


def process_workflows() -> list[cf.Workflow]:
    """Fresh instances of every workflow a kit worker process runs."""
    return [fanout(), hold(), poison(), approval()]
