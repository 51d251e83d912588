"""The ``StepHistory`` facet of ``memory://``: each run's step transitions in a list.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. The
store calls :meth:`MemoryStepHistory._record_step` under its lock, in the same
step that makes the transition, as a SQL store's trigger writes the row in the
transition's transaction; an attempt fenced out (its token no longer holds)
never reaches a transition, so it records nothing. The bound is the SQL
stores': every transition but a claim keeps the run's newest
:data:`~cairnflow._models.STEP_HISTORY_KEEP`.
"""

from __future__ import annotations

import threading

from .._models import STEP_HISTORY_KEEP, StepEvent

__all__ = ["MemoryStepHistory"]


class MemoryStepHistory:
    """Step histories kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()  # the store's other facets
        self._history: dict[str, list[StepEvent]] = {}
        self._history_seq = 0

    def step_history(self, run_id: str) -> list[StepEvent]:
        """The recorded transitions of ``run_id``, oldest first."""
        with self._lock:
            return list(self._history.get(run_id, ()))

    def _record_step(
        self, run_id: str, step: str, attempt: int, node: str | None, event: str, now: int
    ) -> None:
        """Record ``event`` of ``step`` as its run's next transition (lock held)."""
        self._history_seq += 1
        kept = self._history.setdefault(run_id, [])
        kept.append(StepEvent(self._history_seq, step, attempt, event, node, now))
        if event != "claimed":
            del kept[:-STEP_HISTORY_KEEP]
