"""The ``Journaling`` and ``Locking`` facets of ``memory://``: durable step state in dictionaries.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. It
shares the store's lock, so a fenced record checks the attempt's lease and
writes its entry in one step, as the SQL store does with the step row locked.
"""

from __future__ import annotations

import threading
from typing import Any

from ._records import AttemptState, HeldLock

__all__ = ["MemoryState"]


class MemoryState:
    """Journal entries and named locks kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()
        self._journal: dict[tuple[str, str, str], bytes] = {}
        self._named_locks: dict[str, HeldLock] = {}

    def _held(self, token: str) -> tuple[Any, AttemptState]:  # the store's (lock held)
        raise NotImplementedError

    # -- the journal -------------------------------------------------------------------------
    def read_journal(self, scope: str, step: str, name: str) -> bytes | None:
        """The value recorded under the key; None when nothing is."""
        with self._lock:
            return self._journal.get((scope, step, name))

    def record_journal(
        self, scope: str, step: str, name: str, value: bytes, *, lease: str | None, now: int
    ) -> bytes | None:
        """Record ``value`` unless the key holds one; None if ``lease`` is given and not held."""
        with self._lock:
            if lease is not None and self._held(lease)[1] is not AttemptState.HELD:
                return None
            return self._journal.setdefault((scope, step, name), value)

    # -- named locks -------------------------------------------------------------------------
    def take_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Take ``name`` for ``token`` until ``until`` unless another holds it at ``now``."""
        with self._lock:
            held = self._named_locks.get(name)
            if held is not None and held.token != token and held.expires_at > now:
                return False
            self._named_locks[name] = HeldLock(name, token, now, until)
            return True

    def extend_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Move the expiry of ``token``'s unexpired lock of ``name`` to ``until``."""
        with self._lock:
            held = self._named_locks.get(name)
            if held is None or held.token != token or held.expires_at <= now:
                return False
            self._named_locks[name] = HeldLock(name, token, held.taken_at, until)
            return True

    def release_lock(self, name: str, token: str) -> bool:
        """Free ``name`` if ``token`` holds it."""
        with self._lock:
            held = self._named_locks.get(name)
            if held is None or held.token != token:
                return False
            del self._named_locks[name]
            return True

    def read_lock(self, name: str) -> HeldLock | None:
        """The lock of ``name`` as kept (expired or not)."""
        with self._lock:
            return self._named_locks.get(name)
