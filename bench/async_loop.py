"""Event-loop lag of a web endpoint that enqueues: ``cf.AsyncClient`` against a sync call (#19).

``python bench/async_loop.py [--engine postgres|sqlite] [--rate 500] [--seconds 5]``

An asyncio web server (Starlette, FastAPI, aiohttp) runs every request of a
process on one event loop: whatever an endpoint does without awaiting holds up
every other request. This script models such an endpoint at ``--rate`` requests
a second, arriving on a fixed schedule (open loop: a slow endpoint does not slow
the arrivals), each one ``async def endpoint(order)`` that enqueues one run, and
measures how late the loop is: a probe task sleeps 1 ms over and over and
records how much later than asked it wakes up. Variants:

* ``idle``: no request at all (the probe's own floor on this machine);
* ``sync``: ``client.enqueue(...)`` called inside the ``async def``, what a new
  user writes first: the loop waits for every round trip;
* ``async``: ``await aio.enqueue(...)`` (``cf.AsyncClient``: the sync call in its
  bounded thread pool);
* ``tx`` (Postgres): ``await aio.enqueue_tx(conn, ...)`` in the request's own
  transaction on a ``psycopg_pool.AsyncConnectionPool``, the application's
  row written beside it (the enqueue's statements awaited on the connection).

The endpoint is called straight from the loop, not through an HTTP server: the
server's own parsing would add the same work to every variant and hide the one
difference measured. Prints one JSON line per variant and a table. A measurement,
never a test: figures are recorded in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import cairnflow as cf

PROBE = 0.001  # the lag probe's sleep, seconds


def order_workflow() -> cf.Workflow:
    return cf.Workflow("order", steps=[cf.Step("ship", lambda ctx, data: None)])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def open_loop(
    rate: float, seconds: float, call: Callable[[int, float], Awaitable[None]]
) -> int:
    """Start ``call(n, due)`` ``rate`` times a second for ``seconds``, each at its due time
    (open loop: a slow call does not delay the next ones); wait for all; how many were started."""
    tasks = []
    begun = time.perf_counter()
    interval = 1.0 / rate
    n = 0
    while (due := begun + n * interval) < begun + seconds:
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(call(n, due)))
        n += 1
    await asyncio.gather(*tasks)
    return n


async def measure(
    endpoint: Callable[[int], Awaitable[None]] | None, rate: float, seconds: float
) -> dict[str, Any]:
    """Run ``endpoint`` at ``rate`` a second for ``seconds``; the loop's lag and the latencies."""
    lags: list[float] = []
    latencies: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            asked = time.perf_counter()
            await asyncio.sleep(PROBE)
            lags.append(time.perf_counter() - asked - PROBE)

    async def one(n: int) -> None:
        assert endpoint is not None
        started = time.perf_counter()
        await endpoint(n)
        latencies.append(time.perf_counter() - started)

    prober = asyncio.create_task(probe())
    begun = time.perf_counter()
    if endpoint is not None:
        await open_loop(rate, seconds, lambda n, due: one(n))
    else:
        await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - begun
    stop.set()
    await prober
    ms = 1000.0
    return {
        "requests": len(latencies),
        "achieved_rps": round(len(latencies) / elapsed, 1),
        "lag_p50_ms": round(statistics.median(lags) * ms, 3),
        "lag_p99_ms": round(percentile(lags, 0.99) * ms, 3),
        "lag_max_ms": round(max(lags) * ms, 3),
        "request_p50_ms": round(statistics.median(latencies) * ms, 3) if latencies else None,
        "request_p99_ms": round(percentile(latencies, 0.99) * ms, 3) if latencies else None,
    }


def open_engine(engine: str, workdir: str) -> tuple[Any, str | None]:
    """The store, and the Postgres URL when there is one."""
    prefix = f"bench_aio_{uuid.uuid4().hex[:8]}_"
    if engine == "postgres":
        url = os.environ.get("CAIRNFLOW_BENCH_POSTGRES_URL") or os.environ.get(
            "CAIRNFLOW_TEST_POSTGRES_URL"
        )
        if not url:
            sys.exit("set CAIRNFLOW_BENCH_POSTGRES_URL (or CAIRNFLOW_TEST_POSTGRES_URL)")
        store = cf.open_store(url, table_prefix=prefix, max_size=16)
        store.migrate()
        return store, url
    store = cf.open_store(f"sqlite:///{workdir}/bench.db", table_prefix=prefix)
    store.migrate()
    return store, None


async def run_variants(
    store: Any, url: str | None, args: argparse.Namespace
) -> list[dict[str, Any]]:
    client = cf.Client(store)  # never started: the web process only enqueues
    client.register(order_workflow())
    rows: list[dict[str, Any]] = []

    async def record(name: str, endpoint: Callable[[int], Awaitable[None]] | None) -> None:
        row = {"variant": name, "engine": args.engine, "rate": args.rate}
        row.update(await measure(endpoint, args.rate, args.seconds))
        print(json.dumps(row), flush=True)
        rows.append(row)

    await record("idle", None)

    async def sync_endpoint(n: int) -> None:
        client.enqueue("order", {"order": n})  # blocks the loop for the round trip

    await record("sync", sync_endpoint)

    async with cf.AsyncClient(client, threads=args.threads) as aio:

        async def async_endpoint(n: int) -> None:
            await aio.enqueue("order", {"order": n})

        await record("async", async_endpoint)

        if url is not None:
            import psycopg
            from psycopg_pool import AsyncConnectionPool

            table = f"bench_aio_orders_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f'CREATE TABLE "{table}" (id BIGINT PRIMARY KEY)')
            try:
                async with AsyncConnectionPool(url, min_size=4, max_size=8, open=False) as pool:
                    await pool.wait()

                    async def tx_endpoint(n: int) -> None:
                        async with pool.connection() as conn, conn.transaction():
                            await conn.execute(f'INSERT INTO "{table}" VALUES (%s)', (n,))
                            await aio.enqueue_tx(conn, "order", {"order": n})
                        aio.wake()

                    await record("tx", tx_endpoint)
            finally:
                with psycopg.connect(url, autocommit=True) as admin:
                    admin.execute(f'DROP TABLE "{table}"')
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--rate", type=float, default=500.0, help="requests a second")
    parser.add_argument("--seconds", type=float, default=5.0, help="per variant")
    parser.add_argument("--threads", type=int, default=4, help="AsyncClient's thread pool")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        store, url = open_engine(args.engine, workdir)
        try:
            rows = asyncio.run(run_variants(store, url, args))
        finally:
            store.drop_tables()
            store.close()
    print()
    print("| variant | requests/s | loop lag p50 | p99 | max | request p50 | p99 |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['variant']} | {row['achieved_rps']} | {row['lag_p50_ms']} ms | "
            f"{row['lag_p99_ms']} ms | {row['lag_max_ms']} ms | "
            f"{row['request_p50_ms'] or '-'} ms | {row['request_p99_ms'] or '-'} ms |"
        )


if __name__ == "__main__":
    main()
