"""``Cap.SERVERS`` (#17): every started client keeps a heartbeat row; live and dead are listed.

A client started on the test's store must appear with what it is (node, host,
pid, queues, workers, version), its row seen again at its heartbeats, and
marked stopped by a clean stop. A row whose writer stopped beating (a killed
client never marks its row) is dead once it missed its beats, and day-old rows
are pruned.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from collections.abc import Callable

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import MISSED_BEATS, ServerList, ServerRecord, Servers

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["ServerTests"]


class ServerTests:
    """``Cap.SERVERS``: heartbeat rows of started clients, judged live or dead."""

    @proves(Cap.SERVERS)
    def test_a_started_client_is_listed_live_then_stopped(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-served", steps=[cf.Step("a", lambda c, d: d)])
        reader = cairnflow_kit.client(wf, start=False)
        assert reader.servers().live == ()  # a client never started records nothing
        served = cairnflow_kit.client(wf, workers=3)
        first = _until(reader, lambda s: _row(s.live, served.node_id))
        assert (first.host, first.pid, first.workers) == (socket.gethostname(), os.getpid(), 3)
        assert first.queues == ("default",)
        assert first.version == cf.__version__
        assert first.started_at <= first.seen_at
        assert first.stopped_at is None
        # Seen again at its next heartbeats (a third of its lease), same start.
        later = _until(reader, lambda s: _newer(s.live, served.node_id, first.seen_at))
        assert later.started_at == first.started_at
        served.stop()
        listing = reader.servers()
        assert _row(listing.live, served.node_id) is None
        stopped = _row(listing.dead, served.node_id)
        assert stopped is not None
        assert stopped.stopped_at is not None
        assert stopped.stopped_at >= later.seen_at

    @proves(Cap.SERVERS)
    def test_a_server_that_missed_its_beats_is_dead_and_old_rows_are_pruned(
        self, cairnflow_kit: Kit
    ) -> None:
        store = cairnflow_kit.store
        assert isinstance(store, Servers)
        reader = cairnflow_kit.client(start=False)
        now = _now(reader)
        second = 10**9
        beating = ServerRecord(
            node="kit-beating", host="h1", pid=11, queues=("mail", "default"), workers=2,
            version="0.0.1", started_at=now - 60 * second, seen_at=now, beat_every=5 * second,
        )  # fmt: skip
        silent = dataclasses.replace(
            beating, node="kit-silent", seen_at=now - (MISSED_BEATS + 1) * 5 * second
        )
        ancient = dataclasses.replace(beating, node="kit-ancient", seen_at=now - 48 * 3600 * second)
        for row in (beating, silent, ancient):
            store.record_server(row)
        store.record_server(dataclasses.replace(beating, workers=4))  # replaced, not added
        listing = reader.servers(hours=1)
        assert [r.node for r in listing.live] == ["kit-beating"]
        assert listing.live[0].workers == 4
        assert listing.live[0].queues == ("mail", "default")
        assert [r.node for r in listing.dead] == ["kit-silent"]  # ancient is older than 1h
        assert [r.node for r in reader.servers(hours=72).dead] == ["kit-silent", "kit-ancient"]
        assert store.prune_servers(before=now - 24 * 3600 * second, limit=10) == 1
        assert [r.node for r in reader.servers(hours=72).dead] == ["kit-silent"]
        store.stop_server("kit-beating", now)
        assert reader.servers().live == ()


def _now(client: cf.Client) -> int:
    return client._state.now()  # the client's scheduling clock (the kit may run a fake one)


def _row(rows: tuple[ServerRecord, ...], node: str) -> ServerRecord | None:
    return next((r for r in rows if r.node == node), None)


def _newer(rows: tuple[ServerRecord, ...], node: str, seen: int) -> ServerRecord | None:
    row = _row(rows, node)
    return row if row is not None and row.seen_at > seen else None


def _until(reader: cf.Client, found: Callable[[ServerList], ServerRecord | None]) -> ServerRecord:
    """Poll ``reader.servers()`` (bounded) until ``found`` returns a row."""
    pause = threading.Event()
    for _ in range(int(TIMEOUT / 0.05)):
        row = found(reader.servers())
        if row is not None:
            return row
        pause.wait(0.05)
    raise AssertionError(f"no such server row within {TIMEOUT}s: {reader.servers()}")
