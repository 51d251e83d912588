"""The retention methods of :class:`~cairnflow.Client`: prune now, read the archive.

``prune()`` runs one pass of the pruner (:mod:`._pruner`) in the caller's
thread, under the same prune lock as the background passes of every client,
so an operator's ``prune()`` never runs beside a client's. ``archived_runs``
reads the cold tables (``Cap.ARCHIVE``), newest finish first, a page at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from .._caps import Cap
from .._checks import check_int, check_seconds
from .._models import RunInfo
from ..store import MAX_PAGE, Retention
from ._pruner import Pruner
from ._reads import RunReader
from ._state import EngineState

__all__ = ["ArchivedRuns", "RetentionMethods"]


@dataclass(frozen=True, slots=True)
class ArchivedRuns:
    """A page of archived runs, newest finish first, and the cursor of the next (None: last)."""

    runs: tuple[RunInfo, ...]
    cursor: str | None


class RetentionMethods:
    """``prune`` (``Cap.RETENTION``) and ``archived_runs`` (``Cap.ARCHIVE``)."""

    _state: EngineState
    _reads: RunReader

    def _retention(self, cap: Cap, what: str) -> Retention:
        self._state.require(cap, what)
        retention = self._state.facets.retention
        assert retention is not None  # declared (required above), so check_store made sure
        return retention

    def prune(self, older_than: float | timedelta | None = None) -> int | None:
        """Prune now every finished run older than ``older_than`` seconds; how many went.

        ``older_than`` defaults to the client's ``prune_after``. Chunks of
        ``prune_chunk`` runs, one transaction each, under the prune lock; with
        ``archive=True`` the runs are moved to the archive. None, pruning
        nothing, while another client holds the prune lock (``Cap.RETENTION``).
        """
        retention = self._retention(Cap.RETENTION, "prune()")
        state = self._state
        if older_than is None:
            after = state.settings.prune_after
            if after is None:
                raise ValueError("prune() needs older_than= on a client without prune_after")
        else:
            seconds = (
                older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
            )
            after = check_seconds("older_than", seconds, zero=True)
        locks = state.locks("prune() (the prune lock)")
        return Pruner(state, retention, locks).prune(int(after * 1_000_000_000))

    def archived_runs(self, *, limit: int = 50, cursor: str | None = None) -> ArchivedRuns:
        """Archived runs with their steps' outputs, newest finish first (``Cap.ARCHIVE``).

        ``cursor`` is the ``cursor`` of the page before; pages never repeat or
        skip a run, whatever is archived between them.
        """
        retention = self._retention(Cap.ARCHIVE, "archived_runs()")
        check_int("limit", limit, minimum=1, maximum=MAX_PAGE)
        page = retention.archived_runs(limit=limit, cursor=cursor)
        return ArchivedRuns(
            runs=tuple(self._reads.run_info(stored) for stored in page.runs), cursor=page.cursor
        )
