"""DBOS Transact: workflows on a database-backed queue. Enqueues go through ``DBOSClient``
(DBOS's API for enqueueing from outside the application, as cairnflow's enqueuing client is
not started): ``enqueue_async`` one run; DBOS has no bulk enqueue, so a batch is
``enqueue_in_transaction`` for each run inside one transaction. Workers are a launched
``DBOS`` with the queue registered at ``worker_concurrency=concurrency``. A chain is one
workflow calling three steps. The queue has no notification path: its workers poll it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from . import Peer, started

APP = "cairnbench"
QUEUE = "cairnbench"
POLL = 0.01
"""The queue's polling interval (DBOS's default is 1 s). A worker takes at most
``worker_concurrency`` runs a poll, so at 1 s a worker of 8 drains at most 8 runs/s and the
median enqueue -> start latency is about half a second; 10 ms is DBOS at its fastest."""
WORKFLOW = {"noop": "bench_noop", "chain": "bench_chain", "probe": "bench_probe"}

_registered: dict[str, Any] = {}


def _workflows() -> dict[str, Any]:
    """The workflows, registered once per process (DBOS's registry is global)."""
    if _registered:
        return _registered
    from dbos import DBOS

    @DBOS.workflow(name="bench_noop")
    async def noop(i: int) -> None:
        started("noop", i)

    @DBOS.workflow(name="bench_probe")
    async def probe(i: int) -> None:
        started("probe", i)

    @DBOS.step(name="bench_s1")
    async def s1(i: int) -> None:
        started("chain", i)

    @DBOS.step(name="bench_s2")
    async def s2(i: int) -> None:
        started("chain", i)

    @DBOS.step(name="bench_s3")
    async def s3(i: int) -> None:
        started("chain", i)

    @DBOS.workflow(name="bench_chain")
    async def chain(i: int) -> None:
        await s1(i)
        await s2(i)
        await s3(i)

    _registered.update(noop=noop, probe=probe, chain=chain)
    return _registered


class DBOSPeer(Peer):
    name = "DBOS"
    order = 40
    distributions = ("dbos",)
    batch_api = (
        "none in DBOS: `DBOSClient.enqueue_in_transaction` once per run, 500 in one transaction"
    )
    config = (
        f"`DBOSClient` enqueues; a launched `DBOS` (async workflows and steps) with the queue "
        f"registered at `worker_concurrency=8`, `polling_interval_sec={POLL:g}` (default 1 s; "
        f"the queue is polled, no notification), default system-database pool, "
        f"LISTEN/NOTIFY on (DBOS's default, used for events, not for the queue)"
    )

    async def install(self, url: str) -> None:
        dbos = Path(sys.executable).parent / "dbos"
        done = await asyncio.to_thread(
            subprocess.run, [str(dbos), "migrate", "-s", url], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"dbos migrate failed: {done.stdout}{done.stderr}")

    @asynccontextmanager
    async def enqueuer(self, url: str) -> AsyncIterator[Any]:
        import sqlalchemy as sa
        from dbos import DBOSClient

        client = DBOSClient(system_database_url=url, application_name=APP)
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        try:
            yield _Enqueuer(client, engine)
        finally:
            engine.dispose()
            client.destroy()

    async def work(self, url: str, concurrency: int, stop: Any) -> None:
        from dbos import DBOS

        _workflows()
        DBOS(config={"name": APP, "system_database_url": url, "log_level": "WARNING"})
        DBOS.launch()
        try:
            await DBOS.register_queue_async(
                QUEUE, worker_concurrency=concurrency, polling_interval_sec=POLL
            )
            await stop.wait()
        finally:
            await asyncio.to_thread(DBOS.destroy)

    async def counts(self, conn: Any, kind: str) -> tuple[int, int]:
        cur = await conn.execute(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE status = 'SUCCESS') "
            "FROM dbos.workflow_status WHERE name = %s",
            (WORKFLOW[kind],),
        )
        stored, succeeded = await cur.fetchone()
        return int(stored), int(succeeded)


class _Enqueuer:
    def __init__(self, client: Any, engine: Any) -> None:
        self.client = client
        self.engine = engine

    def _options(self, kind: str) -> Any:
        return {"queue_name": QUEUE, "workflow_name": WORKFLOW[kind]}

    async def enqueue(self, kind: str, i: int) -> None:
        await self.client.enqueue_async(self._options(kind), i)

    async def enqueue_many(self, kind: str, ids: list[int]) -> None:
        options = self._options(kind)

        def batch() -> None:
            with self.engine.begin() as conn:
                for i in ids:
                    self.client.enqueue_in_transaction(conn, options, i)

        await asyncio.to_thread(batch)


PEER = DBOSPeer()
