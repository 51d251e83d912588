"""``cf.AsyncClient`` on a SQLite file (#19): every awaited call; a stalled one stalls no loop.

SQLite has no async driver connection the store writes on: an awaited
``enqueue_tx`` is refused, saying what to use instead, with nothing written.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow_sqlite import SQLiteStore

pytestmark = pytest.mark.timeout(120)


def workflows() -> list[cf.Workflow]:
    order = cf.Workflow("order")
    order.step(lambda ctx, data: {"shipped": data}, name="ship")
    waiter = cf.Workflow("waiter")
    waiter.wait("approval", signal="approved")
    return [order, waiter]


def test_every_awaited_call_on_a_sqlite_file(db: Path) -> None:
    store = SQLiteStore(str(db))
    store.migrate()
    worker = cf.Client(store, workers=4, poll_interval=0.05)
    worker.register(*workflows())
    web = cf.Client(store)  # never started: enqueues and reads only
    web.register(*workflows())
    worker.start()
    try:

        async def main() -> None:
            async with cf.AsyncClient(web, threads=2) as aio:
                refs = await asyncio.gather(*(aio.enqueue("order", n) for n in range(10)))
                refs += await aio.enqueue_many([cf.Job("order", 10, labels={"k": "v"})])
                aio.wake()
                results = await asyncio.gather(*(aio.result(r, timeout=30) for r in refs))
                assert results == [{"shipped": n} for n in range(11)]
                waiter = await aio.enqueue("waiter")
                await aio.signal(waiter, "approved", 1)
                assert (await aio.wait(waiter, timeout=30)).status is cf.Status.SUCCEEDED
                doomed = await aio.enqueue("waiter")
                assert await aio.cancel(doomed)
                assert (await aio.info(doomed)).status is cf.Status.CANCELLED
                assert await aio.errors(doomed) == []
                assert len((await aio.runs(workflow="order", limit=50)).runs) == 11
                with pytest.raises(cf.RunFailed):
                    await aio.result(doomed, timeout=5)
                with pytest.raises(cf.UnknownWorkflow):
                    await aio.enqueue("nope")

        asyncio.run(main())
    finally:
        worker.stop()
        store.close()


def test_an_awaited_enqueue_tx_is_refused_on_sqlite(db: Path) -> None:
    store = SQLiteStore(str(db))
    store.migrate()
    web = cf.Client(store)
    web.register(*workflows())
    conn = sqlite3.connect(str(db))
    try:

        async def main() -> Any:
            async with cf.AsyncClient(web) as aio:
                with pytest.raises(TypeError, match=r"no async connection.*client\.enqueue_tx\(\)"):
                    await aio.enqueue_tx(conn, "order", 1)

        asyncio.run(main())
        assert not web.runs().runs
    finally:
        conn.close()
        store.close()


def test_a_sync_call_waits_in_the_pool_not_on_the_loop(db: Path) -> None:
    # A store call held up (a write lock another connection holds) stalls only its caller:
    # the loop goes on ticking meanwhile.
    store = SQLiteStore(str(db), busy_timeout=30)
    store.migrate()
    web = cf.Client(store)
    web.register(*workflows())
    blocker = sqlite3.connect(str(db), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock until released below
    try:

        async def main() -> tuple[int, cf.RunRef]:
            async with cf.AsyncClient(web) as aio:
                enqueue = asyncio.create_task(aio.enqueue("order", 1))
                ticks = 0
                while ticks < 20:  # the loop runs while the enqueue waits for the lock
                    await asyncio.sleep(0.01)
                    ticks += 1
                assert not enqueue.done()
                blocker.execute("ROLLBACK")
                return ticks, await enqueue

        ticks, ref = asyncio.run(main())
        assert ticks == 20
        assert web.info(ref).status is cf.Status.QUEUED
    finally:
        blocker.close()
        store.close()
