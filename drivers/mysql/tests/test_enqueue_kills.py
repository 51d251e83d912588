"""Enqueues while the client's connections are killed: every call makes exactly one run.

A connection killed while its COMMIT is under way may have committed or not
(on MariaDB it often has); the client cannot tell, so it sends the write again
under the run ids it made before writing, and a retry that finds its runs
written returns them instead of writing them again (the store counts those:
``stats.landed``). Four threads enqueue (with keys, without, and in batches)
while a killer ``KILL``s every connection this test's store opened, by the ids
those connections reported (``CONNECTION_ID()``), every 20 to 50 ms: no other
session of the shared server is touched.
"""

from __future__ import annotations

import threading
from typing import Any

import pymysql
import pytest

import cairnflow as cf
from cairnflow.testing import enqueue_through_kills, runs_by_marker
from cairnflow_mysql import MySQLStore

pytestmark = pytest.mark.timeout(180)

Server = Any  # conftest.Server: the server under test and raw connections to it

LANDED = 3
"""Commits the kills must catch landing, for the test to have proven the retry finds them
(the storm goes on until it has, 60 seconds at most)."""

UNKNOWN_THREAD = 1094
"""KILL of a connection that has closed already."""


class Recording(MySQLStore):
    """The MySQL store, remembering the id of every connection it opens (to kill them)."""

    def __init__(self, url: str, **options: Any) -> None:
        self.opened: set[int] = set()
        self.opened_lock = threading.Lock()
        super().__init__(url, **options)

    def _connect(self) -> Any:
        conn = super()._connect()
        with self.opened_lock:
            self.opened.add(int(conn.thread_id()))
        return conn

    def take_opened(self) -> set[int]:
        """The ids opened since the last call (a killed id is never killed twice)."""
        with self.opened_lock:
            taken, self.opened = self.opened, set()
        return taken


def marked() -> cf.Workflow:
    wf = cf.Workflow("marked")
    wf.step(lambda ctx, d: d, name="one")
    wf.step(lambda ctx, d: d, name="two", after=["one"])
    return wf


def test_every_enqueue_makes_exactly_one_run_while_connections_are_killed(
    server: Server, prefix: str
) -> None:
    store = Recording(server.url, table_prefix=prefix, pool_size=8)
    admin = server.connect()
    try:
        store.migrate()
        client = cf.Client(store, notifier=False)
        client.register(marked())

        def kill() -> int:
            killed = 0
            with admin.cursor() as cursor:
                for connection_id in store.take_opened():
                    try:
                        cursor.execute(f"KILL CONNECTION {connection_id:d}")
                        killed += 1
                    except pymysql.err.OperationalError as error:
                        if error.args[0] != UNKNOWN_THREAD:
                            raise
            return killed

        def landed() -> int:
            return store.stats.snapshot()["landed"]

        storm = enqueue_through_kills(
            client, "marked", kill, seconds=4.0, until=lambda: landed() >= LANDED, longest=60.0
        )
        assert storm.kills > 0
        failed = storm.failed
        assert not failed, f"{len(failed)} of {storm.calls} calls raised: {failed[:3]}"
        runs = runs_by_marker(client, "marked")
        assert set(runs) == set(storm.returned)
        twice = {marker: [r.id for r in found] for marker, found in runs.items() if len(found) != 1}
        assert not twice, f"markers with more than one run: {twice}"
        for marker, (info,) in runs.items():
            assert info.id == storm.returned[marker].id
            assert set(info.steps) == {"one", "two"}
        assert landed() >= LANDED, f"{storm.kills} kills caught {landed()} commits landing"
    finally:
        store.close()
