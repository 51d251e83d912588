"""``cf.AsyncClient`` on Postgres: the awaited enqueue_tx on ``psycopg.AsyncConnection`` (#19).

The application's async transaction holds the run: it commits or rolls back with
the application's rows, a duplicate key leaves the transaction usable, and the
NOTIFY of the enqueue is delivered at the commit. The other awaited calls go
through the client's sync methods in a thread pool; they are checked here on a
real server too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import cairnflow as cf
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]


def orders_workflow() -> cf.Workflow:
    wf = cf.Workflow("order")

    @wf.step()
    def ship(ctx: cf.StepContext, data: Any) -> Any:
        return {"shipped": data}

    return wf


def waiting_workflow() -> cf.Workflow:
    wf = cf.Workflow("waiter")
    wf.wait("approval", signal="approved")
    return wf


@pytest.fixture
def table(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """The application's own table."""
    name = f"app_async_orders_{time.monotonic_ns()}"
    admin_conn.execute(f'CREATE TABLE "{name}" (id TEXT PRIMARY KEY)')
    yield name
    admin_conn.execute(f'DROP TABLE "{name}"')


def orders(admin_conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [r[0] for r in admin_conn.execute(f'SELECT id FROM "{table}" ORDER BY id')]


def test_an_async_transaction_commits_the_run_with_the_applications_rows(
    postgres_url: str,
    store: PostgresStore,
    make_client: ClientFactory,
    table: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    worker = make_client(store, orders_workflow())
    web = make_client(store, orders_workflow(), start=False)

    async def main() -> Any:
        async with (
            cf.AsyncClient(web) as aio,
            await psycopg.AsyncConnection.connect(postgres_url) as conn,
        ):
            async with conn.transaction() as tx:
                await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("A-1",))
                ref = await aio.enqueue_tx(tx, "order", {"id": "A-1"}, labels={"shop": "x"})
                # Not committed yet: nobody else sees the run.
                assert store.get_run(ref.id) is None
            aio.wake()
            return await aio.result(ref, timeout=30), await aio.info(ref)

    result, info = asyncio.run(main())
    assert result == {"shipped": {"id": "A-1"}}
    assert info.labels == {"shop": "x"}
    assert orders(admin_conn, table) == ["A-1"]
    assert worker.running


def test_an_async_rollback_takes_the_run_with_it(
    postgres_url: str,
    store: PostgresStore,
    make_client: ClientFactory,
    table: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    web = make_client(store, orders_workflow(), start=False)

    async def main() -> str:
        async with (
            cf.AsyncClient(web) as aio,
            await psycopg.AsyncConnection.connect(postgres_url) as conn,
        ):
            await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("B-1",))
            ref = await aio.enqueue_tx(conn, "order", {"id": "B-1"}, key="B-1")
            await conn.rollback()
            return ref.id

    run_id = asyncio.run(main())
    assert store.get_run(run_id) is None
    assert orders(admin_conn, table) == []
    # The key went with the rollback: a new run may take it.
    assert make_client(store, orders_workflow(), start=False).enqueue("order", key="B-1").id


def test_a_duplicate_key_leaves_the_async_transaction_usable(
    postgres_url: str,
    store: PostgresStore,
    make_client: ClientFactory,
    table: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    web = make_client(store, orders_workflow(), start=False)
    holder = web.enqueue("order", key="C-1")

    async def main() -> None:
        async with (
            cf.AsyncClient(web) as aio,
            await psycopg.AsyncConnection.connect(postgres_url) as conn,
            conn.transaction(),
        ):
            await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("C-1",))
            with pytest.raises(cf.DuplicateRun) as refused:
                await aio.enqueue_tx(conn, "order", key="C-1")
            assert refused.value.run_id == holder.id
            # The application's transaction goes on, its first row kept.
            await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("C-2",))
            await aio.enqueue_tx(conn.cursor(), "order", key="C-2")

    asyncio.run(main())
    assert orders(admin_conn, table) == ["C-1", "C-2"]
    assert len(web.runs(workflow="order").runs) == 2


def test_the_enqueue_notify_wakes_workers_at_commit(
    postgres_url: str, store: PostgresStore, make_client: ClientFactory
) -> None:
    # A 30 s poll: only the NOTIFY sent at the commit can start the run in time.
    make_client(store, orders_workflow(), poll_interval=30)
    web = make_client(store, orders_workflow(), start=False)

    async def main() -> Any:
        async with (
            cf.AsyncClient(web) as aio,
            await psycopg.AsyncConnection.connect(postgres_url) as conn,
        ):
            async with conn.transaction():
                ref = await aio.enqueue_tx(conn, "order", 7)
            return await aio.result(ref, timeout=20)

    assert asyncio.run(main()) == {"shipped": 7}


def test_what_an_async_enqueue_tx_refuses(
    postgres_url: str, store: PostgresStore, make_client: ClientFactory
) -> None:
    web = make_client(store, orders_workflow(), start=False)

    async def main() -> None:
        async with cf.AsyncClient(web) as aio:
            with (
                psycopg.connect(postgres_url) as sync_conn,
                pytest.raises(TypeError, match=r"use client\.enqueue_tx\(\)"),
            ):
                await aio.enqueue_tx(sync_conn, "order")
            async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
                with pytest.raises(cf.CairnError, match=r"async with conn\.transaction"):
                    await aio.enqueue_tx(conn, "order")
            with pytest.raises(cf.UnknownWorkflow):
                await aio.enqueue_tx(object(), "nope")

    asyncio.run(main())
    assert not web.runs().runs


def test_the_awaited_calls_on_a_server(store: PostgresStore, make_client: ClientFactory) -> None:
    make_client(store, orders_workflow(), waiting_workflow())
    web = make_client(store, orders_workflow(), waiting_workflow(), start=False)

    async def main() -> None:
        async with cf.AsyncClient(web, threads=2) as aio:
            refs = await asyncio.gather(*(aio.enqueue("order", n) for n in range(20)))
            batch = await aio.enqueue_many([cf.Job("order", 100), cf.Job("order", 101)])
            results = await asyncio.gather(*(aio.result(r, timeout=30) for r in refs + batch))
            assert results == [{"shipped": n} for n in [*range(20), 100, 101]]
            waiter = await aio.enqueue("waiter")
            sent = await aio.signal(waiter, "approved", "yes")
            assert sent in (cf.SignalResult.DELIVERED, cf.SignalResult.STORED)
            assert (await aio.wait(waiter, timeout=30)).status is cf.Status.SUCCEEDED
            doomed = await aio.enqueue("waiter")
            assert await aio.cancel(doomed) is True
            assert (await aio.info(doomed)).status is cf.Status.CANCELLED
            listed = await aio.runs(workflow="order", limit=100)
            assert len(listed.runs) == 22
            with pytest.raises(cf.WaitTimeout):
                await aio.wait(await aio.enqueue("waiter"), timeout=0.2)

    asyncio.run(main())


def test_a_cancelled_enqueue_leaves_nothing_in_the_transaction(
    postgres_url: str,
    store: PostgresStore,
    make_client: ClientFactory,
    table: str,
    admin_conn: psycopg.Connection[Any],
) -> None:
    # A web client that goes away cancels its request's task while the enqueue waits: here on
    # the key's unique index, which another, uncommitted enqueue holds.
    web = make_client(store, orders_workflow(), start=False)
    holder = psycopg.connect(postgres_url)
    held = web.enqueue_tx(holder, "order", key="D-1")

    def waiting_on_a_lock(pid: int) -> bool:
        row = admin_conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        return row is not None and row[0] == "Lock"

    async def main() -> None:
        async with (
            cf.AsyncClient(web) as aio,
            await psycopg.AsyncConnection.connect(postgres_url) as conn,
        ):
            await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("D-2",))
            task = asyncio.create_task(aio.enqueue_tx(conn, "order", key="D-1"))
            for _ in range(3000):
                if waiting_on_a_lock(conn.info.backend_pid):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the enqueue never waited on the held key")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The application's transaction is usable, and holds its own row only.
            await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("D-3",))
            await conn.commit()

    try:
        asyncio.run(main())
        assert orders(admin_conn, table) == ["D-2", "D-3"]
        runs = web.runs(workflow="order").runs
        assert not runs  # the held run is not committed, and the cancelled one never was
    finally:
        holder.rollback()
        holder.close()
    assert store.get_run(held.id) is None
