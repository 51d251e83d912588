"""An enqueuing endpoint under HTTP load: event-loop lag inside a real server (#19).

``python bench/async_http.py [--rate 500] [--seconds 10] [--variant tx --variant async ...]``

What ``bench/async_loop.py`` models in one process, measured as deployed: a
Starlette application served by uvicorn in a process of its own, on Postgres
(``CAIRNFLOW_BENCH_POSTGRES_URL``, else ``CAIRNFLOW_TEST_POSTGRES_URL``), and this
process as the load generator, sending ``POST /<variant>`` requests on keep-alive
connections at ``--rate`` a second on a fixed schedule (open loop: a slow server
does not slow the arrivals; a request's latency counts from when it was due, so
requests queued behind a slow one are counted as late, not left out). Inside the
server a ticker task sleeps 1 ms over and over and records how much later than
asked it wakes up: the **loop lag**, what every request of the process waits on
top of its own work. The endpoints (each one run per request, each one a
transaction on Postgres):

* ``idle``: no request at all: the ticker's own lag and CPU (subtracted from the
  others' CPU per request);
* ``noop``: reads the request's JSON and answers 201 (the HTTP stack's own cost);
* ``raw``: the application's row alone, in a transaction on a
  ``psycopg_pool.AsyncConnectionPool`` (the floor ``tx`` adds the enqueue to);
* ``sync``: ``client.enqueue(...)`` inside the ``async def`` (what a new user
  writes first; the loop waits for the round trip);
* ``async``: ``await aio.enqueue(...)`` (``cf.AsyncClient``: the sync call in its
  thread pool);
* ``tx``: the application's row and ``await aio.enqueue_tx(conn, ...)`` in one
  transaction on a ``psycopg_pool.AsyncConnectionPool``, then ``aio.wake()``.

Every variant gets ``--warmup`` seconds at the rate first, then the ticker's
figures are reset and ``--seconds`` are measured. The runs counted in the store
after each variant must equal the requests answered 201: a row of the table
is what the engine recorded, not only what the server answered. Prints one
JSON line per variant, then a table. A measurement, never a test: the figures
are in ``docs/benchmarks.md``.

The server is the same module (``uvicorn async_http:app --app-dir bench``),
configured from the environment by this process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from async_loop import open_loop, order_workflow, percentile  # beside this file

import cairnflow as cf

VARIANTS = ("idle", "noop", "raw", "sync", "async", "tx")
PROBE = 0.001  # the ticker's sleep, seconds
ENV_URL, ENV_PREFIX, ENV_TABLE = "BENCH_HTTP_URL", "BENCH_HTTP_PREFIX", "BENCH_HTTP_TABLE"
ENV_THREADS, ENV_PROFILE, ENV_POOL = "BENCH_HTTP_THREADS", "BENCH_HTTP_PROFILE", "BENCH_HTTP_POOL"


# -- the server (imported by uvicorn in its own process) ------------------------------------------


def create_app() -> Any:
    """The Starlette application, configured from the environment the generator set."""
    from psycopg_pool import AsyncConnectionPool
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    url, prefix, table = os.environ[ENV_URL], os.environ[ENV_PREFIX], os.environ[ENV_TABLE]
    lags: list[float] = []
    since = [time.perf_counter(), time.thread_time(), time.process_time()]

    async def ticker() -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(PROBE)
            lags.append(time.perf_counter() - asked - PROBE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store = cf.open_store(url, table_prefix=prefix, max_size=8)
        client = cf.Client(store, enqueue_only=True)
        client.register(order_workflow())
        threads = int(os.environ.get(ENV_THREADS, "4"))
        pool = int(os.environ.get(ENV_POOL, "8"))
        try:
            async with (
                AsyncConnectionPool(url, min_size=4, max_size=pool, open=False) as db,
                cf.AsyncClient(client, threads=threads) as aio,
            ):
                await db.wait()
                app.state.client, app.state.aio, app.state.db = client, aio, db
                tick = asyncio.create_task(ticker())
                profile = os.environ.get(ENV_PROFILE)
                profiler = cProfile.Profile() if profile else None
                if profiler is not None:
                    profiler.enable()  # the event loop's thread: what holds the loop up
                yield
                if profiler is not None:
                    profiler.disable()
                    profiler.dump_stats(profile)
                tick.cancel()
        finally:
            store.close()

    async def noop(request: Request) -> Response:
        await request.json()
        return Response(status_code=201)

    async def raw(request: Request) -> Response:
        order = await request.json()
        async with request.app.state.db.connection() as conn, conn.transaction():
            await conn.execute(f'INSERT INTO "{table}" (n) VALUES (%s)', (order["n"],))
        return Response(status_code=201)

    async def sync(request: Request) -> Response:
        order = await request.json()
        request.app.state.client.enqueue("order", order)  # holds the loop: the round trip
        return Response(status_code=201)

    async def async_(request: Request) -> Response:
        order = await request.json()
        await request.app.state.aio.enqueue("order", order)
        return Response(status_code=201)

    async def tx(request: Request) -> Response:
        order = await request.json()
        aio: cf.AsyncClient = request.app.state.aio
        async with request.app.state.db.connection() as conn, conn.transaction():
            await conn.execute(f'INSERT INTO "{table}" (n) VALUES (%s)', (order["n"],))
            await aio.enqueue_tx(conn, "order", order)
        aio.wake()
        return Response(status_code=201)

    async def lag(request: Request) -> JSONResponse:
        """The ticker's figures since the last call, in ms; then they start again."""
        taken = lags[:]
        lags.clear()
        now, loop_cpu, cpu = time.perf_counter(), time.thread_time(), time.process_time()
        window = now - since[0]
        spent = {"loop_cpu_s": loop_cpu - since[1], "server_cpu_s": cpu - since[2]}
        since[:] = [now, loop_cpu, cpu]
        ms = 1000.0
        return JSONResponse(
            {
                "ticks": len(taken),
                "lag_p50_ms": round(statistics.median(taken) * ms, 3) if taken else None,
                "lag_p99_ms": round(percentile(taken, 0.99) * ms, 3),
                "lag_max_ms": round(max(taken, default=0.0) * ms, 3),
                # The share of the window the ticker was late by: the loop busy with other work
                # (every request's HTTP parsing and routing too), not only blocked.
                "loop_busy_pct": round(100 * sum(taken) / window, 1),
                # CPU the loop's thread used (what one loop can give: at most a core), and the
                # whole server process (the AsyncClient's threads and the pools' too).
                "window_s": round(window, 3),
                **{name: round(value, 3) for name, value in spent.items()},
            }
        )

    return Starlette(
        routes=[
            Route("/noop", noop, methods=["POST"]),
            Route("/raw", raw, methods=["POST"]),
            Route("/sync", sync, methods=["POST"]),
            Route("/async", async_, methods=["POST"]),
            Route("/tx", tx, methods=["POST"]),
            Route("/lag", lag),
        ],
        lifespan=lifespan,
    )


if os.environ.get(ENV_URL):  # imported by uvicorn in the server process
    app = create_app()


# -- the load generator (this process) ------------------------------------------------------------


class Load:
    """Open-loop HTTP/1.1 requests on keep-alive connections, at most ``connections`` at once."""

    def __init__(self, port: int, connections: int) -> None:
        self.port = port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.slots = asyncio.Semaphore(connections)
        self.opened = 0

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        async with self.slots:
            if self.idle:
                reader, writer = self.idle.pop()
            else:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                self.opened += 1
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            writer.write(head.encode() + body)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            answer = await reader.readexactly(length) if length else b""
            self.idle.append((reader, writer))
            return status, answer

    async def run(self, path: str, rate: float, seconds: float) -> dict[str, Any]:
        """``rate`` requests a second for ``seconds``; latencies count from when each was due."""
        latencies: list[float] = []
        statuses: dict[int, int] = {}

        async def one(n: int, due: float) -> None:
            status, _ = await self.request("POST", path, json.dumps({"n": n}).encode())
            statuses[status] = statuses.get(status, 0) + 1
            latencies.append(time.perf_counter() - due)

        begun = time.perf_counter()
        n = await open_loop(rate, seconds, one)
        elapsed = time.perf_counter() - begun
        ms = 1000.0
        return {
            "requests": len(latencies),
            "offered_rps": round(n / seconds, 1),
            "answered_rps": round(len(latencies) / elapsed, 1),
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "request_p50_ms": round(statistics.median(latencies) * ms, 2),
            "request_p99_ms": round(percentile(latencies, 0.99) * ms, 2),
        }

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def measure(port: int, args: argparse.Namespace, count: Any) -> list[dict[str, Any]]:
    load = Load(port, args.connections)
    ends = time.monotonic() + 60
    while True:  # the server is up once it answers
        try:
            await load.request("GET", "/lag")
            break
        except OSError:
            if time.monotonic() > ends:
                raise
            await asyncio.sleep(0.2)
    rows = []
    try:
        idle_cpu = {"loop_cpu": 0.0, "server_cpu": 0.0}  # CPU seconds a second, ticker alone
        for variant in args.variant:
            before = count()
            created = 0
            if args.warmup and variant != "idle":
                warm = await load.run(f"/{variant}", args.rate, args.warmup)
                created += warm["statuses"].get("201", 0)
            await load.request("GET", "/lag")  # reset the ticker's figures
            row: dict[str, Any] = {"variant": variant, "rate": args.rate}
            generator_cpu = time.process_time()
            if variant == "idle":
                await asyncio.sleep(args.seconds)
                row.update(requests=0, offered_rps=0, answered_rps=0, statuses={})
                row.update(request_p50_ms=None, request_p99_ms=None)
            else:
                row.update(await load.run(f"/{variant}", args.rate, args.seconds))
            row["generator_cpu_s"] = time.process_time() - generator_cpu
            _, lag = await load.request("GET", "/lag")
            row.update(json.loads(lag))
            window = row["window_s"]
            row["loop_cpu_pct"] = round(100 * row["loop_cpu_s"] / window, 1)  # of one core
            if variant == "idle":
                idle_cpu = {name: row[f"{name}_s"] / window for name in idle_cpu}
            for name in ("loop_cpu", "server_cpu", "generator_cpu"):
                # Per request, the ticker's own CPU taken off (the idle variant's, per second).
                spent = row.pop(f"{name}_s") - idle_cpu.get(name, 0.0) * window
                per = 1000 * spent / row["requests"] if row["requests"] else None
                row[f"{name}_ms_per_request"] = None if per is None else round(per, 3)
            row["connections"] = load.opened
            row["runs_stored"] = count() - before
            created += row["statuses"].get("201", 0)
            if variant in ("idle", "noop", "raw"):
                created = 0  # no run: the floors
            if row["runs_stored"] != created:  # what the engine recorded, not what was said
                sys.exit(f"{variant}: {row['runs_stored']} runs stored for {created} answered 201")
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        load.close()
    return rows


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=500.0, help="requests a second offered")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per variant")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds at the rate before")
    parser.add_argument("--variant", action="append", choices=VARIANTS, help="default: all")
    parser.add_argument("--threads", type=int, default=4, help="AsyncClient's thread pool")
    parser.add_argument("--connections", type=int, default=64, help="the generator's most")
    parser.add_argument("--pool", type=int, default=8, help="the app's async pool's max_size")
    parser.add_argument("--loop", default="asyncio", help="uvicorn's --loop (uvloop: faster)")
    parser.add_argument("--http", default="h11", help="uvicorn's --http (httptools: faster)")
    parser.add_argument("--profile", help="cProfile the server's loop thread into this file")
    args = parser.parse_args()
    args.variant = args.variant or list(VARIANTS)
    url = os.environ.get("CAIRNFLOW_BENCH_POSTGRES_URL") or os.environ.get(
        "CAIRNFLOW_TEST_POSTGRES_URL"
    )
    if not url:
        sys.exit("set CAIRNFLOW_BENCH_POSTGRES_URL (or CAIRNFLOW_TEST_POSTGRES_URL)")
    import psycopg

    tag = uuid.uuid4().hex[:8]
    prefix, table = f"bench_http_{tag}_", f"bench_http_orders_{tag}"
    print(
        f"# {machine()}; uvicorn --loop {args.loop} --http {args.http}; "
        f"async pool {args.pool}, AsyncClient threads {args.threads}",
        flush=True,
    )
    store = cf.open_store(url, table_prefix=prefix)
    store.migrate()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE TABLE "{table}" (id BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL)')
    reader = cf.Client(store)
    reader.register(order_workflow())

    def count() -> int:
        total = reader.runs(workflow="order", count=True, limit=1).total
        return int(total or 0)

    port = free_port()
    env = {
        **os.environ,
        ENV_URL: url,
        ENV_PREFIX: prefix,
        ENV_TABLE: table,
        ENV_THREADS: str(args.threads),
        ENV_POOL: str(args.pool),
        **({ENV_PROFILE: str(Path(args.profile).resolve())} if args.profile else {}),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "async_http:app", "--app-dir", str(Path(__file__).parent),
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log", "--timeout-keep-alive", "600",
         "--loop", args.loop, "--http", args.http],
        env=env,
    )  # fmt: skip
    try:
        rows = asyncio.run(measure(port, args, count))
    finally:
        server.terminate()
        server.wait(30)
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP TABLE "{table}"')
        store.drop_tables()
        store.close()
    print(f"# after: {machine()}")
    print()
    print(
        "| variant | offered/s | answered/s | loop lag p50 | p99 | max | loop busy | "
        "request p50 | p99 | loop thread CPU | loop CPU/request | server CPU/request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['variant']} | {row['offered_rps']} | {row['answered_rps']} | "
            f"{row['lag_p50_ms']} ms | {row['lag_p99_ms']} ms | {row['lag_max_ms']} ms | "
            f"{row['loop_busy_pct']}% | "
            f"{row['request_p50_ms'] or '-'} ms | {row['request_p99_ms'] or '-'} ms | "
            f"{row['loop_cpu_pct']}% | {row['loop_cpu_ms_per_request'] or '-'} ms | "
            f"{row['server_cpu_ms_per_request'] or '-'} ms |"
        )


if __name__ == "__main__":
    main()
