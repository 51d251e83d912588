"""``cf.AsyncClient`` on MariaDB and MySQL (#19): the awaited calls over the sync store.

PyMySQL has no async connection: an awaited ``enqueue_tx`` is refused, naming
what to use instead, with nothing written.
"""

from __future__ import annotations

import asyncio

import pytest

import cairnflow as cf
from cairnflow_mysql import MySQLStore

pytestmark = pytest.mark.timeout(120)


def order() -> cf.Workflow:
    wf = cf.Workflow("order")
    wf.step(lambda ctx, data: {"shipped": data}, name="ship")
    return wf


def test_the_awaited_calls(store: MySQLStore) -> None:
    worker = cf.Client(store, workers=4, poll_interval=0.05)
    worker.register(order())
    web = cf.Client(store)
    web.register(order())
    worker.start()
    try:

        async def main() -> None:
            async with cf.AsyncClient(web, threads=3) as aio:
                refs = await asyncio.gather(*(aio.enqueue("order", n) for n in range(12)))
                refs += await aio.enqueue_many([cf.Job("order", 12), cf.Job("order", 13)])
                results = await asyncio.gather(*(aio.result(r, timeout=60) for r in refs))
                assert results == [{"shipped": n} for n in range(14)]
                assert len((await aio.runs(workflow="order", limit=50)).runs) == 14
                with pytest.raises(TypeError, match=r"no async connection.*client\.enqueue_tx\(\)"):
                    await aio.enqueue_tx(object(), "order", 1)

        asyncio.run(main())
        assert len(web.runs(workflow="order", limit=50).runs) == 14
    finally:
        worker.stop()
