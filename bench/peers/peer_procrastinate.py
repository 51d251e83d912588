"""Procrastinate with its async psycopg connector: ``defer_async`` one job,
``batch_defer_async`` a batch; ``run_worker_async`` with ``concurrency`` slots and
``listen_notify=True``. A chain is three tasks, each job deferring the next."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from . import Peer, started

ENTRY = {"noop": "noop", "chain": "s1", "probe": "probe"}
LAST = {"noop": "noop", "chain": "s3", "probe": "probe"}
POOL = {"min_size": 1, "max_size": 10}
"""The connector's pool (as cairnflow's default pool: at most 10 connections)."""


def _app(url: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, **POOL))

    @app.task(name="noop")
    async def noop(i: int) -> None:
        started("noop", i)

    @app.task(name="probe")
    async def probe(i: int) -> None:
        started("probe", i)

    @app.task(name="s3")
    async def s3(i: int) -> None:
        started("chain", i)

    @app.task(name="s2")
    async def s2(i: int) -> None:
        started("chain", i)
        await s3.defer_async(i=i)

    @app.task(name="s1")
    async def s1(i: int) -> None:
        started("chain", i)
        await s2.defer_async(i=i)

    return app


class ProcrastinatePeer(Peer):
    name = "Procrastinate"
    order = 30
    distributions = ("procrastinate", "psycopg")
    batch_api = "`Task.batch_defer_async` (one statement per batch)"
    config = (
        "`PsycopgConnector` (a psycopg pool of 1-10 connections), "
        "`run_worker_async(concurrency=8, listen_notify=True)`, default "
        "`fetch_job_polling_interval` (5 s fallback poll), jobs kept (`delete_jobs='never'`)"
    )

    async def install(self, url: str) -> None:
        app = _app(url)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    @asynccontextmanager
    async def enqueuer(self, url: str) -> AsyncIterator[Any]:
        app = _app(url)
        async with app.open_async():
            yield _Enqueuer(app)

    async def work(self, url: str, concurrency: int, stop: Any) -> None:
        app = _app(url)
        async with app.open_async():
            worker = asyncio.create_task(
                app.run_worker_async(
                    concurrency=concurrency,
                    listen_notify=True,
                    install_signal_handlers=False,
                    wait=True,
                )
            )
            waiting = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait({worker, waiting}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if worker in done:
                worker.result()
                return
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def counts(self, conn: Any, kind: str) -> tuple[int, int]:
        cur = await conn.execute(
            "SELECT COUNT(*) FILTER (WHERE task_name = %s), "
            "COUNT(*) FILTER (WHERE task_name = %s AND status = 'succeeded') "
            "FROM procrastinate_jobs",
            (ENTRY[kind], LAST[kind]),
        )
        stored, succeeded = await cur.fetchone()
        return int(stored), int(succeeded)


class _Enqueuer:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def enqueue(self, kind: str, i: int) -> None:
        await self.app.tasks[ENTRY[kind]].defer_async(i=i)

    async def enqueue_many(self, kind: str, ids: list[int]) -> None:
        await self.app.tasks[ENTRY[kind]].batch_defer_async(*({"i": i} for i in ids))


PEER = ProcrastinatePeer()
