"""How many round trips an enqueue takes, read from libpq's trace of the protocol.

An enqueue sends the run row, its steps and the COMMIT together in pipeline
mode. psycopg (3.2) adds two short trips around them: in pipeline mode it syncs
right after the BEGIN it opens the transaction with (to learn its status), and
again when the pipeline block ends, after the COMMIT's own sync. So an enqueue
or a batch is three round trips: the BEGIN, everything else, an empty sync.
Counted, never timed: a change that adds a round trip fails here instead of
showing up as noise in a benchmark.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from psycopg.pq import Trace

import cairnflow as cf
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)

ROUND_TRIPS = 3
"""BEGIN; the inserts and the COMMIT; the pipeline's closing sync (see the docstring)."""


def _round_trips(store: PostgresStore, trace: Path, action: Callable[[], object]) -> int:
    """Run ``action`` on ``store`` (a pool of one connection) and count its round trips.

    A round trip is a run of messages the client sent (``F`` lines of the trace)
    followed by the server's answer (``B`` lines): in pipeline mode many
    statements travel in one run, and their answers come back in one.
    """
    with trace.open("w") as out:
        with store.pool.connection() as conn:
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        try:
            action()
        finally:
            with store.pool.connection() as conn:
                conn.pgconn.untrace()
    directions = [line[:1] for line in trace.read_text().splitlines() if line[:1] in "FB"]
    return sum(1 for turn in itertools.pairwise(directions) if turn == ("F", "B"))


def _noop_chain() -> cf.Workflow:
    wf = cf.Workflow("chain")
    first = wf.step(lambda ctx, data: None, name="first")
    wf.step(lambda ctx, data: None, name="second", after=[first])
    return wf


@pytest.mark.skipif(not hasattr(Trace, "SUPPRESS_TIMESTAMPS"), reason="needs libpq 14 traces")
def test_an_enqueue_is_three_round_trips(
    make_store: Callable[..., PostgresStore], tmp_path: Path
) -> None:
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.enqueue("chain", 1)  # the pool's connection is open and checked
    trace = tmp_path / "trace"
    assert _round_trips(store, trace, lambda: client.enqueue("chain", 2)) == ROUND_TRIPS, (
        trace.read_text()
    )
    jobs = [cf.Job("chain", i) for i in range(50)]
    assert _round_trips(store, trace, lambda: client.enqueue_many(jobs)) == ROUND_TRIPS, (
        trace.read_text()
    )
    before = store.stats.snapshot()["statements"]
    client.enqueue_many(jobs)
    # One statement per table for the whole batch.
    assert store.stats.snapshot()["statements"] - before == 2
