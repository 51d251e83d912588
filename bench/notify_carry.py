"""What a busy producer's wake-ups cost (#20, Postgres): one-run enqueues in a loop, the
store's notifier as shipped against the same notifier with every hint left to its sender
thread::

    python bench/notify_carry.py [--rounds 12] [--calls 300]

Four loops, in turn, round after round, each over ``--calls`` one-run enqueues (or inserts)
on one namespace, so the machine's drift falls on all of them alike:

- ``raw``: the bench's raw single-insert loop (psycopg: an ``INSERT``, a ``COMMIT``);
- ``shipped``: ``client.enqueue()`` on a store with its notifier: past each debounce
  window, the next enqueue carries the window's NOTIFY in its own statement;
- ``sender only``: the same, with ``PgNotifier.reserve_inline`` refusing every time, so
  every NOTIFY is a transaction of the sender thread's own, about one a window: how the
  notifier sent a busy producer's hints before 2026-12-05;
- ``no notifier``: a store made with ``notify=False``.

Printed: each loop's median microseconds a call, its ratio to the raw loop, and how many
NOTIFYs each notifier sent and how many of those rode in an enqueue. The database is
``CAIRNFLOW_BENCH_POSTGRES_URL`` (else ``CAIRNFLOW_TEST_POSTGRES_URL``). A benchmark tool:
it asserts nothing about speed, and drops what it made.
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

import cairnflow as cf
from cairnflow_postgres import PgNotifier, PostgresStore


def _refusing(notifier: PgNotifier) -> None:
    """Make ``notifier`` leave every hint to its sender thread."""

    def refuse(channel: str) -> bool:
        return False

    notifier.reserve_inline = refuse  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12, help="turns of every loop")
    parser.add_argument("--calls", type=int, default=300, help="enqueues (inserts) a turn")
    args = parser.parse_args()
    engine = _engines.load_or_exit("postgres", Path(tempfile.gettempdir()))
    prefix = "nc" + uuid.uuid4().hex[:6] + "_"
    raw_table = prefix + "raw"
    stores: dict[str, PostgresStore] = {}
    try:
        made = engine.make_store(prefix)
        made.migrate()
        made.close()
        stores = {
            "shipped": PostgresStore(engine.url, table_prefix=prefix),
            "sender only": PostgresStore(engine.url, table_prefix=prefix),
            "no notifier": PostgresStore(engine.url, table_prefix=prefix, notify=False),
        }
        refused = stores["sender only"].notifier
        assert refused is not None
        _refusing(refused)
        clients = {}
        for name, store in stores.items():
            client = cf.Client(store)
            client.register(_apps.noop())
            clients[name] = client
        with psycopg.connect(engine.url) as raw:
            raw.execute(f'CREATE TABLE "{raw_table}" (id bigserial PRIMARY KEY, payload jsonb)')
            raw.commit()

            def inserts() -> float:
                started = time.perf_counter()
                for i in range(args.calls):
                    raw.execute(
                        f'INSERT INTO "{raw_table}" (payload) VALUES (%s::jsonb)', (str(i),)
                    )
                    raw.commit()
                return (time.perf_counter() - started) / args.calls * 1e6

            def enqueues(client: cf.Client) -> Callable[[], float]:
                def loop() -> float:
                    started = time.perf_counter()
                    for i in range(args.calls):
                        client.enqueue("noop", i)
                    return (time.perf_counter() - started) / args.calls * 1e6

                return loop

            loops = {"raw": inserts, **{name: enqueues(c) for name, c in clients.items()}}
            for loop in loops.values():  # the statements prepared, the pages read
                loop()
            took: dict[str, list[float]] = {name: [] for name in loops}
            names = list(loops)
            for turn in range(args.rounds):
                for name in names[turn % len(names) :] + names[: turn % len(names)]:
                    took[name].append(loops[name]())
        medians = {name: statistics.median(times) for name, times in took.items()}
        for name, median in medians.items():
            print(
                f"{name:12s} {median:8.1f} us a call  {medians['raw'] / median:.3f}x the raw loop"
            )
        faster = sum(a < b for a, b in zip(took["shipped"], took["sender only"], strict=True))
        print(f"shipped faster than sender only in {faster} of {args.rounds} rounds")
        for name in ("shipped", "sender only"):
            notifier = stores[name].notifier
            assert notifier is not None
            print(f"{name:12s} NOTIFYs sent {notifier.sent}, in an enqueue {notifier.inline}")
    finally:
        for store in stores.values():
            store.close()
        engine.drop(prefix)


if __name__ == "__main__":
    main()
