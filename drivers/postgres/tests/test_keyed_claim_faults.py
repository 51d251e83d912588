"""A keyed claim whose connection is lost before its COMMIT, or whose COMMIT's reply is lost.

On Postgres a keyed claim sends the moves of its keys' counts and its lease without
reading them; they travel with the COMMIT (after an outcome batch, in the same
round trip), and its rows are read after. A claim cut off before its COMMIT must
leave every key's count as it was; one whose COMMIT landed unseen holds leases
nobody runs, which expire and are reclaimed, their keys' counts then given back.
Either way the key's limit holds, counted from inside the steps, every run
finishes, and every key's count is back to zero at the end.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.testing import faults, wait_until
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(240)

RUNS = 48
KEYS = 3
LIMIT = 2


def test_keyed_claims_cut_off_at_their_commit_keep_every_key_within_its_limit(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store(notify=False)
    lock = threading.Lock()
    running: collections.Counter[str] = collections.Counter()
    most: collections.Counter[str] = collections.Counter()

    def body(ctx: Any, n: int) -> int:
        key = f"k{n % KEYS}"
        with lock:
            running[key] += 1
            most[key] = max(most[key], running[key])
        try:
            time.sleep(0.02)  # long enough for several attempts of a key to overlap
        finally:
            with lock:
                running[key] -= 1
        return n

    wf = cf.Workflow("keyed", concurrency=cf.Concurrency(key=lambda n: f"k{n % KEYS}", limit=LIMIT))
    wf.step(body, name="only", retry=cf.RetryPolicy(max_attempts=20))
    client = cf.Client(store, workers=6, poll_interval=0.05, lease=1.5, notifier=False)
    client.register(wf)
    refs = client.enqueue_many([cf.Job("keyed", i) for i in range(RUNS)])
    # Likely enough to fire in the 15-30 write transactions a run makes on a loaded machine
    # (at 0.15 the commit fault missed them all once in CI: 0.85**15 is 9%); #8 caps both.
    spec = "claim.before_commit=raise@0.5#8,sql.after_commit=raise@0.5#8"
    with faults(spec) as armed:
        client.start()
        try:
            wait_until(
                lambda: all(client.info(ref).status == "succeeded" for ref in refs),
                timeout=180,
                what="every keyed run to succeed through the faults",
            )
        finally:
            client.stop(timeout=10)
        fired = {point: armed.fired(point) for point in ("claim.before_commit", "sql.after_commit")}
    assert all(fired.values()), f"a fault never fired: {fired}"
    assert max(most.values()) <= LIMIT, f"a key ran past its limit of {LIMIT}: {dict(most)}"
    with store.pool.connection() as conn:
        counts = conn.execute(
            f"SELECT name, running FROM {store.tables.limits} WHERE kind = 'key' ORDER BY name"
        ).fetchall()
    assert counts == [(f"k{i}", 0) for i in range(KEYS)], counts
