"""What an enqueue sends to SQLite, read from sqlite3's trace of the statements it runs.

An enqueue is one write transaction without a read: ``BEGIN IMMEDIATE``, one
INSERT per table, ``COMMIT``. An idempotency key is guarded by the runs'
unique index, never by a SELECT before the write. Counted, never timed: a
change that adds a statement (a read before the write, a statement per row)
fails here instead of showing up as noise in a benchmark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cairnflow as cf
from cairnflow_sqlite import SQLiteStore

pytestmark = pytest.mark.timeout(120)


def _chain() -> cf.Workflow:
    wf = cf.Workflow("chain")
    first = wf.step(lambda ctx, data: None, name="first")
    wf.step(lambda ctx, data: None, name="second", after=[first])
    return wf


def _traced(store: SQLiteStore, action: object) -> list[str]:
    """The statements ``action()`` runs on ``store`` (a pool of one connection), in order.

    A statement ``executemany`` runs for many rows is traced once per row by
    sqlite3; what matters here is which statements ran, so consecutive repeats
    are kept once: ``INSERT INTO runs ... x 50`` is one INSERT of the batch.
    """
    seen: list[str] = []
    with store._connections.connection() as conn:
        conn.set_trace_callback(seen.append)
    try:
        assert callable(action)
        action()
    finally:
        with store._connections.connection() as conn:
            conn.set_trace_callback(None)
    kinds = [" ".join(statement.split()[:3]) for statement in seen]
    return [kind for at, kind in enumerate(kinds) if at == 0 or kinds[at - 1] != kind]


def test_an_enqueue_is_one_transaction_without_a_read(db: Path) -> None:
    store = SQLiteStore(db, pool_size=1)
    store.migrate()
    client = cf.Client(store)
    client.register(_chain())
    client.enqueue("chain", 0)
    runs, steps, labels = (
        f"INSERT INTO {table}" for table in ('"cf_runs"', '"cf_steps"', '"cf_run_labels"')
    )
    written = ["BEGIN IMMEDIATE", runs, steps, "COMMIT"]
    assert _traced(store, lambda: client.enqueue("chain", 1)) == written
    assert _traced(store, lambda: client.enqueue("chain", 2, key="k")) == written
    jobs = [cf.Job("chain", n) for n in range(50)]
    assert _traced(store, lambda: client.enqueue_many(jobs)) == written
    # Labels are one more INSERT, for the whole batch.
    labelled = [cf.Job("chain", n, labels={"n": str(n)}) for n in range(50)]
    assert _traced(store, lambda: client.enqueue_many(labelled)) == [*written[:3], labels, "COMMIT"]
    # A key held by an unfinished run: the INSERT is refused, nothing is written, and only
    # then is the holder read, to name it.
    with pytest.raises(cf.DuplicateRun) as caught:
        client.enqueue_many([cf.Job("chain", 3, key="free"), cf.Job("chain", 4, key="k")])
    assert caught.value.run_id is not None
    assert client.enqueue("chain", 5, key="free").id  # nothing of the refused batch holds it
    store.close()
