"""PgQueuer on asyncpg (its README's driver): ``Queries.enqueue`` one job, or lists of jobs
in one statement; a ``PgQueuer`` worker woken by LISTEN/NOTIFY, capped at ``concurrency``
jobs picked at once (``max_concurrent_tasks``; ``batch_size`` is half of it, the largest
the cap allows). A chain is three entrypoints, each job enqueueing the next."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from . import Peer, started

ENTRY = {"noop": "noop", "chain": "s1", "probe": "probe"}
LAST = {"noop": "noop", "chain": "s3", "probe": "probe"}


class PgQueuerPeer(Peer):
    name = "PgQueuer (asyncpg)"
    order = 20
    distributions = ("pgqueuer", "asyncpg")
    batch_api = "`Queries.enqueue` with lists (one statement per batch)"
    config = (
        "`PgQueuer` worker on one connection (`AsyncpgDriver`), LISTEN/NOTIFY, "
        "`max_concurrent_tasks=8`, `batch_size=4`, default `dequeue_timeout` (30 s fallback "
        "poll); enqueues (a chain's next step too) on a connection of their own"
    )

    async def connect(self, url: str) -> Any:
        import asyncpg
        from pgqueuer.db import AsyncpgDriver

        return AsyncpgDriver(await asyncpg.connect(url))

    async def disconnect(self, driver: Any) -> None:
        await driver._connection.close()

    async def install(self, url: str) -> None:
        from pgqueuer.queries import Queries

        driver = await self.connect(url)
        try:
            await Queries(driver).install()
        finally:
            await self.disconnect(driver)

    @asynccontextmanager
    async def enqueuer(self, url: str) -> AsyncIterator[Any]:
        from pgqueuer.queries import Queries

        driver = await self.connect(url)
        try:
            yield _Enqueuer(Queries(driver))
        finally:
            await self.disconnect(driver)

    async def work(self, url: str, concurrency: int, stop: Any) -> None:
        from pgqueuer import PgQueuer
        from pgqueuer.models import Job
        from pgqueuer.queries import Queries

        driver = await self.connect(url)
        pgq = PgQueuer(driver)
        # A chain's jobs enqueue the next on a connection of their own: on the worker's, with
        # psycopg, the enqueue waits for the listener to release the connection.
        chained = await self.connect(url)
        queries = Queries(chained)

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            started("noop", 0)

        @pgq.entrypoint("probe")
        async def probe(job: Job) -> None:
            started("probe", int(job.payload or b"0"))

        @pgq.entrypoint("s1")
        async def s1(job: Job) -> None:
            started("chain", 0)
            await queries.enqueue("s2", job.payload)

        @pgq.entrypoint("s2")
        async def s2(job: Job) -> None:
            started("chain", 0)
            await queries.enqueue("s3", job.payload)

        @pgq.entrypoint("s3")
        async def s3(job: Job) -> None:
            started("chain", 0)

        async def stopper() -> None:
            await stop.wait()
            pgq.shutdown.set()

        watch = asyncio.create_task(stopper())
        try:
            await pgq.run(batch_size=max(1, concurrency // 2), max_concurrent_tasks=concurrency)
        finally:
            watch.cancel()
            await self.disconnect(driver)
            await self.disconnect(chained)

    async def counts(self, conn: Any, kind: str) -> tuple[int, int]:
        cur = await conn.execute(
            "SELECT COUNT(*) FILTER (WHERE status = 'queued' AND entrypoint = %s), "
            "COUNT(*) FILTER (WHERE status = 'successful' AND entrypoint = %s) FROM pgqueuer_log",
            (ENTRY[kind], LAST[kind]),
        )
        stored, succeeded = await cur.fetchone()
        return int(stored), int(succeeded)


class _Enqueuer:
    def __init__(self, queries: Any) -> None:
        self.queries = queries

    async def enqueue(self, kind: str, i: int) -> None:
        await self.queries.enqueue(ENTRY[kind], str(i).encode())

    async def enqueue_many(self, kind: str, ids: list[int]) -> None:
        n = len(ids)
        await self.queries.enqueue([ENTRY[kind]] * n, [str(i).encode() for i in ids], [0] * n)


PEER = PgQueuerPeer()
