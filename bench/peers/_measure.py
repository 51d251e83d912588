"""The workloads every peer runs, on a fresh database each, through its adapter (``Peer``).

Each returns its figures as a dict, and raises :class:`Failed` unless every run it enqueued
was stored and (where it runs them) succeeded, read from the peer's own tables.

- ``enqueue``: ``single`` runs one per transaction; ``batched`` runs through the peer's batch
  API, ``batch`` per call; then ``calls`` single enqueues 10 ms apart, each timed alone;
- ``latency``: one worker process (``_worker.py``, ``concurrency`` slots) idle, one run
  enqueued every 20.1 ms (as cairnflow's W4), ``samples`` times: the body's recorded start
  minus the wall clock just before the ``enqueue`` call;
- ``drain``: ``runs`` no-op runs enqueued (batched, untimed), then the peer's workers with
  ``concurrency`` slots in this process: runs/s from the first body's start until the
  store shows every run succeeded (polled every 5 ms once every body has started);
- ``chain``: the same with ``runs`` 3-step runs: steps/s over the same window.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from . import STARTS, Peer, reset

HERE = Path(__file__).parent
W4_EVERY = 0.0201
"""As cairnflow's W4 (``bench/_workloads.py``): one enqueue every 20 ms plus 0.1 ms of drift."""


class Failed(Exception):
    """A workload's runs were not all stored or did not all succeed."""


def pct(values: list[float], p: float) -> float:
    """Linear between the two nearest ranks, as cairnflow's W4."""
    values = sorted(values)
    rank = p / 100 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


async def until(
    check: Callable[[], Awaitable[bool]], timeout: float, every: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {timeout:g}s")
        await asyncio.sleep(every)


async def enqueue(peer: Peer, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    single, batched, batch, calls = (
        sizes["single"],
        sizes["batched"],
        sizes["batch"],
        sizes["calls"],
    )
    await peer.install(url)
    async with peer.enqueuer(url) as queue:
        started = time.perf_counter()
        for i in range(single):
            await queue.enqueue("noop", i)
        one = single / (time.perf_counter() - started)
        started = time.perf_counter()
        for start in range(0, batched, batch):
            await queue.enqueue_many("noop", list(range(start, min(start + batch, batched))))
        many = batched / (time.perf_counter() - started)
        await asyncio.sleep(0.5)
        took = []
        for i in range(calls):
            await asyncio.sleep(0.01)
            started = time.perf_counter()
            await queue.enqueue("noop", i)
            took.append((time.perf_counter() - started) * 1000)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        stored, _ = await peer.counts(conn, "noop")
    if stored != single + batched + calls:
        raise Failed(f"{peer.name}: {stored} runs stored, {single + batched + calls} enqueued")
    return {
        "enqueue_single_per_s": one,
        "enqueue_batched_per_s": many,
        "batch": batch,
        "enqueue_call_p50_ms": pct(took, 50),
        "enqueue_call_p95_ms": pct(took, 95),
    }


async def latency(peer: Peer, key: str, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    samples = sizes["samples"]
    await peer.install(url)
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "_worker.py"), key, url, str(sizes["concurrency"])],
        stdout=subprocess.PIPE,
        text=True,
    )
    sent: dict[int, int] = {}
    try:
        async with (
            peer.enqueuer(url) as queue,
            await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
        ):

            async def succeeded(n: int) -> bool:
                if worker.poll() is not None:
                    raise Failed(f"{peer.name}: the worker process exited ({worker.returncode})")
                return (await peer.counts(conn, "probe"))[1] >= n

            # The worker is up (listening, polling) once a first probe has run.
            await queue.enqueue("probe", -1)
            await until(lambda: succeeded(1), 120, 0.05, f"{peer.name}: the worker's first run")
            await asyncio.sleep(1.0)
            start = time.monotonic()
            for i in range(samples):
                await asyncio.sleep(max(0.0, start + i * W4_EVERY - time.monotonic()))
                sent[i] = time.time_ns()
                await queue.enqueue("probe", i)
            await until(lambda: succeeded(samples + 1), 120, 0.05, f"{peer.name}: probes")
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        try:
            out, _ = worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, _ = worker.communicate()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise Failed(f"{peer.name}: the worker process reported no start times")
    probes = {int(k): v for k, v in json.loads(lines[-1]).items()}
    missing = [i for i in sent if i not in probes]
    if missing:
        raise Failed(f"{peer.name}: {len(missing)} probes have no recorded start")
    latencies = [(probes[i] - t0) / 1e6 for i, t0 in sent.items()]
    return {
        "samples": samples,
        "p50_ms": pct(latencies, 50),
        "p95_ms": pct(latencies, 95),
        "p99_ms": pct(latencies, 99),
    }


async def _run_all(peer: Peer, url: str, kind: str, runs: int, sizes: dict[str, Any]) -> float:
    """Enqueue ``runs`` of ``kind`` (batched, untimed), run them; return the window in s."""
    bodies = runs * (3 if kind == "chain" else 1)
    await peer.install(url)
    async with peer.enqueuer(url) as queue:
        for start in range(0, runs, sizes["batch"]):
            await queue.enqueue_many(kind, list(range(start, min(start + sizes["batch"], runs))))
    reset()
    stop = asyncio.Event()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        stored, _ = await peer.counts(conn, kind)
        if stored != runs:
            raise Failed(f"{peer.name}: {stored} runs stored, {runs} enqueued")
        workers = asyncio.create_task(peer.work(url, sizes["concurrency"], stop))

        async def alive() -> None:
            if workers.done():
                workers.result()  # its exception, if it raised
                raise Failed(f"{peer.name}: the workers stopped")

        async def all_started() -> bool:
            await alive()
            return len(STARTS) >= bodies

        async def all_succeeded() -> bool:
            await alive()
            return (await peer.counts(conn, kind))[1] >= runs

        try:
            await until(all_started, 900, 0.01, f"{peer.name}: {bodies} bodies started")
            await until(all_succeeded, 120, 0.005, f"{peer.name}: {runs} runs succeeded")
            ended = time.perf_counter()
        finally:
            stop.set()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(workers, 60)
        stored, succeeded = await peer.counts(conn, kind)
    if (stored, succeeded) != (runs, runs):
        raise Failed(f"{peer.name}: {succeeded} of {stored} runs succeeded, {runs} expected")
    if len(STARTS) != bodies:
        raise Failed(f"{peer.name}: {len(STARTS)} bodies ran, {bodies} expected (a rerun?)")
    return ended - min(STARTS)


async def drain(peer: Peer, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    runs = sizes["drain"]
    seconds = await _run_all(peer, url, "noop", runs, sizes)
    return {"runs": runs, "concurrency": sizes["concurrency"], "runs_per_s": runs / seconds}


async def chain(peer: Peer, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    runs = sizes["chain"]
    seconds = await _run_all(peer, url, "chain", runs, sizes)
    return {"runs": runs, "steps": 3 * runs, "steps_per_s": 3 * runs / seconds}


WORKLOADS = ("enqueue", "latency", "drain", "chain")


async def run(peer: Peer, key: str, name: str, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    if name == "enqueue":
        return await enqueue(peer, url, sizes)
    if name == "latency":
        return await latency(peer, key, url, sizes)
    if name == "drain":
        return await drain(peer, url, sizes)
    if name == "chain":
        return await chain(peer, url, sizes)
    raise ValueError(f"unknown workload {name!r}")
