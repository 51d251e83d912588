"""The operator's reads of :class:`~cairnflow.Client` beyond runs: ``stats()`` (``Cap.STATS``).

A mixin of its own, as the schedule and queue methods are: each reads a store
facet taken once when the client was built (:class:`~cairnflow.store.StoreFacets`)
and works from a client that is never started (``cairn stats``).
"""

from __future__ import annotations

from .._caps import Cap
from .._checks import check_seconds
from ..store import RunStatistics
from ._state import EngineState

__all__ = ["AdminMethods"]


class AdminMethods:
    """``stats``."""

    _state: EngineState

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
