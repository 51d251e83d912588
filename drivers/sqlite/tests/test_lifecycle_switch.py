"""The lifecycle triggers exist only while a subscription wants them (migration 024, #20).

The kit proves what subscribers receive; these tests prove the switch itself, on
the file's schema: no trigger without a subscription, each trigger with the
channels that need it, gone with the last, and back after a ``migrate`` or a
subscription renewed when something dropped them (a migration applied by hand).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import cairnflow as cf
from cairnflow_sqlite import SQLiteStore


def triggers(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    return {name for (name,) in rows if "lifecycle" in name}


def events(store: SQLiteStore, channel: str = "events") -> list[str]:
    now = time.time_ns()
    found = store.claim_lifecycle(
        channel, None, token="t", lease_until=now + 60 * 10**9, now=now, limit=100
    )
    return [event.kind for event in found]


def finish_one(store: SQLiteStore, fail: bool = False) -> None:
    def step(ctx: cf.StepContext, payload: object) -> object:
        if fail:
            raise ValueError("no")
        return payload

    wf = cf.Workflow("w", steps=[cf.Step("only", step, retry=cf.RetryPolicy(max_attempts=1))])
    with cf.Client(store, poll_interval=0.05) as client:
        client.register(wf)
        client.wait(client.enqueue("w", 1), timeout=30)


def test_no_subscription_no_trigger_and_no_event(tmp_path: Path) -> None:
    db = tmp_path / "cairn.db"
    store = SQLiteStore(db)
    store.migrate()
    assert triggers(db) == set()
    finish_one(store)
    assert events(store) == []
    store.close()


def test_each_trigger_lives_while_a_channel_wants_it(tmp_path: Path) -> None:
    db = tmp_path / "cairn.db"
    store = SQLiteStore(db)
    store.migrate()
    store.subscribe_lifecycle("on_failure", "w", time.time_ns())
    assert triggers(db) == {"cf_lifecycle_run"}  # on_failure reads run ends only
    store.subscribe_lifecycle("events", "", time.time_ns())
    assert triggers(db) == {"cf_lifecycle_run", "cf_lifecycle_step"}
    finish_one(store)
    assert events(store) == ["run.started", "step.started", "step.succeeded", "run.succeeded"]

    assert store.unsubscribe_lifecycle("events", "") == 4  # its rows, leased but not acked
    assert triggers(db) == {"cf_lifecycle_run"}
    finish_one(store, fail=True)
    assert events(store, "on_failure") == ["run.failed"]
    store.unsubscribe_lifecycle("on_failure", "w")
    assert triggers(db) == set()
    store.close()


def test_triggers_dropped_by_hand_come_back_with_migrate_or_a_subscription(
    tmp_path: Path,
) -> None:
    db = tmp_path / "cairn.db"
    store = SQLiteStore(db)
    store.migrate()
    store.subscribe_lifecycle("events", "w", time.time_ns())
    drop = 'DROP TRIGGER "cf_lifecycle_step"; DROP TRIGGER "cf_lifecycle_run";'
    with sqlite3.connect(db) as conn:  # what migration 024, applied by hand, does
        conn.executescript(drop)
    assert triggers(db) == set()
    assert store.migrate() == []
    assert triggers(db) == {"cf_lifecycle_run", "cf_lifecycle_step"}

    with sqlite3.connect(db) as conn:
        conn.executescript(drop)
    store.subscribe_lifecycle("events", "w", time.time_ns())  # a client starting again
    assert triggers(db) == {"cf_lifecycle_run", "cf_lifecycle_step"}
    finish_one(store)
    assert "run.succeeded" in events(store)
    store.close()


def test_a_second_store_on_the_file_sees_the_switch(tmp_path: Path) -> None:
    """A process that prepared its statements before a subscription writes its events
    after it: SQLite prepares a statement again when the schema changed under it."""
    db = tmp_path / "cairn.db"
    worker, other = SQLiteStore(db), SQLiteStore(db)
    worker.migrate()
    finish_one(worker)  # its statements prepared and cached without the triggers
    other.subscribe_lifecycle("events", "w", time.time_ns())
    finish_one(worker)
    assert events(other) == ["run.started", "step.started", "step.succeeded", "run.succeeded"]
    worker.close()
    other.close()
