"""The ``QueueControl`` facet in SQL: a pause is a row, and every claim reads the rows.

A paused queue or workflow is one row of ``pauses`` (primary key ``(kind,
name)``); resuming deletes it. Nothing caches a pause: the claim of each queue
reads the table in its own statement and transaction (``READY`` in
:mod:`._statements`), so a pause holds every client from the moment it commits,
survives every restart, and needs no client to be running (docs/claim.md, 2).

Two pausers that both find no row both insert it: the primary key refuses the
second, whose pause then runs again, finds the row, and reports the queue
paused already (the first pause's time is kept).
"""

from __future__ import annotations

from ..store import Pause, PauseKind
from ._dialect import Cursor
from ._parts import Part
from ._rows import PauseRow

__all__ = ["Pauses"]


class Pauses(Part):
    """``pause``, ``resume``, ``pauses``."""

    def pause(self, kind: PauseKind, name: str, at: int) -> bool:
        """Pause ``kind`` ``name`` from ``at``; False when it was paused already."""
        q = self._q

        def work(cur: Cursor) -> bool:
            if self._execute(cur, q.find_pause, (kind.value, name)).fetchone() is not None:
                return False
            self._execute(cur, q.insert_pause, (kind.value, name, at))
            return True

        return self._tx.upsert(work)

    def resume(self, kind: PauseKind, name: str) -> bool:
        """Resume ``kind`` ``name``; False when it was not paused."""
        return self._tx.change(self._q.delete_pause, (kind.value, name)) > 0

    def pauses(self) -> list[Pause]:
        """Every pause, by kind and name."""
        return [PauseRow.from_row(row).record() for row in self._tx.fetch(self._q.list_pauses)]
