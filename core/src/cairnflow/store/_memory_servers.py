"""The ``Servers`` facet of ``memory://``: heartbeat rows in a dictionary (one process)."""

from __future__ import annotations

import dataclasses
import threading

from ._servers import ServerRecord

__all__ = ["MemoryServers"]


class MemoryServers:
    """Heartbeat rows kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()
        self._servers: dict[str, ServerRecord] = {}

    def record_server(self, server: ServerRecord) -> None:
        """Insert or replace the row of ``server.node``."""
        with self._lock:
            self._servers[server.node] = server

    def stop_server(self, node: str, at: int) -> None:
        """Mark the row of ``node`` stopped at ``at``."""
        with self._lock:
            found = self._servers.get(node)
            if found is not None:
                self._servers[node] = dataclasses.replace(found, stopped_at=at)

    def list_servers(self, *, seen_since: int) -> list[ServerRecord]:
        """Rows seen at or after ``seen_since``, newest seen first."""
        with self._lock:
            rows = [s for s in self._servers.values() if s.seen_at >= seen_since]
        return sorted(rows, key=lambda s: (-s.seen_at, s.node))

    def prune_servers(self, *, before: int, limit: int) -> int:
        """Delete up to ``limit`` rows last seen before ``before``."""
        with self._lock:
            old = [n for n, s in self._servers.items() if s.seen_at < before][:limit]
            for node in old:
                del self._servers[node]
            return len(old)
