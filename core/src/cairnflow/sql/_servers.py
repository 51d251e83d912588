"""The ``Servers`` facet in SQL (``Cap.SERVERS``): one heartbeat row per client node.

A heartbeat is an UPDATE of the node's row by its primary key, and an INSERT
the first time (the row's absence seen by the UPDATE's count; a second writer
of the same node refused by the primary key runs again and updates). Reading
and pruning go by the ``seen_at`` index: a listing reads the rows seen lately,
never the table of every client that ever ran.
"""

from __future__ import annotations

import json

from ..store import ServerRecord
from . import _statements as s
from ._dialect import Cursor
from ._parts import Context, Part, chunks
from ._rows import to_text

__all__ = ["ServerRows"]

_COLUMNS = "node, host, pid, queues, workers, version, started_at, seen_at, beat_every, stopped_at"

UPDATE_SERVER = """
            UPDATE {servers} SET host = ?, pid = ?, queues = ?, workers = ?, version = ?,
                started_at = ?, seen_at = ?, beat_every = ?, stopped_at = NULL
            WHERE node = ?"""
INSERT_SERVER = """
            INSERT INTO {servers}
                (host, pid, queues, workers, version, started_at, seen_at, beat_every, node)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""
STOP_SERVER = "UPDATE {servers} SET stopped_at = ? WHERE node = ?"
LIST_SERVERS = f"""
            SELECT {_COLUMNS} FROM {{servers}}
            WHERE seen_at >= ?
            ORDER BY seen_at DESC, node"""
PRUNABLE_SERVERS = """
            SELECT node FROM {servers} WHERE seen_at < ? ORDER BY seen_at LIMIT ?"""
DELETE_SERVERS = "DELETE FROM {servers} WHERE node IN ({nodes})"


class ServerRows(Part):
    """``record_server``, ``stop_server``, ``list_servers``, ``prune_servers``."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        values = context.tables.template()
        self._update = s.render(UPDATE_SERVER, values)
        self._insert = s.render(INSERT_SERVER, values)
        self._stop = s.render(STOP_SERVER, values)
        self._list = s.render(LIST_SERVERS, values)
        self._prunable = s.render(PRUNABLE_SERVERS, values)
        self._delete = s.render(DELETE_SERVERS, values)

    def record_server(self, server: ServerRecord) -> None:
        """Insert or replace the row of ``server.node``."""
        params = (
            server.host,
            server.pid,
            json.dumps(list(server.queues)),
            server.workers,
            server.version,
            server.started_at,
            server.seen_at,
            server.beat_every,
            server.node,
        )

        def work(cur: Cursor) -> None:
            if self._execute(cur, self._update, params).rowcount == 0:
                self._execute(cur, self._insert, params)

        self._tx.upsert(work)

    def stop_server(self, node: str, at: int) -> None:
        """Mark the row of ``node`` stopped at ``at``."""
        self._tx.change(self._stop, (at, node))

    def list_servers(self, *, seen_since: int) -> list[ServerRecord]:
        """Rows seen at or after ``seen_since``, newest seen first."""
        return [
            ServerRecord(
                node=to_text(node),
                host=to_text(host),
                pid=int(pid),
                queues=tuple(json.loads(to_text(queues))),
                workers=int(workers),
                version=to_text(version),
                started_at=int(started),
                seen_at=int(seen),
                beat_every=int(every),
                stopped_at=None if stopped is None else int(stopped),
            )
            for node, host, pid, queues, workers, version, started, seen, every, stopped in (
                self._tx.fetch(self._list, (seen_since,))
            )
        ]

    def prune_servers(self, *, before: int, limit: int) -> int:
        """Delete up to ``limit`` rows last seen before ``before``; return how many went."""
        nodes = [to_text(n) for (n,) in self._tx.fetch(self._prunable, (before, limit))]
        gone = 0
        for chunk in chunks(nodes):
            marks = ", ".join(["?"] * len(chunk))
            gone += self._tx.change(self._delete.format(nodes=marks), tuple(chunk))
        return gone
