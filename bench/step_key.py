"""What the steps' id index costs a run's claim and success, against steps keyed by their run
and name (#20, Postgres).

Every update of a step writes a new entry into each index of the steps whose predicate the new
row matches (no update of a step is HOT: its status is in the ready and running indexes'
predicates), so the steps' id index, the primary key, takes an entry at the enqueue, at the
claim and at the success. This measures the claim's and the success's statements, with their
triggers (the step history), on two namespaces of queued one-step runs::

    python bench/step_key.py [--runs 8000] [--batch 8]

- ``id``: the schema as shipped; the claim's ``UPDATE`` as the engine sends it (its candidates
  by the ready index, joined back by id), the successes by id and lease;
- ``run_name``: the same tables with the steps' primary key moved to ``(run_id, name)`` and no
  index on the id; the claim's candidates joined back by run and name, the successes found
  by run, name and lease.

Each batch claims ``batch`` steps in one transaction, then marks them succeeded and their runs
finished in another (as the engine's group commit does for one client), the two namespaces in
turn batch by batch, ``synchronous_commit`` off (the statements' work, not the disk's), each
claim under the planner settings of the engine's claims pool (``CLAIM_SETTINGS``; without them,
until the eighteenth session, the claim sorted every ready step, a cost that grew with the
queue). Prints the median microseconds a step for each, and their ratio. Needs
``CAIRNFLOW_BENCH_POSTGRES_URL`` (else ``CAIRNFLOW_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _apps
import _engines
import psycopg

import cairnflow as cf
from cairnflow.sql import Queries, Tables
from cairnflow_postgres import PostgresDialect, PostgresStore
from cairnflow_postgres._dialect import CLAIM_SETTINGS

VARIANTS = ("id", "run_name")


def queued(
    url: str, runs: int, made: list[str], variant: str = "id", version: int | None = None
) -> str:
    """A new namespace (its prefix, added to ``made``) of ``runs`` queued one-step runs, in
    ``variant``'s schema; migrated up to ``version`` (all by default)."""
    prefix = "sk" + uuid.uuid4().hex[:6] + "_"
    made.append(prefix)
    store = PostgresStore(url, table_prefix=prefix)
    if version is not None:
        store.migrations = store.migrations[:version]
    store.migrate()
    client = cf.Client(store)
    client.register(_apps.noop())
    for start in range(0, runs, 1000):
        client.enqueue_many(cf.Job("noop") for _ in range(min(1000, runs - start)))
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        if variant == "run_name":
            conn.execute(
                f'ALTER TABLE "{prefix}steps" DROP CONSTRAINT "{prefix}steps_pkey", '
                f'DROP CONSTRAINT "{prefix}steps_run_name", ADD PRIMARY KEY (run_id, name)'
            )
        conn.execute(f'VACUUM ANALYZE "{prefix}steps", "{prefix}runs"')
    return prefix


def _statements(prefix: str, variant: str) -> tuple[str, str, str]:
    """The claim, the successes and the runs' end, in psycopg's paramstyle."""
    dialect = PostgresDialect()
    queries = Queries(Tables.build(prefix, None, dialect.quote), dialect)
    plan = queries.claim_plan(workflows=["noop"], queue="default", limit=1, claimed=("", 0, "", 0))
    claim = dialect.sql(plan.update_returning_runs[0])
    if variant == "run_name":
        claim = claim.replace(
            "s.id IN (\n            SELECT id FROM",
            "(s.run_id, s.name) IN (\n            SELECT run_id, name FROM",
        )
        assert "(s.run_id, s.name) IN" in claim, "the claim's text changed: update this bench"
    steps, runs = f'"{prefix}steps"', f'"{prefix}runs"'
    held = (
        "(run_id, name, lease_token) IN (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))"
        if variant == "run_name"
        else "(id, lease_token) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
    )
    succeed = (
        f"UPDATE {steps} SET status = 'succeeded', output = 'null'::bytea, finished_at = %s, "
        f"due_at = NULL, lease_token = NULL, lease_until = NULL "
        f"WHERE status = 'running' AND {held}"
    )
    end = (
        f"UPDATE {runs} SET state = 'succeeded', finished_at = %s, steps_left = 0 "
        f"WHERE id = ANY(%s::text[])"
    )
    return claim, succeed, end


def _batch(
    conn: psycopg.Connection[Any], variant: str, sql: tuple[str, str, str], size: int
) -> int:
    """Claim ``size`` steps and end them; the steps claimed."""
    claim, succeed, end = sql
    now = time.time_ns()
    token = uuid.uuid4().hex
    with conn.transaction():
        # The planner settings the engine's claims are made under (its claims pool's
        # sessions): the ready index walked in the claim's order, never every ready row sorted.
        conn.execute(CLAIM_SETTINGS)
        rows = conn.execute(
            claim,
            (
                token,
                now + 30 * 10**9,
                "bench",
                now,
                "default",
                "noop",
                "default",
                "default",
                "default",
                size,
            ),
        ).fetchall()
    if not rows:
        return 0
    ids = [row[0] for row in rows]
    run_ids = [row[1] for row in rows]
    names = [row[2] for row in rows]
    tokens = [token] * len(rows)
    keys = (run_ids, names, tokens) if variant == "run_name" else (ids, tokens)
    with conn.transaction():
        done = conn.execute(succeed, (now, *keys)).rowcount
        assert done == len(rows), f"{variant}: {done} of {len(rows)} successes held"
        conn.execute(end, (now, run_ids))
    return len(rows)


def in_turn(
    url: str, namespaces: dict[str, tuple[str, tuple[str, str, str]]], size: int
) -> dict[str, list[float]]:
    """Claim and end ``size`` steps of each namespace in turn (``name: (variant, statements)``)
    until one runs out, ``synchronous_commit`` off; each batch's microseconds a step."""
    took: dict[str, list[float]] = {name: [] for name in namespaces}
    with psycopg.connect(url) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.commit()
        for variant, sql in namespaces.values():  # one batch each: the plans made, pages read
            _batch(conn, variant, sql, size)
        while True:
            moved = 0
            for name, (variant, sql) in namespaces.items():
                started = time.perf_counter()
                got = _batch(conn, variant, sql, size)
                if got:
                    took[name].append((time.perf_counter() - started) / got * 1e6)
                moved += got
            if moved < size * len(namespaces):
                return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8000, help="queued runs in each namespace")
    parser.add_argument("--batch", type=int, default=8, help="steps claimed and ended together")
    args = parser.parse_args()
    engine = _engines.load_or_exit("postgres", Path(tempfile.gettempdir()))
    url = engine.url
    made: list[str] = []
    try:
        prefixes = {variant: queued(url, args.runs, made, variant) for variant in VARIANTS}
        sql = {variant: _statements(prefixes[variant], variant) for variant in VARIANTS}
        took = in_turn(url, {variant: (variant, sql[variant]) for variant in VARIANTS}, args.batch)
        medians = {variant: statistics.median(took[variant]) for variant in VARIANTS}
        for variant in VARIANTS:
            print(f"{variant:9s} {medians[variant]:7.1f} us a step ({len(took[variant])} batches)")
        print(f"run_name / id: {medians['run_name'] / medians['id']:.3f} of the time")
    finally:
        for prefix in made:
            engine.drop(prefix)


if __name__ == "__main__":
    main()
