"""Servers (``Cap.SERVERS``, the ``Servers`` facet): every started client as a heartbeat row.

A client records itself when it starts (node id, host, pid, the queues it
serves, its workers, its cairnflow version, when it started), again every
third of a lease from its keeper (``seen_at``), and marks the row stopped when
it stops. A row carries its own heartbeat interval, so whoever reads it judges
it by the writer's rhythm: alive while seen within :data:`MISSED_BEATS` beats,
dead after (a client killed at once never marks its row). Rows not seen for a
day are pruned by the clients' heartbeats.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MISSED_BEATS", "PRUNE_AFTER_NS", "ServerList", "ServerRecord"]

MISSED_BEATS = 3
"""A server not seen for this many of its heartbeats is dead."""

PRUNE_AFTER_NS = 24 * 3600 * 10**9
"""Rows not seen for this long (a day) are deleted."""


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """One client as its heartbeat row keeps it (times: Unix nanoseconds)."""

    node: str
    host: str
    pid: int
    queues: tuple[str, ...]
    workers: int
    version: str
    started_at: int
    seen_at: int
    beat_every: int
    """The interval of its heartbeats, in nanoseconds."""
    stopped_at: int | None = None

    def alive(self, now: int) -> bool:
        """Not stopped, and seen within :data:`MISSED_BEATS` of its heartbeats before ``now``."""
        return self.stopped_at is None and now - self.seen_at <= MISSED_BEATS * self.beat_every


@dataclass(frozen=True, slots=True)
class ServerList:
    """The servers seen lately, judged at ``at``: ``live`` ones and ``dead`` ones (stopped, or
    not seen for :data:`MISSED_BEATS` of their heartbeats), each newest seen first."""

    at: int
    live: tuple[ServerRecord, ...]
    dead: tuple[ServerRecord, ...]
