"""Values SQLite will not take: over its length limit, or out of a 64-bit integer's range.

sqlite3 refuses them itself, at once, before anything is written; the store sorts that
as a refusal of the value (``cf.ValueRefused`` with SQLite's reason), never retried.
The oversized values are ``bytes(n)``: zeros the operating system maps lazily, so a
gigabyte costs no memory until it is read, and a refused value is never read.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow_sqlite import SQLiteStore

_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)


def too_long() -> int:
    """One byte over the longest string or blob this SQLite takes (1e9 unless built otherwise)."""
    conn = sqlite3.connect(":memory:")
    try:
        return conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) + 1
    finally:
        conn.close()


class RawBytes:
    """JSON, except that bytes are stored as they are (so a step can return a lazy gigabyte)."""

    name = "raw-bytes"
    _json = cf.JSONCodec()

    def encode(self, value: Any) -> bytes:
        return value if isinstance(value, bytes) else self._json.encode(value)

    def decode(self, data: bytes) -> Any:
        return self._json.decode(data)


def make(ctx: cf.StepContext, n: int) -> Any:
    """``n`` zero bytes when ``n`` is over SQLite's limit, else ``n`` itself."""
    return bytes(n) if n >= too_long() else n


@pytest.fixture
def store(db: Path) -> SQLiteStore:
    made = SQLiteStore(str(db))
    made.migrate()
    return made


def test_an_output_sqlite_refuses_fails_its_step_at_once_while_the_others_succeed(
    store: SQLiteStore,
) -> None:
    retry = cf.RetryPolicy(max_attempts=3, backoff=_QUICK)
    wf = cf.Workflow("sized", steps=[cf.Step("make", make, retry=retry)])
    with cf.Client(store, workers=8, poll_interval=0.05, codec=RawBytes()) as client:
        client.register(wf)
        refused, *others = [client.enqueue("sized", n) for n in (too_long(), 1, 2, 3, 4, 5)]
        info = client.wait(refused, timeout=30)
        statuses = [client.wait(ref, timeout=30).status for ref in others]
    assert info.status is cf.Status.FAILED
    step = info.steps["make"]
    # Failed by the attempt that made it, once: no retry can help, and none was made.
    assert (step.attempts, step.failures, step.reclaims) == (1, 1, 0)
    assert step.error is not None and step.error.type == "ValueRefused"
    assert step.error.message == "sqlite store refused a value: DataError: string or blob too big"
    assert statuses == [cf.Status.SUCCEEDED] * 5


def test_an_enqueue_sqlite_refuses_writes_nothing(store: SQLiteStore) -> None:
    client = cf.Client(store, codec=RawBytes())
    client.register(cf.Workflow("sized", steps=[cf.Step("make", make)]))
    with pytest.raises(cf.ValueRefused, match="string or blob too big"):
        client.enqueue_many([cf.Job("sized", 1), cf.Job("sized", bytes(too_long()))])
    assert client.runs().runs == ()
    assert client.enqueue("sized", 1)  # the store goes on as before


def test_an_outcome_sqlite_refuses_fails_its_attempt_at_once_with_its_reason(
    store: SQLiteStore,
) -> None:
    wf = cf.Workflow("far")

    @wf.step(retry=cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
    def later(ctx: cf.StepContext, data: Any) -> None:
        raise cf.Snooze(1e12)  # 31,700 years from now: past 64 bits of nanoseconds (2262)

    with cf.Client(store, poll_interval=0.05) as client:
        client.register(wf)
        info = client.wait(client.enqueue("far"), timeout=30)
    assert info.status is cf.Status.FAILED
    step = info.steps["later"]
    assert (step.attempts, step.failures, step.reclaims) == (1, 1, 0)
    assert step.error is not None and step.error.type == "ValueRefused"
    assert step.error.message == (
        "sqlite store refused a value: OverflowError: "
        "Python int too large to convert to SQLite INTEGER"
    )
