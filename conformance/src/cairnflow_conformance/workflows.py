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
    "BUDGET",
    "FANOUT",
    "HOLD",
    "KEYED",
    "KEYED_LIMIT",
    "KEYED_QUEUE",
    "LIMITED",
    "LIMITED_QUEUE",
    "LOCKER",
    "MEMO",
    "POISON",
    "SAGA",
    "approval",
    "budget",
    "fanout",
    "hold",
    "limited",
    "locker",
    "max_overlap",
    "memo",
    "poison",
    "process_workflows",
    "saga",
]

FANOUT = "kit-fanout"
HOLD = "kit-hold"
POISON = "kit-poison"
APPROVAL = "kit-approval"
LIMITED = "kit-limited"
LIMITED_QUEUE = "kit-q-limited"
MEMO = "kit-memo"
LOCKER = "kit-locker"
BUDGET = "kit-budget"
SAGA = "kit-saga-process"
KEYED = "kit-keyed"
KEYED_QUEUE = "kit-q-keyed"
KEYED_LIMIT = 2
"""At most this many attempts per key of :func:`keyed` run at once."""

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


def _span_step(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
    """The body of :func:`limited` and :func:`keyed`: work, then a ``span`` trace.

    ``payload["work"]`` seconds of work; with ``payload["hold"]`` the first attempt
    traces ``phase="started"`` and waits for the release flag. The span carries the
    payload's ``key`` when it has one (:func:`keyed`).
    """
    traces = Traces.of(ctx.payload)
    start = time.time_ns()
    if ctx.payload.get("hold") and ctx.attempt == 1:
        _executed(ctx, phase="started")
        traces.wait_for_flag(RELEASE, timeout=60)
    time.sleep(float(ctx.payload.get("work", 0.0)))
    end = time.time_ns()
    key = {"key": ctx.payload["key"]} if "key" in ctx.payload else {}
    traces.record(
        "span", run=ctx.run_id, node=ctx.node_id, attempt=ctx.attempt, start=start, end=end, **key
    )
    return {"node": ctx.node_id, "attempt": ctx.attempt}


def limited() -> cf.Workflow:
    """One step on :data:`LIMITED_QUEUE` that records when its body began and ended.

    Each execution leaves a ``span`` trace with ``start`` and ``end`` (Unix
    nanoseconds, read inside the body), so a test computes how many bodies ran at
    once across processes (:func:`max_overlap`) from what the steps recorded.
    ``payload["work"]`` seconds of work; with ``payload["hold"]`` the first
    attempt traces ``phase="started"`` and waits for the release flag (a process
    killed meanwhile leaves no span).
    """

    return cf.Workflow(LIMITED, queue=LIMITED_QUEUE, steps=[cf.Step("work", _span_step)])


def budget() -> cf.Workflow:
    """One step ``flaky`` that always raises, in a run allowed two errors, then discarded.

    ``Cap.RETRY_MAX_ERRORS`` and ``Cap.DISCARD``: a worker that registers it
    declares both (the kit's worker registers only what its store declares).
    """

    def flaky(ctx: cf.StepContext, data: Any) -> None:
        _executed(ctx)
        raise ConnectionError(f"attempt {ctx.attempt} failed")

    policy = cf.RetryPolicy(
        max_attempts=10,
        backoff=cf.Backoff(initial=0.01, factor=1.0, max=0.01),
        on_exhausted="discard",
    )
    return cf.Workflow(BUDGET, max_errors=2, steps=[cf.Step("flaky", flaky, retry=policy)])


def keyed() -> cf.Workflow:
    """:func:`limited`'s step on :data:`KEYED_QUEUE`, under the concurrency key
    ``payload["key"]`` with a limit of :data:`KEYED_LIMIT` (``Cap.CONCURRENCY_KEY``).

    Its ``span`` traces carry the key, so a test computes how many bodies of one
    key ran at once across processes.
    """

    return cf.Workflow(
        KEYED,
        queue=KEYED_QUEUE,
        steps=[cf.Step("work", _span_step)],
        concurrency=cf.Concurrency(key=lambda payload: payload["key"], limit=KEYED_LIMIT),
    )


def max_overlap(spans: list[dict[str, Any]]) -> int:
    """The most ``span`` traces whose ``[start, end)`` intervals hold one instant."""
    events = sorted(
        [(span["start"], 1) for span in spans] + [(span["end"], -1) for span in spans]
    )  # an end sorts before a start at the same instant: touching spans do not overlap
    most = now = 0
    for _, change in events:
        now += change
        most = max(most, now)
    return most


def _charge(traces_dir: str, run_id: str, node: str) -> dict[str, Any]:
    """The memoised call of ``kit-memo``: each call leaves a ``charge`` trace (on disk)."""
    Traces(traces_dir).record("charge", run=run_id, node=node)
    return {"charged_by": node, "pid": os.getpid()}


def memo() -> cf.Workflow:
    """One step that memoises a ``charge`` call, then (first attempt) waits for the release flag.

    It traces ``phase="memoised"`` after ``ctx.memo`` returned, so a test kills
    the process between the memo and the step's end; the next attempt's memo
    must return the recorded result without calling ``_charge`` again.
    """

    def charge(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        traces = Traces.of(ctx.payload)
        charged = ctx.memo("charge", _charge, str(traces.directory), ctx.run_id, ctx.node_id)
        traces.record("exec", run=ctx.run_id, attempt=ctx.attempt, phase="memoised")
        if ctx.attempt == 1:
            traces.wait_for_flag(RELEASE, timeout=60)  # killed here
        return {"memo": charged, "node": ctx.node_id, "attempt": ctx.attempt}

    return cf.Workflow(MEMO, steps=[cf.Step("charge", charge)])


def locker() -> cf.Workflow:
    """One step that takes the named lock ``payload["lock"]`` for ``payload["ttl"]`` seconds.

    It traces ``phase="ready"`` and waits for the ``go`` flag first (so steps on
    several processes take the lock at once), then traces ``lock`` with the
    token it got (None: held by another). With ``payload["hold"]`` a winner
    then waits for the release flag, so a test can kill it holding the lock.
    """

    def take(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        traces = Traces.of(ctx.payload)
        traces.record("exec", run=ctx.run_id, node=ctx.node_id, phase="ready")
        traces.wait_for_flag("go", timeout=60)
        token = ctx.lock(ctx.payload["lock"], float(ctx.payload["ttl"]))
        traces.record("lock", run=ctx.run_id, node=ctx.node_id, token=token)
        if token is not None and ctx.payload.get("hold"):
            traces.wait_for_flag(RELEASE, timeout=60)  # killed here, holding the lock
        return {"token": token, "node": ctx.node_id}

    return cf.Workflow(LOCKER, steps=[cf.Step("take", take)])


TICKER = "kit-ticker"
TICKER_SCHEDULE = "every-second"


def saga() -> cf.Workflow:
    """``charge`` → ``ship`` (fails for good); ``refund`` compensates ``charge``.

    The first attempt of ``refund`` traces ``phase="started"`` and waits for the release flag
    (a killed process stops there); every attempt that returns traces ``phase="returned"``.
    """
    wf = cf.Workflow(SAGA)

    def charge(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _executed(ctx)

    def ship(ctx: cf.StepContext, data: Any) -> None:
        _executed(ctx)
        raise cf.Permanent("no courier")

    def refund(ctx: cf.StepContext, charged: dict[str, Any]) -> dict[str, Any]:
        done = _executed(ctx, phase="started", charged_on=charged["node"])
        if ctx.attempt == 1:
            Traces.of(ctx.payload).wait_for_flag(RELEASE, timeout=60)
        Traces.of(ctx.payload).record(
            "exec", run=ctx.run_id, step=ctx.step, attempt=ctx.attempt, phase="returned"
        )
        return done

    wf.add(cf.Step("charge", charge))
    wf.add(cf.Step("ship", ship, after=["charge"]))
    wf.compensation(for_="charge", name="refund")(refund)
    return wf


def ticker() -> cf.Workflow:
    """A workflow fired every second by its schedule (run by ``--schedules`` workers)."""
    wf = cf.Workflow(TICKER, steps=[cf.Step("tick", lambda ctx, data: ctx.node_id)])
    # A catch-up window of an hour (three minutes of a 20x clock): a worker stalled by a
    # loaded machine fires the ticks it is late for instead of skipping them.
    wf.schedule(TICKER_SCHEDULE, cron="* * * * * *", misfire=cf.Misfire.CATCH_UP(3600))
    return wf


def process_workflows() -> list[cf.Workflow]:
    """Fresh instances of every workflow a kit worker process runs."""
    return [
        fanout(),
        hold(),
        poison(),
        approval(),
        limited(),
        memo(),
        locker(),
        budget(),
        keyed(),
        saga(),
    ]
