"""Step middleware, engine observers and enqueue hooks (#17, #19), on memory and SQLite.

What a middleware sees is asserted from what it recorded and what the engine stored,
never from timings.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.middleware import EngineObserver
from cairnflow.store import ClaimedAttempt, Failed, MemoryStore, Outcome, Succeeded
from cairnflow_sqlite import SQLiteStore

TIMEOUT = 30.0
_QUICK = cf.RetryPolicy(max_attempts=3, backoff=cf.Backoff(initial=0.01, factor=1.0, max=0.01))


@pytest.fixture(params=["memory", "sqlite"])
def on(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[cf.Store]:
    """A memory store, or a migrated SQLite file."""
    if request.param == "memory":
        yield MemoryStore()
        return
    store = SQLiteStore(tmp_path / "middleware.db")
    store.migrate()
    yield store
    store.close()


Factory = Callable[..., cf.Client]


def _recorder(name: str, log: list[str]) -> cf.middleware.StepMiddleware:
    def mw(ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        log.append(f"{name}>{ctx.step}#{ctx.attempt}")
        try:
            result = call_next()
        except Exception as error:
            log.append(f"{name}!{type(error).__name__}")
            raise
        log.append(f"{name}<{result!r}")
        return result

    return mw


def test_middleware_run_first_outermost_around_every_attempt(
    make_client: Factory, on: cf.Store
) -> None:
    log: list[str] = []
    wf = cf.Workflow("mw-order")

    @wf.step()
    def a(ctx: cf.StepContext, data: int) -> int:
        log.append("a")
        return data + 1

    @wf.step(after=[a])
    def b(ctx: cf.StepContext, data: int) -> int:
        log.append("b")
        return data * 10

    client = make_client(wf, on=on, workers=1, middleware=[_recorder("outer", log)], start=False)
    client.use(_recorder("inner", log))
    client.start()
    info = client.wait(client.enqueue("mw-order", 1), timeout=TIMEOUT)
    assert info.result == 20
    assert log == [
        "outer>a#1", "inner>a#1", "a", "inner<2", "outer<2",
        "outer>b#1", "inner>b#1", "b", "inner<20", "outer<20",
    ]  # fmt: skip


def test_an_exception_propagates_through_middleware_and_retries_are_seen(
    make_client: Factory, on: cf.Store
) -> None:
    log: list[str] = []
    wf = cf.Workflow("mw-retry")

    @wf.step(retry=_QUICK)
    def flaky(ctx: cf.StepContext, data: int) -> str:
        if ctx.attempt < 3:
            raise ValueError(f"attempt {ctx.attempt}")
        return "third time"

    client = make_client(wf, on=on, middleware=[_recorder("m", log)])
    info = client.wait(client.enqueue("mw-retry", 0), timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == "third time"
    assert info.steps["flaky"].failures == 2
    assert log == [
        "m>flaky#1", "m!ValueError", "m>flaky#2", "m!ValueError", "m>flaky#3",
        "m<'third time'",
    ]  # fmt: skip


def test_a_middleware_replaces_the_result(make_client: Factory, on: cf.Store) -> None:
    def wrap(ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        return {"wrapped": call_next(), "step": ctx.step}

    wf = cf.Workflow("mw-replace", steps=[cf.Step("a", lambda c, d: d * 2)])
    client = make_client(wf, on=on, middleware=[wrap])
    info = client.wait(client.enqueue("mw-replace", 21), timeout=TIMEOUT)
    assert info.result == {"wrapped": 42, "step": "a"}


def test_a_middleware_raising_before_call_next_fails_the_attempt_and_the_step_never_runs(
    make_client: Factory, on: cf.Store
) -> None:
    ran: list[int] = []
    seen: list[str] = []

    def gate(ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        if ctx.attempt == 1:
            raise PermissionError("not on the first attempt")
        return call_next()

    wf = cf.Workflow("mw-gate", steps=[cf.Step("a", lambda c, d: ran.append(d), retry=_QUICK)])
    client = make_client(wf, on=on, middleware=[_recorder("outer", seen), gate])
    info = client.wait(client.enqueue("mw-gate", 7), timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED
    assert ran == [7]  # only the second attempt reached the step
    assert info.steps["a"].failures == 1
    assert seen == ["outer>a#1", "outer!PermissionError", "outer>a#2", "outer<None"]

    never = make_client(
        cf.Workflow("mw-never", steps=[cf.Step("a", lambda c, d: ran.append(d))]),
        on=on,
        middleware=[lambda ctx, call_next: (_ for _ in ()).throw(cf.Permanent(KeyError("no")))],
    )
    failed = never.wait(never.enqueue("mw-never", 8), timeout=TIMEOUT)
    assert failed.status is cf.Status.FAILED
    error = failed.steps["a"].error
    assert error is not None and "no" in error.message
    assert ran == [7]


_TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="")


def test_async_steps_run_inside_the_middleware_and_see_its_context(
    make_client: Factory, on: cf.Store
) -> None:
    log: list[str] = []

    def traced(ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        token = _TRACE.set(f"span-{ctx.run_id}-{ctx.step}")
        try:
            log.append(f"before on {threading.current_thread().name.split('-')[1]}")
            return call_next()
        finally:
            _TRACE.reset(token)
            log.append("after")

    wf = cf.Workflow("mw-async")

    @wf.step()
    async def a(ctx: cf.StepContext, data: int) -> str:
        await asyncio.sleep(0)
        log.append("step")
        return _TRACE.get()

    client = make_client(wf, on=on, middleware=[traced])
    ref = client.enqueue("mw-async", 1)
    info = client.wait(ref, timeout=TIMEOUT)
    assert info.result == f"span-{ref.id}-a"
    assert log == ["before on worker", "step", "after"]


class _Observed(EngineObserver):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.claims: list[tuple[int, bool]] = []
        self.outcomes: list[tuple[str, int, str]] = []

    def claimed(self, attempts: Any, seconds: float, *, joined: bool) -> None:
        assert seconds >= 0
        with self.lock:
            self.claims.append((len(attempts), joined))

    def outcome(self, claimed: ClaimedAttempt, outcome: Outcome) -> None:
        kind = type(outcome).__name__
        if isinstance(outcome, Failed):
            kind += " retry" if outcome.retry_at is not None else " final"
        with self.lock:
            self.outcomes.append((claimed.step, claimed.attempt, kind))


def test_observers_see_claims_and_outcomes_and_their_errors_change_nothing(
    make_client: Factory, on: cf.Store
) -> None:
    class Broken(EngineObserver):
        def claimed(self, attempts: Any, seconds: float, *, joined: bool) -> None:
            raise RuntimeError("an observer's bug")

        def outcome(self, claimed: ClaimedAttempt, outcome: Outcome) -> None:
            raise RuntimeError("an observer's bug")

    seen = _Observed()
    wf = cf.Workflow("mw-observed")

    @wf.step(retry=cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01, max=0.01)))
    def a(ctx: cf.StepContext, data: int) -> int:
        if data < 0:
            raise ValueError("negative")
        return data

    client = make_client(wf, on=on, observers=[Broken()], start=False)
    client.observe(seen)
    client.start()
    good = client.wait(client.enqueue("mw-observed", 1), timeout=TIMEOUT)
    bad = client.wait(client.enqueue("mw-observed", -1), timeout=TIMEOUT)
    assert good.status is cf.Status.SUCCEEDED
    assert bad.status is cf.Status.FAILED
    assert sorted(seen.outcomes) == [
        ("a", 1, "Failed retry"), ("a", 1, "Succeeded"), ("a", 2, "Failed final"),
    ]  # fmt: skip
    assert sum(n for n, _ in seen.claims) == 3  # every attempt was claimed once
    with pytest.raises(TypeError):
        client.observe(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.use("not callable")  # type: ignore[arg-type]
    assert Succeeded  # the outcome types an observer sees are the SPI's


def test_enqueue_hooks_add_headers_the_caller_overrides(make_client: Factory, on: cf.Store) -> None:
    order: list[str] = []

    def first(workflow: str, headers: dict[str, str]) -> None:
        order.append("first")
        headers["tenant"] = "acme"
        headers["by"] = "first"

    def second(workflow: str, headers: dict[str, str]) -> None:
        order.append("second")
        headers["by"] = f"second:{workflow}:{headers['tenant']}"

    wf = cf.Workflow("mw-hooks", steps=[cf.Step("a", lambda c, d: dict(c.headers))])
    client = make_client(wf, on=on, enqueue_hooks=[first, second])
    ref = client.enqueue("mw-hooks", headers={"tenant": "globex"})
    info = client.wait(ref, timeout=TIMEOUT)
    assert order == ["first", "second"]
    assert info.result == {"tenant": "globex", "by": "second:mw-hooks:acme"}
    assert dict(info.headers) == info.result

    def broken(workflow: str, headers: dict[str, str]) -> None:
        headers["bad name"] = "x"

    client.add_enqueue_hook(broken)
    before = len(client.runs().runs)
    with pytest.raises(cf.InvalidName):
        client.enqueue("mw-hooks")
    assert len(client.runs().runs) == before  # nothing written


def test_the_async_client_enqueues_with_headers_and_hooks(
    make_client: Factory, on: cf.Store
) -> None:
    wf = cf.Workflow("mw-async-headers", steps=[cf.Step("a", lambda c, d: dict(c.headers))])
    client = make_client(wf, on=on, enqueue_hooks=[lambda w, h: h.update(hook=w)])

    async def main() -> cf.RunRef:
        async with cf.AsyncClient(client, threads=1) as aio:
            return await aio.enqueue("mw-async-headers", headers={"tenant": "acme"})

    ref = asyncio.run(main())
    info = client.wait(ref, timeout=TIMEOUT)
    assert info.result == {"hook": "mw-async-headers", "tenant": "acme"}


def test_middleware_run_around_an_on_failure_handler_with_the_run_s_headers(
    make_client: Factory, on: cf.Store
) -> None:
    # The seam the metrics and tracing integrations use covers on_failure handlers too
    # (#17): ctx.step names no step, ctx.headers are the run's (a trace context).
    log: list[str] = []
    seen: list[tuple[str, str, dict[str, str], str | None]] = []
    handled = threading.Event()

    def look(ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        seen.append((ctx.step, ctx.run_id, dict(ctx.headers), ctx.tenant))
        return call_next()

    wf = cf.Workflow("mw-failing")

    @wf.step
    def breaks(ctx: cf.StepContext, data: int) -> None:
        raise cf.Permanent("broken")

    @wf.on_failure
    def report(failure: cf.RunFailure) -> None:
        log.append(f"handler {failure.run_id} {failure.step}")
        handled.set()

    client = make_client(wf, on=on, middleware=[look, _recorder("m", log)])
    ref = client.enqueue("mw-failing", 1, headers={"traceparent": "00-abc-def-01"})
    assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
    assert handled.wait(TIMEOUT)
    assert seen == [
        ("breaks", ref.id, {"traceparent": "00-abc-def-01"}, None),
        ("<on_failure>", ref.id, {"traceparent": "00-abc-def-01"}, None),
    ]
    # First outermost, as around a step; the handler ran inside the chain.
    assert log[-3:] == ["m><on_failure>#1", f"handler {ref.id} breaks", "m<None"]
