"""Retention settings and calls checked in one place, on the memory store (``Cap.RETENTION``).

The behaviour itself (chunks, the prune lock, the archive) is the kit's
(``suite/retention.py``); here: bad settings are refused naming what is
wrong, before anything runs, and a pass stops once its lock is lost.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import PRUNE_LOCK, MemoryStore, PruneChunk


def _client(**options: Any) -> cf.Client:
    return cf.Client(cf.MemoryStore(), **options)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"prune_after": -1}, ValueError, "prune_after must be > 0 seconds"),
        ({"prune_after": "30d"}, ValueError, "prune_after must be a finite number"),
        ({"prune_after": 60, "prune_interval": 0}, ValueError, "prune_interval must be > 0"),
        ({"prune_after": 60, "prune_chunk": 0}, ValueError, "prune_chunk"),
        ({"prune_after": 60, "archive": "yes"}, TypeError, "archive must be True or False"),
        ({"archive": True}, ValueError, "give prune_after too"),
    ],
)
def test_bad_retention_settings_are_refused_naming_them(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        _client(**options)


def test_prune_after_takes_a_timedelta() -> None:
    client = _client(prune_after=timedelta(days=2), archive=True)
    assert client._state.settings.prune_after == 2 * 86_400.0
    assert client._state.settings.archive is True


def test_prune_needs_an_age_and_archived_runs_a_valid_page() -> None:
    client = _client()
    with pytest.raises(ValueError, match="prune\\(\\) needs older_than="):
        client.prune()
    with pytest.raises(ValueError, match="older_than must be"):
        client.prune(older_than=-5)
    with pytest.raises(cf.InvalidQuery, match="invalid archive cursor"):
        client.archived_runs(cursor="r12")
    with pytest.raises(ValueError, match="limit"):
        client.archived_runs(limit=0)
    assert client.prune(older_than=0) == 0  # nothing finished: nothing to prune


def test_a_pass_prunes_nothing_while_another_holds_the_lock_and_stops_when_it_loses_it() -> None:
    store = MemoryStore()
    wf = cf.Workflow("w", steps=[cf.Step("a", lambda c, d: d)])
    with cf.Client(store, poll_interval=0.05) as worker:
        worker.register(wf)
        refs = [worker.enqueue("w", i) for i in range(5)]
        for ref in refs:
            assert worker.wait(ref, timeout=10).status is cf.Status.SUCCEEDED
    client = cf.Client(store, prune_chunk=2)
    now = time.time_ns()
    assert store.take_lock(PRUNE_LOCK, "other", now=now, until=now + 3600 * 10**9)
    assert client.prune(older_than=0) is None
    assert len(client.runs().runs) == 5
    assert store.release_lock(PRUNE_LOCK, "other")

    stolen: list[int] = []
    prune_runs = store.prune_runs

    def steal_after_first(chunk: PruneChunk) -> list[str] | None:
        done = prune_runs(chunk)
        if not stolen:  # another node takes the lock over after the first chunk
            stolen.append(1)
            store._named_locks.pop(PRUNE_LOCK)
            assert store.take_lock(PRUNE_LOCK, "thief", now=now, until=now + 3600 * 10**9)
        return done

    store.prune_runs = steal_after_first  # type: ignore[method-assign]
    assert client.prune(older_than=0) == 2  # the first chunk; the rest is the thief's
    assert len(client.runs().runs) == 3
    held = store.read_lock(PRUNE_LOCK)
    assert held is not None
    assert held.token == "thief", "a pruner that lost its lock released the thief's"
