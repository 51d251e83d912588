"""The ``Retention`` facet of ``memory://``: pruning and archiving finished runs.

A part of :class:`~cairnflow.store.MemoryStore` under the store's one lock, so
a chunk is atomic like a transaction of a SQL store (:mod:`cairnflow.sql._retention`):
the prune lock is checked, the runs are picked, archived (a snapshot of the run
and its steps) and deleted in one step. The runs are found by a walk of every
run: an in-process store holds few enough that an index would cost more.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import TYPE_CHECKING

from ._records import HeldLock, StoredRun
from ._retention import ArchivePage, PruneChunk, archive_cursor, archive_position

if TYPE_CHECKING:
    from ._memory import _Run

__all__ = ["MemoryRetention"]


class MemoryRetention:
    """``prune_runs``, ``archived_runs`` (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock
    _runs: dict[str, _Run]
    _named_locks: dict[str, HeldLock]

    def __init__(self) -> None:
        super().__init__()
        self._archive: dict[str, StoredRun] = {}

    def delete_runs(self, run_ids: Collection[str]) -> list[str]:
        raise NotImplementedError  # the store's (MemoryAdmin)

    def _snapshot(self, run: _Run) -> StoredRun:
        raise NotImplementedError  # the store's

    def prune_runs(self, chunk: PruneChunk) -> list[str] | None:
        """Delete (or archive) up to ``chunk.limit`` runs finished before ``chunk.before``."""
        with self._lock:
            held = self._named_locks.get(chunk.lock)
            if held is None or held.token != chunk.token or held.expires_at <= chunk.lock_now:
                return None
            old = sorted(
                (run.finished_at, run.id)
                for run in self._runs.values()
                if run.finished_at is not None and run.finished_at < chunk.before
            )[: chunk.limit]
            ids = [run_id for _, run_id in old]
            if chunk.archive:
                for run_id in ids:
                    self._archive[run_id] = self._snapshot(self._runs[run_id])
            deleted = set(self.delete_runs(ids))
            return [run_id for run_id in ids if run_id in deleted]

    def archived_runs(self, *, limit: int, cursor: str | None = None) -> ArchivePage:
        """Archived runs with their steps, newest finish first, after ``cursor``."""
        after = archive_position(cursor) if cursor is not None else None
        with self._lock:
            ordered = sorted(
                self._archive.values(), key=lambda r: (r.finished_at or 0, r.id), reverse=True
            )
        if after is not None:
            ordered = [r for r in ordered if (r.finished_at or 0, r.id) < after]
        page = tuple(ordered[:limit])
        more = len(ordered) > limit
        last = page[-1] if page else None
        return ArchivePage(
            runs=page,
            cursor=archive_cursor(last.finished_at or 0, last.id) if more and last else None,
        )
