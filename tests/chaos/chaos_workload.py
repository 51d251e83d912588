"""The chaos workload: its workflows, the history they log, and how runs are enqueued.

Every step body logs its start and, when it returns, its completion with a
fresh nonce that it also returns, so the output the store keeps names the
body that produced it (see :mod:`chaos_history`). The log is append-only
JSONL, one file per process, each event one ``os.write`` on an ``O_APPEND``
descriptor: once the call returns the line survives a SIGKILL of the process
(it is in the kernel's page cache), and lines of several threads never mix.

The workflows are imported by the worker processes (``chaos_worker``) and by
the test process alike:

* ``chaos-diamond``: ``a`` → (``b``, ``c``) → ``d``, a fan-in at ``d``;
* ``chaos-chain``: ``first`` → ``flaky`` (fails its first attempt, then retries)
  → ``nap`` (a durable sleep) → ``last``;
* ``chaos-poison``: one step that SIGKILLs whichever process runs it;
* ``chaos-stamp``: one step (the listener test times its starts).

Task steps retry (quickly) on failure: an outcome the committer could not write
through an outage becomes the attempt's failure (``OutcomeRefused``), which
the step's policy retries, as an application's would.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cairnflow as cf
from cairnflow.testing import Fault

__all__ = [
    "CHAIN",
    "DIAMOND",
    "POISON",
    "STAMP",
    "Enqueuer",
    "Recorder",
    "nonce_of",
    "set_recorder",
    "workflows",
]

DIAMOND = "chaos-diamond"
CHAIN = "chaos-chain"
POISON = "chaos-poison"
STAMP = "chaos-stamp"
KEY_LABEL = "chaos"
"""The label holding a run's enqueue key (what ties a stored run to its enqueue)."""

RETRY = cf.RetryPolicy(
    max_attempts=8, backoff=cf.Backoff(initial=0.05, factor=2.0, max=0.5, jitter=0.2)
)


class Recorder:
    """Appends this process's events to ``<directory>/<name>-<pid>.jsonl``."""

    def __init__(self, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.pid = os.getpid()
        self.path = directory / f"{name}-{self.pid}.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def record(self, ev: str, **fields: Any) -> None:
        """Log one event, stamped with the wall clock in Unix nanoseconds."""
        line = json.dumps({"ev": ev, **fields, "pid": self.pid, "at": time.time_ns()})
        os.write(self._fd, (line + "\n").encode())

    def fault(self, fault: Fault) -> None:
        """Log a fault that fires (an observer of ``cairnflow.testing.faults``)."""
        self.record("fault", point=fault.point, action=fault.action.value, node=self.name)

    def close(self) -> None:
        """Close the log."""
        os.close(self._fd)


_recorder: Recorder | None = None


def set_recorder(recorder: Recorder | None) -> None:
    """Make the step bodies of this process log to ``recorder``."""
    global _recorder
    _recorder = recorder


def _log(ev: str, ctx: cf.StepContext, **fields: Any) -> None:
    recorder = _recorder
    if recorder is None:
        raise RuntimeError("chaos steps run only where a recorder is set (set_recorder)")
    recorder.record(
        ev, run=ctx.run_id, step=ctx.step, attempt=ctx.attempt, node=ctx.node_id, **fields
    )


def _body(ctx: cf.StepContext, work: float) -> dict[str, Any]:
    """Log the start, work, log the completion; return what names this body."""
    _log("start", ctx)
    if work > 0:
        time.sleep(work)
    nonce = secrets.token_hex(8)
    _log("done", ctx, nonce=nonce)
    return {"nonce": nonce, "node": ctx.node_id, "attempt": ctx.attempt}


def nonce_of(output: bytes | None) -> str | None:
    """The nonce in a stored task output (None for an output without one)."""
    if not output:
        return None
    value = json.loads(output)
    return value.get("nonce") if isinstance(value, dict) else None


def _work(ctx: cf.StepContext) -> float:
    return float(ctx.payload.get("work", 0.01)) * random.uniform(0.5, 1.5)


def diamond() -> cf.Workflow:
    """``a`` → (``b``, ``c``) → ``d``: two parents finishing apart or at once release ``d``."""
    wf = cf.Workflow(DIAMOND)

    def step(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _body(ctx, _work(ctx))

    wf.add(cf.Step("a", step, retry=RETRY))
    wf.add(cf.Step("b", step, after=["a"], retry=RETRY))
    wf.add(cf.Step("c", step, after=["a"], retry=RETRY))
    wf.add(cf.Step("d", step, after=["b", "c"], retry=RETRY))
    return wf


def chain() -> cf.Workflow:
    """``first`` → ``flaky`` → ``nap`` (a durable sleep) → ``last``."""
    wf = cf.Workflow(CHAIN)

    def step(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _body(ctx, _work(ctx))

    def flaky(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        if ctx.attempt == 1:
            _log("start", ctx)
            _log("fail", ctx)
            raise RuntimeError("the first attempt of flaky fails, on purpose")
        return _body(ctx, _work(ctx))

    wf.add(cf.Step("first", step, retry=RETRY))
    wf.add(cf.Step("flaky", flaky, after=["first"], retry=RETRY))
    wf.add(cf.Sleep("nap", seconds=0.1, after=["flaky"]))
    wf.add(cf.Step("last", step, after=["nap"], retry=RETRY))
    return wf


def poison() -> cf.Workflow:
    """One step that kills, with SIGKILL, every worker process it lands on."""
    wf = cf.Workflow(POISON)

    def kill(ctx: cf.StepContext, data: Any) -> None:
        _log("start", ctx)
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # the signal is asynchronous on some kernels: never return from here

    wf.add(cf.Step("poison", kill))
    return wf


def stamp() -> cf.Workflow:
    """One step; its logged start, against its logged enqueue, is a wake-up's latency."""
    wf = cf.Workflow(STAMP)

    def now(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
        return _body(ctx, 0.0)

    wf.add(cf.Step("now", now, retry=RETRY))
    return wf


def workflows() -> list[cf.Workflow]:
    """Fresh instances of every chaos workflow."""
    return [diamond(), chain(), poison(), stamp()]


class Enqueuer:
    """Enqueues runs through ``client`` and logs each enqueue to ``recorder``.

    An enqueue that raises :class:`cairnflow.Unavailable` (the store went away,
    or the reply of its COMMIT was lost) is logged with no run id: its outcome
    is unknown, and it is not retried (a retry could make the run twice).
    """

    def __init__(self, client: cf.Client, recorder: Recorder) -> None:
        self.client = client
        self.recorder = recorder
        self._lock = threading.Lock()
        self._count = 0
        self.unknown = 0

    def enqueue(self, workflow: str, work: float = 0.01) -> str | None:
        """Enqueue one run; its id, or None when the outcome is unknown."""
        with self._lock:
            self._count += 1
            key = f"{self.recorder.name}-{self._count}"
        labels = {KEY_LABEL: key}
        try:
            ref = self.client.enqueue(workflow, {"work": work}, labels=labels)
        except cf.Unavailable:
            self.unknown += 1
            self.recorder.record("enqueue", key=key, workflow=workflow, run=None)
            return None
        self.recorder.record("enqueue", key=key, workflow=workflow, run=ref.id)
        return ref.id

    def mixed(self, count: int, workflows: Sequence[str] = (DIAMOND, DIAMOND, CHAIN)) -> None:
        """Enqueue ``count`` runs, cycling through ``workflows``."""
        for n in range(count):
            self.enqueue(workflows[n % len(workflows)])


def workload_points() -> tuple[str, ...]:
    """The fault points this workload passes: every one but the lifecycle dispatcher's (it has
    no subscriber nor on_failure handler; the kit's lifecycle tests arm those, on every engine)."""
    from cairnflow.testing import FAULT_POINTS

    return tuple(point for point in FAULT_POINTS if not point.startswith("lifecycle."))
