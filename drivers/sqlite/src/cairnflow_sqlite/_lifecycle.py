"""The lifecycle triggers on SQLite, which exist only while a subscription wants them.

Migration 021 made them permanent, each looking up ``lifecycle_subs`` at every
transition; migration 024 dropped them, and the store creates them here, in
the transaction that records a subscription, and drops them in the one that
removes the last (:meth:`SQLiteDialect.switch_lifecycle`). On SQLite anyone who
can write the file may run DDL, and writers take turns, so every transition
commits either before the switch or after it. What the permanent triggers cost
with nobody subscribed, in a loop of claim, success and run end of 8 steps a
transaction (16,000 steps, synchronous off, the variants interleaved batch by
batch, 2026-12-03, #20): 52.6 µs a step with them, 37.3 without; W2 x1, 10,000
runs, four rounds alternating: 6,817 runs/s with them, 8,482 without (median).

``lifecycle_step`` serves the channel ``events`` only; ``lifecycle_run`` every
channel (``on_failure`` wants ``run.failed``). Their text is read from migration
021, which is never edited (the ledger checks its checksum), so the triggers
created here are the ones it created.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from importlib import resources

from cairnflow.sql import split_statements

__all__ = ["switch_statements"]

TRIGGERS = ("lifecycle_step", "lifecycle_run")
DROP_TRIGGER = 'DROP TRIGGER IF EXISTS "{p}{name}"'


@functools.cache
def _creates() -> dict[str, str]:
    """Each trigger's ``CREATE TRIGGER IF NOT EXISTS`` template, from migration 021."""
    migration = resources.files("cairnflow_sqlite").joinpath("migrations/021_lifecycle.sql")
    found = {}
    for statement in split_statements(migration.read_text(encoding="utf-8")):
        for name in TRIGGERS:
            head = f'CREATE TRIGGER "{{p}}{name}"'
            if head in statement:
                found[name] = statement.replace(head, f'CREATE TRIGGER IF NOT EXISTS "{{p}}{name}"')
    if set(found) != set(TRIGGERS):
        raise RuntimeError(f"migration 021 creates {sorted(found)}, not {list(TRIGGERS)}")
    return found


def switch_statements(tables: Mapping[str, str], channels: Collection[str]) -> list[str]:
    """The statements that make the triggers match ``channels`` (those subscribed to):
    each trigger created if wanted (a no-op if it exists), else dropped (one if not)."""
    wanted = {"lifecycle_step": "events" in channels, "lifecycle_run": bool(channels)}
    return [
        _creates()[name].format_map(tables)
        if wanted[name]
        else DROP_TRIGGER.format_map({**tables, "name": name})
        for name in TRIGGERS
    ]
