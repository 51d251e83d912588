"""The litestore table layout and its migrations.

Three tables per prefix, plus a ledger:

* ``<p>runs``: one row per run; ``state`` is ``active`` or the final status;
  ``steps_left`` counts unfinished steps, so the success that brings it to
  zero finishes the run in the same transaction.
* ``<p>steps``: one row per step of a run, with its workflow, queue and
  priority copied in so a claim reads one table; ``parents_left`` counts
  unfinished parents (the fan-in counter); ``token`` is the lease token that
  fences every transition of a running attempt.
* ``<p>signals``: signals kept for a wait that is not waiting yet, oldest first.
* ``<p>meta``: the schema version, read under the write lock.

The idempotency key is unique per workflow among *active* runs only: a
partial unique index, so finishing a run releases its key in the same UPDATE.
"""

from __future__ import annotations

__all__ = ["LATEST_SCHEMA", "MIGRATIONS", "meta_table"]


def meta_table(p: str) -> str:
    """The ledger table, created before the version is read."""
    return f'CREATE TABLE IF NOT EXISTS "{p}meta" (name TEXT PRIMARY KEY, value TEXT NOT NULL)'


def _v1(p: str) -> list[str]:
    return [
        f"""CREATE TABLE "{p}runs" (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            workflow TEXT NOT NULL,
            queue TEXT NOT NULL,
            priority INTEGER NOT NULL,
            payload BLOB NOT NULL,
            idem_key TEXT,
            labels TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            state TEXT NOT NULL,
            finished_at INTEGER,
            error TEXT,
            steps_left INTEGER NOT NULL
        )""",
        f"""CREATE UNIQUE INDEX "{p}runs_live_key" ON "{p}runs" (workflow, idem_key)
            WHERE idem_key IS NOT NULL AND state = 'active'""",
        f'CREATE INDEX "{p}runs_workflow" ON "{p}runs" (workflow, seq)',
        f"""CREATE TABLE "{p}steps" (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            name TEXT NOT NULL,
            position INTEGER NOT NULL,
            kind TEXT NOT NULL,
            workflow TEXT NOT NULL,
            queue TEXT NOT NULL,
            priority INTEGER NOT NULL,
            parents TEXT NOT NULL,
            children TEXT NOT NULL,
            parents_left INTEGER NOT NULL,
            status TEXT NOT NULL,
            due_at INTEGER,
            attempt INTEGER NOT NULL DEFAULT 0,
            failures INTEGER NOT NULL DEFAULT 0,
            reclaims INTEGER NOT NULL DEFAULT 0,
            token TEXT,
            lease_until INTEGER,
            node TEXT,
            signal TEXT,
            output BLOB,
            error TEXT,
            progress BLOB,
            started_at INTEGER,
            finished_at INTEGER,
            heartbeat_at INTEGER,
            UNIQUE (run_id, name)
        )""",
        f'CREATE INDEX "{p}steps_due" ON "{p}steps" (status, due_at)',
        f'CREATE INDEX "{p}steps_lease" ON "{p}steps" (status, lease_until)',
        f'CREATE UNIQUE INDEX "{p}steps_token" ON "{p}steps" (token) WHERE token IS NOT NULL',
        f"""CREATE TABLE "{p}signals" (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL,
            name TEXT NOT NULL,
            payload BLOB NOT NULL
        )""",
        f'CREATE INDEX "{p}signals_run" ON "{p}signals" (run_id, name, seq)',
    ]


MIGRATIONS = ((1, _v1),)
"""Every schema version, in order, with the statements that make it."""

LATEST_SCHEMA = MIGRATIONS[-1][0]
