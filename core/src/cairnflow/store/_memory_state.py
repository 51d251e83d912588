"""The ``Journaling``, ``Locking`` and ``RateLimiting`` facets of ``memory://``: state in dicts.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. It
shares the store's lock, so a fenced record checks the attempt's lease and
writes its entry in one step, as the SQL store does with the step row locked.
"""

from __future__ import annotations

import threading
from typing import Any

from .. import _rates
from .._rates import Rate, RateTake
from ._records import AttemptState, HeldLock

__all__ = ["MemoryState"]


class MemoryState:
    """Journal entries and named locks kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()
        self._journal: dict[tuple[str, str, str], bytes] = {}
        self._named_locks: dict[str, HeldLock] = {}
        self._buckets: dict[tuple[str, str], int] = {}
        """Each bucket's arrival time by (kind, name): 'rate' named, 'queue-rate' a queue's."""

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

    # -- rate limits -------------------------------------------------------------------------
    def take_tokens(self, name: str, rate: Rate, n: int, now: int) -> RateTake:
        """Take ``n`` tokens of bucket ``name`` at ``now``; nothing changes when refused."""
        with self._lock:
            took = _rates.take(self._buckets.get(("rate", name)), now, rate, n)
            if took.granted:
                self._buckets["rate", name] = took.tat
            return took

    def _queue_room(self, queue: str, rate: Rate, now: int) -> int:
        """Tokens a rate-limited queue's bucket holds at ``now`` (the store's lock held)."""
        return _rates.room(self._buckets.get(("queue-rate", queue)), now, rate)

    def _charge_queue(self, queue: str, rate: Rate, now: int, leased: int) -> None:
        """Charge a rate-limited queue's bucket for what a claim leased (lock held)."""
        if leased:
            tat = self._buckets.get(("queue-rate", queue))
            self._buckets["queue-rate", queue] = _rates.charge(tat, now, rate, leased)

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
