"""Global queue limits in SQL: lock the queue's limiter row, count its running steps under it.

``QueueConfig(limit=k)`` (``Cap.QUEUE_LIMIT_GLOBAL``) bounds a queue's running
attempts across every client of the database. Two claimers that each count 4
running of a limit of 5 and each take one would run 6, so the count and the
take happen under one lock (docs/claim.md, 3): in the claim's transaction, the
queue's row of ``limits`` (``kind = 'queue'``) is locked (``SELECT ... FOR
UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already serialises writers), the queue's
running steps are counted, and the queue's statement takes at most ``k`` minus
that count. The lock is held to COMMIT, so the next claimer's count (a new
statement: it sees what committed before it, at READ COMMITTED too) includes
what this one took.

The count is recomputed, never kept: a counter changed by claims, outcomes,
reclaims and cancels drifts the first time one of them forgets it, and a
drifted counter stops a queue for good. An attempt whose lease ran out still
counts until it is reclaimed, so the limit is never exceeded.

A limiter row is created once, in a transaction of its own, before the first
claim of the queue needs it (:meth:`Limiters.prepare`); a claim's transaction
then only locks it. That keeps a duplicate-key refusal (two processes creating
the row at once: the second's insert is refused, and it finds the row) out of
the claim's transaction, which may also be writing outcomes. Rows are never
deleted by cairnflow; one deleted by hand is inserted again by the next claim.

Limited queues are locked in name order, all before the first claim
statement: two claims of the same limited queues never wait on each other
crosswise. Unlimited queues never touch the table.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ..store import ClaimRequest
from ._dialect import Cursor
from ._parts import Context, Part

__all__ = ["Limiters", "global_limits"]

QUEUE = "queue"
"""The ``kind`` of a queue's limiter row (keys and rate limits will share the table)."""


def global_limits(request: ClaimRequest) -> dict[str, int]:
    """The global limit of each queue of ``request`` that has one, by queue name."""
    return {ask.name: ask.global_limit for ask in request.queues if ask.global_limit is not None}


class Limiters(Part):
    """The limiter rows of globally limited queues: created once, locked by every claim."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._known: set[str] = set()
        """Queues whose limiter row this store created or found (rows are never deleted)."""
        self._known_lock = threading.Lock()

    def prepare(self, request: ClaimRequest | None) -> None:
        """Make sure every limited queue of ``request`` has its row (outside any transaction)."""
        if request is None:
            return
        for name in sorted(global_limits(request)):
            if name not in self._known:
                self._create(name)

    def _create(self, name: str) -> None:
        q = self._q

        def work(cur: Cursor) -> None:
            if self._execute(cur, q.find_limiter, (QUEUE, name)).fetchone() is None:
                self._execute(cur, q.insert_limiter, (QUEUE, name))

        self._tx.upsert(work)  # a creator that loses the insert runs again and finds the row
        with self._known_lock:
            self._known.add(name)

    def room(self, cur: Cursor, limits: Mapping[str, int]) -> dict[str, int]:
        """Lock each queue's limiter (name order); how many more of it may run: limit - running.

        Called inside the claim's transaction, before its first claim statement;
        the locks are held until it commits.
        """
        q = self._q
        room: dict[str, int] = {}
        for name in sorted(limits):
            if self._execute(cur, q.lock_limiter, (QUEUE, name)).fetchone() is None:
                # Deleted since it was created: insert it again, locked by the insert.
                self._execute(cur, q.insert_limiter, (QUEUE, name))
            (running,) = self._execute(cur, q.count_running, (name,)).fetchone()
            room[name] = max(limits[name] - int(running), 0)
        return room
