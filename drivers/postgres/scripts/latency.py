"""Enqueue-to-step-start latency across two clients, with PgNotifier and with polling only.

One process enqueues (a client that never starts); a second process runs a
client with idle workers. Each sample enqueues one run of a one-step workflow
whose step returns the wall-clock time it started; the latency is that time
minus the time just before the enqueue (one machine, one clock). Samples are
spaced by a random pause as long as a poll interval, so an enqueue falls at a
random point of the worker's poll cycle. Nothing is asserted: the figures are printed, as a
Markdown table, for the README.

    python drivers/postgres/scripts/latency.py --url postgresql://postgres@127.0.0.1:5432/test

The tables it makes (a fresh prefix per mode) are dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import secrets
import statistics
import subprocess
import sys
import time
from typing import Any

import psycopg

import cairnflow as cf
from cairnflow_postgres import PostgresStore
from cairnflow_postgres.testing import drop_namespace


def stamp() -> cf.Workflow:
    """One step that returns when it started."""
    wf = cf.Workflow("stamp")
    wf.step(lambda ctx, d: time.time_ns(), name="now")
    return wf


def serve(url: str, prefix: str, notify: bool, poll: float, workers: int) -> None:
    """The worker process: idle workers until stdin closes."""
    store = PostgresStore(url, table_prefix=prefix, notify=notify, max_size=workers + 2)
    client = cf.Client(
        store, workers=workers, poll_interval=poll, notifier=None if notify else False
    )
    client.register(stamp())
    client.start()
    print("READY", flush=True)
    try:
        sys.stdin.read()
    finally:
        client.stop()
        store.close()


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, round(share * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def measure(url: str, *, notify: bool, poll: float, samples: int, workers: int) -> list[float]:
    """Latencies in milliseconds for one mode."""
    prefix = f"lat{secrets.token_hex(4)}_"
    store = PostgresStore(url, table_prefix=prefix, notify=notify, max_size=4)
    store.migrate()
    worker = subprocess.Popen(  # noqa: S603 - this very script, with our own arguments
        [
            sys.executable,
            __file__,
            "--serve",
            json.dumps(
                {"url": url, "prefix": prefix, "notify": notify, "poll": poll, "workers": workers}
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "READY":
            raise RuntimeError("the worker process did not start")
        client = cf.Client(store, notifier=None if notify else False)
        client.register(stamp())
        client.result(client.enqueue("stamp"), timeout=30)  # warm-up, not counted
        latencies = []
        for _ in range(samples):
            # A pause as long as a whole poll cycle: each enqueue lands at a random phase.
            time.sleep(random.uniform(0.05, 0.05 + poll))
            sent = time.time_ns()
            started = client.result(client.enqueue("stamp"), timeout=30)
            latencies.append((started - sent) / 1e6)
        return latencies
    finally:
        if worker.stdin is not None:
            worker.stdin.close()
        worker.wait(30)
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            drop_namespace(conn, prefix)


def main() -> None:
    """Measure both modes and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CAIRNFLOW_TEST_POSTGRES_URL"))
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--poll", type=float, default=1.0, help="the worker's poll interval")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        config: dict[str, Any] = json.loads(args.serve)
        serve(**config)
        return
    if not args.url:
        parser.error("give --url or set CAIRNFLOW_TEST_POSTGRES_URL")
    with psycopg.connect(args.url) as conn:
        server = str(conn.execute("SELECT version()").fetchone()[0]).split(" on ")[0]  # type: ignore[index]
    print(
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{server}, psycopg {psycopg.__version__} ({psycopg.pq.__impl__}); "
        f"{args.samples} samples per mode, worker poll {args.poll:g} s, {args.workers} workers"
    )
    print()
    print("| wake-up | p50 | p95 | mean | min | max |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, notify in (
        ("PgNotifier (LISTEN/NOTIFY)", True),
        (f"polling only (every {args.poll:g} s)", False),
    ):
        values = measure(
            args.url, notify=notify, poll=args.poll, samples=args.samples, workers=args.workers
        )
        print(
            f"| {label} | {percentile(values, 0.5):.1f} ms | {percentile(values, 0.95):.1f} ms "
            f"| {statistics.fmean(values):.1f} ms | {min(values):.1f} ms "
            f"| {max(values):.1f} ms |",
            flush=True,
        )


if __name__ == "__main__":
    main()
