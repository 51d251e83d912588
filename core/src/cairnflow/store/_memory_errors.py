"""The ``ErrorHistory`` facet of ``memory://``: each run's recent errors in a list.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. The
store's ``finish`` calls :meth:`MemoryErrors._record_error` under its lock, in
the same step that records the failure, as a SQL store writes the row in the
failure's transaction.
"""

from __future__ import annotations

import threading

from .._models import RunError
from ._records import Failed

__all__ = ["MemoryErrors"]


class MemoryErrors:
    """Error histories kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()  # the store's other facets
        self._errors: dict[str, list[RunError]] = {}
        self._error_seq: dict[str, int] = {}

    def run_errors(self, run_id: str) -> list[RunError]:
        """The recorded errors of ``run_id``, newest first."""
        with self._lock:
            return list(reversed(self._errors.get(run_id, ())))

    def _record_error(self, run_id: str, outcome: Failed, now: int) -> None:
        """Record ``outcome`` as the run's next error and keep its newest (lock held)."""
        keep = outcome.keep_errors
        if keep <= 0:
            return
        seq = self._error_seq.get(run_id, 0) + 1
        self._error_seq[run_id] = seq
        error = outcome.error
        kept = self._errors.setdefault(run_id, [])
        kept.append(RunError(seq, error.step or "", error.attempt or 0, outcome.node, now, error))
        del kept[:-keep]
