"""``cf.AsyncClient`` over the memory store: the awaited calls, their errors, the refusals (#19)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import cairnflow as cf

ClientFactory = Callable[..., cf.Client]


def order() -> cf.Workflow:
    return cf.Workflow("order", steps=[cf.Step("ship", lambda ctx, data: {"shipped": data})])


def test_the_awaited_calls_run_off_the_loop(make_client: ClientFactory) -> None:
    worker = make_client(order())
    seen: set[str] = set()
    original = worker.enqueue

    def enqueue(*args: Any, **kwargs: Any) -> cf.RunRef:
        seen.add(threading.current_thread().name)
        return original(*args, **kwargs)

    worker.enqueue = enqueue  # type: ignore[method-assign]

    async def main() -> None:
        async with cf.AsyncClient(worker, threads=2) as aio:
            refs = await asyncio.gather(*(aio.enqueue("order", n) for n in range(5)))
            assert [await aio.result(r, timeout=30) for r in refs] == [
                {"shipped": n} for n in range(5)
            ]
            with pytest.raises(cf.UnknownWorkflow):
                await aio.enqueue("nope")
            with pytest.raises(cf.RunNotFound):
                await aio.info("run_missing")

    asyncio.run(main())
    assert seen and all(name.startswith("cairnflow-async") for name in seen)


def test_a_wait_times_out_without_holding_a_thread(make_client: ClientFactory) -> None:
    wf = cf.Workflow("waiter")
    wf.wait("approval", signal="approved")
    client = make_client(wf)

    async def main() -> None:
        async with cf.AsyncClient(client, threads=1) as aio:
            ref = await aio.enqueue("waiter")
            # Many waits at once on one thread: each sleeps on the loop between its reads.
            waits = [aio.wait(ref, timeout=0.3) for _ in range(20)]
            outcomes = await asyncio.gather(*waits, return_exceptions=True)
            assert all(isinstance(o, cf.WaitTimeout) for o in outcomes)
            await aio.signal(ref, "approved", 1)
            assert (await aio.wait(ref, timeout=30)).status is cf.Status.SUCCEEDED

    asyncio.run(main())


def test_enqueue_tx_needs_the_capability(make_client: ClientFactory) -> None:
    client = make_client(order(), start=False)

    async def main() -> None:
        async with cf.AsyncClient(client) as aio:
            with pytest.raises(cf.Unsupported, match="TRANSACTIONAL_ENQUEUE"):
                await aio.enqueue_tx(object(), "order")

    asyncio.run(main())
    assert not client.runs().runs
