"""What a SQLite batch enqueue costs, and how much of it is the schema's own writing (#20).

``enqueue_many`` end to end, and inside the same calls the time its ``INSERT`` statements
take (sqlite3's ``executemany`` of the run and step rows: SQLite's own work for two rows and
their index entries a run, no engine Python); then the same against tables without the
runs' four listing and deadline indexes; then the raw loop of ``nox -s bench`` (one
``executemany`` of one-row-one-index jobs a transaction)::

    python bench/sqlite_batch_parts.py [--rounds 12] [--batch 1000]

Each round writes five batches of every variant in turn, in one process on one database
file (WAL, ``synchronous = FULL`` as ``nox -s bench``), so the machine's drift falls on all
of them alike; the figures are the medians of the rounds and their ratios to the raw loop.
The statements are timed by wrapping ``Enqueue._insert_rows`` of the SQL layer, a private
name: a rename fails this script loudly. A benchmark tool, not a test: it asserts nothing
about speed.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _engines
from _baseline import Baseline

import cairnflow as cf

LISTINGS = ("runs_state", "runs_queue", "runs_workflow", "runs_overdue")
"""The runs' non-unique indexes a new run writes (as ``batch_parts.py``): the listings by
state, queue and workflow, and the active runs' deadlines."""


class Variant:
    """An enqueue-only client on a namespace of its own, its ``INSERT`` time counted."""

    def __init__(self, engine: _engines.Engine, prefix: str, dropped: tuple[str, ...]) -> None:
        store = engine.make_store(prefix)
        store.migrate()
        if dropped:
            conn = sqlite3.connect(engine.settings["file"])
            for index in dropped:
                conn.execute(f'DROP INDEX "{prefix}{index}"')
            conn.close()
        self.client = cf.Client(store, enqueue_only=True)
        self.client.register(cf.Workflow("noop", steps=[cf.Step("s", lambda c, d: d)]))
        self.inserting = 0.0
        enqueue = store._enqueue  # AttributeError: the name moved
        insert_rows = enqueue._insert_rows

        def timed(cur: Any, rows: Any) -> None:
            started = time.perf_counter()
            insert_rows(cur, rows)
            self.inserting += time.perf_counter() - started

        enqueue._insert_rows = timed

    def write(self, jobs: list[cf.Job], batches: int) -> tuple[float, float]:
        """``batches`` batches of ``jobs``: (runs a second end to end, of the statements alone)."""
        self.inserting = 0.0
        started = time.perf_counter()
        for _ in range(batches):
            self.client.enqueue_many(jobs)
        runs = len(jobs) * batches
        return runs / (time.perf_counter() - started), runs / self.inserting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12, help="rounds of every variant")
    parser.add_argument("--batch", type=int, default=1000, help="runs a batch")
    args = parser.parse_args()
    engine = _engines.load_or_exit("sqlite", Path(tempfile.mkdtemp()))
    raw = Baseline(engine, "rawq_")
    schema, lean = Variant(engine, "a_", ()), Variant(engine, "b_", LISTINGS)
    jobs = [cf.Job("noop", {"n": i}) for i in range(args.batch)]
    figures: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        figures.setdefault("raw loop (rows)", []).append(raw.enqueue(5 * args.batch, args.batch))
        whole, statements = schema.write(jobs, 5)
        figures.setdefault("enqueue_many, end to end", []).append(whole)
        figures.setdefault("its INSERT statements alone", []).append(statements)
        _, statements = lean.write(jobs, 5)
        figures.setdefault("the statements, without the listing indexes", []).append(statements)
    baseline = statistics.median(figures["raw loop (rows)"])
    print(f"SQLite {sqlite3.sqlite_version}, batches of {args.batch}, {args.rounds} rounds")
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"{name:45} {median:>10,.0f}/s  {median / baseline:.2f}x")


if __name__ == "__main__":
    main()
