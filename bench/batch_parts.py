"""What a Postgres batch enqueue costs, part by part, against the raw loop (#20).

``enqueue_many`` end to end, then the engine's own statements of the same batch replayed with
no engine code around them (so what is left is the server and psycopg), then the same
statements against the same tables without their listing indexes, then the runs' statement
alone (what one row a run would cost), then a raw one-row table::

    python bench/batch_parts.py [--pairs 60] [--batch 500] [--each]

``--each`` adds the statements against tables each without one of the runs' listing and
deadline indexes, or without one of the steps' keys (``(run_id, name)``, the id): what that
one index costs a batch.

Every variant writes one batch in turn, in a rotating order, on one connection of one process,
so the machine's drift falls on all of them alike; the figure is rows (or runs) a second over
all of a variant's batches, and its ratio to the raw loop of ``nox -s bench-peers`` (one
``executemany`` of the batch a transaction). The statements are captured from the dialect
(``PostgresDialect.batch_insert``, a private name: a rename fails this script loudly) while
the engine writes one batch, and replayed with fresh ids. A benchmark tool, not a test: it
asserts nothing about speed. Uses ``CAIRNFLOW_BENCH_POSTGRES_URL`` or
``CAIRNFLOW_TEST_POSTGRES_URL``; drops every table it made.
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
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _engines
import psycopg
from _baseline import Baseline

import cairnflow as cf
from cairnflow.ids import default_ids
from cairnflow_postgres import PostgresStore, _dialect

LISTINGS = ("runs_state", "runs_queue", "runs_workflow", "runs_overdue")
"""The runs' non-unique indexes a new run writes: the listings by state, queue and workflow,
and the active runs' deadlines."""

STEP_KEYS = ("steps_run_name", "steps_pkey")
"""The steps' unique ``(run_id, name)`` constraint (every per-run statement leads with it) and
their primary key, the id (every statement on one step finds it by id)."""


def _noop(ctx: cf.StepContext, data: Any) -> None:
    return None


def _store(url: str, made: list[str], drop: tuple[str, ...] = ()) -> tuple[str, PostgresStore]:
    prefix = "bp" + uuid.uuid4().hex[:6] + "_"
    made.append(prefix)
    store = PostgresStore(url, table_prefix=prefix)
    store.migrate()
    with psycopg.connect(url, autocommit=True) as conn:
        for index in drop:
            if index in STEP_KEYS:  # a constraint's index goes with its constraint
                conn.execute(f'ALTER TABLE "{prefix}steps" DROP CONSTRAINT "{prefix}{index}"')
            else:
                conn.execute(f'DROP INDEX "{prefix}{index}"')
    return prefix, store


def _capture(client: cf.Client, size: int) -> list[tuple[Any, Any]]:
    """The ``(runs statement, steps statement)`` of each chunk of one ``enqueue_many``."""
    seen: list[tuple[str, Any]] = []
    original = _dialect.PostgresDialect.batch_insert

    def spy(self: Any, insert: Any, rows: Any) -> Any:
        statement = original(self, insert, rows)
        seen.append((insert.table, statement))
        return statement

    _dialect.PostgresDialect.batch_insert = spy  # type: ignore[method-assign]
    try:
        client.enqueue_many(cf.Job("noop", i) for i in range(size))
    finally:
        _dialect.PostgresDialect.batch_insert = original  # type: ignore[method-assign]
    pairs = list(zip(seen[::2], seen[1::2], strict=True))
    if not pairs or any("runs" not in r or "steps" not in s for (r, _), (s, _) in pairs):
        raise SystemExit(f"expected a runs and a steps statement a chunk, got {seen!r:.200}")
    return [(runs, steps) for (_, runs), (_, steps) in pairs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=60, help="batches of each variant")
    parser.add_argument("--batch", type=int, default=500, help="runs a batch")
    parser.add_argument(
        "--each",
        action="store_true",
        help="also without each listing index (and each of the steps' keys), one at a time",
    )
    args = parser.parse_args()
    engine = _engines.load_or_exit("postgres", Path(tempfile.gettempdir()))
    url = engine.url
    made: list[str] = []
    full_prefix, full = _store(url, made)
    lean_prefix, lean = _store(url, made, LISTINGS)
    # --each: one namespace per index, without that index alone.
    each = (*LISTINGS, *STEP_KEYS) if args.each else ()
    singles = {index: _store(url, made, (index,)) for index in each}
    client = cf.Client(full)
    client.register(cf.Workflow("noop", steps=[cf.Step("only", _noop)]))
    chunks = _capture(client, args.batch)
    payloads = [p for (_, runs), _ in chunks for p in runs[-1]]
    # The raw loop's table and loop: nox -s bench's baseline (bench-peers' raw loop).
    baseline = Baseline(engine, "bpraw" + uuid.uuid4().hex[:6] + "_")
    conn = psycopg.connect(url, autocommit=True)
    try:

        def replay(prefix: str, steps: bool = True) -> None:
            conn.execute("BEGIN")
            with conn.pipeline():
                for (runs_sql, runs_params), (steps_sql, steps_params) in chunks:
                    count = len(runs_params[-1])
                    run_ids = default_ids("run", count)
                    conn.execute(
                        runs_sql.replace(full_prefix, prefix),
                        (*runs_params[:-2], run_ids, runs_params[-1]),
                    )
                    if steps:
                        conn.execute(
                            steps_sql.replace(full_prefix, prefix),
                            (*steps_params[:-2], default_ids("step", count), run_ids),
                        )
                conn.execute("COMMIT")

        def raw_unnest() -> None:
            conn.execute(
                f"INSERT INTO {baseline.t} (status, payload, due_at) SELECT 'ready', p, %b::bigint "
                "FROM unnest(%b::bytea[]) AS batch (p)",
                (time.time_ns(), payloads),
            )

        variants: dict[str, Callable[[], Any]] = {
            "raw loop (executemany, bench-peers')": lambda: baseline.enqueue(
                args.batch, args.batch
            ),
            "enqueue_many, end to end": lambda: client.enqueue_many(
                cf.Job("noop", i) for i in range(args.batch)
            ),
            "its statements alone (run + step rows)": lambda: replay(full_prefix),
            "the same without the runs' listing indexes": lambda: replay(lean_prefix),
            "the runs' statement alone (one row a run)": lambda: replay(full_prefix, False),
            "raw table, one unnest statement": raw_unnest,
        }
        for index, (prefix, _) in singles.items():
            variants[f"the statements without {index} alone"] = lambda p=prefix: replay(p)
        times: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for turn in range(args.pairs):
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                started = time.perf_counter()
                variants[name]()
                times[name].append(time.perf_counter() - started)
        rates = {name: args.batch * len(t) / sum(t) for name, t in times.items()}
        base = rates[names[0]]
        print(f"{args.pairs} batches of {args.batch} each, rotating:")
        for name, rate in rates.items():
            median = statistics.median(times[name]) * 1000
            print(
                f"  {name:45s} {rate:9,.0f}/s  {rate / base:5.2f}x  (median batch {median:.1f} ms)"
            )
    finally:
        conn.close()
        baseline.close()
        full.close()
        lean.close()
        for _, single in singles.values():
            single.close()
        for prefix in made:
            engine.drop(prefix)


if __name__ == "__main__":
    main()
