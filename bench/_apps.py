"""The workflows the benchmarks run (importable by worker subprocesses too)."""

from __future__ import annotations

import time
from typing import Any

import cairnflow as cf


def _pass(ctx: cf.StepContext, data: Any) -> Any:
    return data


def _noop(ctx: cf.StepContext, data: Any) -> None:
    return None


def _started(ctx: cf.StepContext, data: Any) -> int:
    # W4: the moment the step's code starts, on the wall clock the enqueuer also used.
    return time.time_ns()


def noop() -> cf.Workflow:
    """One no-op step (W2, W5)."""
    return cf.Workflow("noop", steps=[cf.Step("only", _noop)])


def noop_on(queue: str) -> cf.Workflow:
    """One no-op step on ``queue`` (the W2 variants with queues), named ``noop-<queue>``."""
    return cf.Workflow(f"noop-{queue}", queue=queue, steps=[cf.Step("only", _noop)])


def _customer(payload: Any) -> str:
    return f"customer-{payload}"


def keyed() -> cf.Workflow:
    """One no-op step under a concurrency key of limit 1 per payload (the W2 keys variant)."""
    return cf.Workflow(
        "noop-keyed",
        steps=[cf.Step("only", _noop)],
        concurrency=cf.Concurrency(key=_customer, limit=1),
    )


def chain3() -> cf.Workflow:
    """A chain of three steps (``bench/run_peers.py``)."""
    return cf.Workflow(
        "chain3",
        steps=[
            cf.Step("s1", _pass),
            cf.Step("s2", _pass, after=["s1"]),
            cf.Step("s3", _pass, after=["s2"]),
        ],
    )


def chain5() -> cf.Workflow:
    """A chain of five steps (W3)."""
    steps = [cf.Step("s1", _pass)]
    for i in range(2, 6):
        steps.append(cf.Step(f"s{i}", _pass, after=[f"s{i - 1}"]))
    return cf.Workflow("chain5", steps=steps)


def fan() -> cf.Workflow:
    """One step, four in parallel, one joining them (W3)."""
    steps = [cf.Step("head", _pass)]
    steps += [cf.Step(f"branch{i}", _pass, after=["head"]) for i in range(4)]
    steps.append(cf.Step("join", _noop, after=[f"branch{i}" for i in range(4)]))
    return cf.Workflow("fan", steps=steps)


def probe() -> cf.Workflow:
    """Returns when its step started (W4)."""
    return cf.Workflow("probe", steps=[cf.Step("start", _started)])


ALL = {"noop": noop, "chain3": chain3, "chain5": chain5, "fan": fan, "probe": probe}
