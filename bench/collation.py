"""What comparing text byte for byte saves (#20, Postgres): the same engine on two namespaces,
one at schema version 26 (every text column in the database's default collation) and one at
27 (``COLLATE "C"``, migration ``027_byte_order.sql``)::

    python bench/collation.py [--rounds 40] [--batch 500] [--singles 100] [--steps 8000]

Three measurements, each alternating between the two namespaces so the machine's drift falls
on both alike:

- ``enqueue_many`` of ``--batch`` runs, end to end through a client, batch by batch;
- one-run ``enqueue`` calls, ``--singles`` on one namespace, then as many on the other;
- a claim of 8 steps and their success with their runs' end, as ``step_key.py`` sends them
  (the claim under the engine's planner settings; ``synchronous_commit`` off: the statements'
  work, not the disk's), batch by batch over ``--steps`` queued runs in each.

The engine's code is the same for both: its statements do not depend on the collation. The
database is ``CAIRNFLOW_BENCH_POSTGRES_URL`` (else ``CAIRNFLOW_TEST_POSTGRES_URL``); its own
default collation is printed, since that is what version 26 compares with. A benchmark tool: it
asserts nothing about speed, and drops every table it made.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _apps
import _engines
import psycopg
from step_key import _statements, in_turn, queued

import cairnflow as cf
from cairnflow_postgres import PostgresStore

BEFORE = 26
"""The last schema version whose text columns hold the database's default collation."""

SCHEMAS = ("default (26)", "C (27)")


def _store(url: str, made: list[str], version: int | None) -> PostgresStore:
    prefix = "co" + uuid.uuid4().hex[:6] + "_"
    made.append(prefix)
    store = PostgresStore(url, table_prefix=prefix)
    if version is not None:
        store.migrations = store.migrations[:version]
    store.migrate()
    return store


def _alternate(rounds: int, work: dict[str, Callable[[], float]]) -> dict[str, float]:
    """``work[name]()`` returns a round's time for one unit; the median of each name's."""
    took: dict[str, list[float]] = {name: [] for name in work}
    names = list(work)
    for turn in range(rounds):
        for name in names[turn % 2 :] + names[: turn % 2]:
            took[name].append(work[name]())
    return {name: statistics.median(times) for name, times in took.items()}


def _report(title: str, unit: str, medians: dict[str, float]) -> None:
    old, new = (medians[name] for name in SCHEMAS)
    print(f"{title}:")
    for name in SCHEMAS:
        print(f"  {name:13s} {medians[name]:9.1f} {unit}")
    print(f"  C / default: {new / old:.3f} of the time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="turns of each measurement")
    parser.add_argument("--batch", type=int, default=500, help="runs an enqueue_many")
    parser.add_argument("--singles", type=int, default=100, help="one-run enqueues a turn")
    parser.add_argument("--steps", type=int, default=8000, help="queued runs claimed and ended")
    args = parser.parse_args()
    engine = _engines.load_or_exit("postgres", Path(tempfile.gettempdir()))
    url = engine.url
    made: list[str] = []
    stores: list[PostgresStore] = []
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT datcollate, datlocprovider, daticulocale FROM pg_database "
                "WHERE datname = current_database()"
            ).fetchone()
        print(f"database collation: {row}")
        stores = [_store(url, made, version) for version in (BEFORE, None)]
        clients = {}
        for name, store in zip(SCHEMAS, stores, strict=True):
            client = cf.Client(store)
            client.register(_apps.noop())
            clients[name] = client

        def many(client: cf.Client) -> float:
            started = time.perf_counter()
            client.enqueue_many(cf.Job("noop", i) for i in range(args.batch))
            return (time.perf_counter() - started) / args.batch * 1e6

        def singles(client: cf.Client) -> float:
            started = time.perf_counter()
            for i in range(args.singles):
                client.enqueue("noop", i)
            return (time.perf_counter() - started) / args.singles * 1e6

        for client in clients.values():  # the statements prepared, the pages read
            many(client)
            singles(client)
        _report(
            f"enqueue_many of {args.batch}",
            "us a run",
            _alternate(args.rounds, {n: lambda c=c: many(c) for n, c in clients.items()}),
        )
        _report(
            "one-run enqueue",
            "us a run",
            _alternate(args.rounds, {n: lambda c=c: singles(c) for n, c in clients.items()}),
        )
        # Claims and successes on namespaces of their own, queued with nothing else in them.
        versions = zip(SCHEMAS, (BEFORE, None), strict=True)
        prefixes = {name: queued(url, args.steps, made, version=v) for name, v in versions}
        took = in_turn(
            url,
            {name: ("id", _statements(prefix, "id")) for name, prefix in prefixes.items()},
            8,
        )
        _report(
            "a claim of 8 and their success",
            "us a step",
            {name: statistics.median(times) for name, times in took.items()},
        )
    finally:
        for store in stores:
            store.close()
        for prefix in made:
            engine.drop(prefix)


if __name__ == "__main__":
    main()
