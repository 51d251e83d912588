"""The operator's reads of :class:`~cairnflow.Client` beyond runs: ``stats()`` (``Cap.STATS``)
and ``servers()`` (``Cap.SERVERS``).

A mixin of its own, as the schedule and queue methods are: each reads a store
facet taken once when the client was built (:class:`~cairnflow.store.StoreFacets`)
and works from a client that is never started (``cairn stats``).
"""

from __future__ import annotations

from .._caps import Cap
from .._checks import check_seconds
from ..store import RunStatistics, ServerList
from ._state import EngineState

__all__ = ["StatsMethods"]


class StatsMethods:
    """``servers``, ``stats``."""

    _state: EngineState

    def servers(self, *, hours: float = 1.0) -> ServerList:
        """Every client seen in the last ``hours`` (``Cap.SERVERS``): live and dead ones.

        A started client records a heartbeat row (node, host, pid, queues,
        workers, version, started, last seen) every third of its lease and marks
        it stopped when it stops; one not seen for ``store.MISSED_BEATS`` of its
        heartbeats (killed, or cut off) is dead. Works from a client never started.
        """
        state = self._state
        state.require(Cap.SERVERS, "servers()")
        hours = check_seconds("hours", hours)
        facet = state.facets.servers
        assert facet is not None  # declared (required above), so check_store made sure
        now = state.now()
        rows = facet.list_servers(seen_since=now - int(hours * 3600e9))
        live = tuple(row for row in rows if row.alive(now))
        dead = tuple(row for row in rows if not row.alive(now))
        return ServerList(now, live, dead)

    def stats(self, *, hours: float = 1.0, bucket: float = 60.0) -> RunStatistics:
        """What a dashboard draws (``Cap.STATS``), read in one transaction from indexes.

        Unfinished runs and steps by queue and status; per queue, its ready,
        running and waiting steps, its runs failed in the window and its oldest
        ready step; runs finished in the last ``hours`` by queue and status, and
        their throughput in buckets of ``bucket`` seconds (per minute by default),
        oldest first.
        """
        state = self._state
        state.require(Cap.STATS, "stats()")
        hours = check_seconds("hours", hours)
        bucket = check_seconds("bucket", bucket)
        facet = state.facets.stats
        assert facet is not None  # declared (required above), so check_store made sure
        width = max(int(bucket * 1e9), 1)
        now = state.now()
        buckets = max(int(hours * 3600 / bucket), 1)
        if buckets > 100_000:
            raise ValueError(f"{buckets} buckets of {bucket:g}s in {hours:g}h: at most 100,000")
        return facet.run_statistics(since=now - buckets * width, now=now, width=width)
