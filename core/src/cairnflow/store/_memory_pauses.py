"""The ``QueueControl`` facet of ``memory://``: paused queues and workflows in a dictionary.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. It
shares the store's lock, and the store's claim asks :meth:`MemoryPauses._paused`
under it, so a pause holds every claim that begins after it, as the row of a
SQL store does.
"""

from __future__ import annotations

import threading

from ._records import Pause, PauseKind

__all__ = ["MemoryPauses"]


class MemoryPauses:
    """Pauses kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()  # the store's other facets, whatever their order
        self._pauses: dict[tuple[PauseKind, str], Pause] = {}

    def pause(self, kind: PauseKind, name: str, at: int) -> bool:
        """Pause ``kind`` ``name`` from ``at``; False when it was paused already."""
        with self._lock:
            if (kind, name) in self._pauses:
                return False
            self._pauses[(kind, name)] = Pause(kind, name, at)
            return True

    def resume(self, kind: PauseKind, name: str) -> bool:
        """Lift the pause; False when there was none."""
        with self._lock:
            return self._pauses.pop((kind, name), None) is not None

    def pauses(self) -> list[Pause]:
        """Every pause, by kind, then name."""
        with self._lock:
            return [self._pauses[key] for key in sorted(self._pauses)]

    def _paused(self, kind: PauseKind, name: str) -> bool:
        """True while ``kind`` ``name`` is paused (lock held)."""
        return (kind, name) in self._pauses
