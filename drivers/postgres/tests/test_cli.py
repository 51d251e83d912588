"""``cairn pause``, ``cairn resume`` and ``cairn pauses`` against a Postgres namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import cairnflow as cf
from cairnflow_postgres import PostgresStore

StoreFactory = Callable[..., PostgresStore]


def cairn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cairnflow", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def test_a_queue_is_paused_listed_and_resumed_with_no_client_running(
    make_store: StoreFactory, postgres_url: str
) -> None:
    store = make_store()
    prefix = ["-o", f"table_prefix={store.tables.prefix}"]
    paused = cairn("pause", "queue", postgres_url, "mail", *prefix)
    assert paused.returncode == 0, paused.stdout + paused.stderr
    listed = cairn("pauses", postgres_url, "--json", *prefix)
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == ["mail"]
    assert [(p.kind.value, p.name) for p in cf.Client(store).pauses()] == [("queue", "mail")]
    assert cairn("resume", "queue", postgres_url, "mail", *prefix).returncode == 0
    assert cf.Client(store).pauses() == []
    unmigrated = cairn("pauses", postgres_url, "-o", "table_prefix=never_migrated_")
    assert unmigrated.returncode == 1
    assert "cairn migrate URL" in unmigrated.stdout + unmigrated.stderr
