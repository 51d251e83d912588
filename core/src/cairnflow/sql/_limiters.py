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

Rate limits (``Cap.RATE_LIMIT``, docs/claim.md, 5) are rows of the same table:
a bucket's row holds its theoretical arrival time (``tat``,
:mod:`cairnflow._rates`). A rate-limited queue's bucket (``kind =
'queue-rate'``) is locked with the queue limiters, in (kind, name) order,
and the queue's statement asks for at most the tokens it holds; what the
claim leased is charged before it commits. A named bucket (``kind = 'rate'``,
``client.take``) is taken from in a transaction of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from .. import _rates
from .._rates import Rate, RateTake
from ..store import ClaimRequest
from ._dialect import Cursor
from ._parts import Context, Part

__all__ = ["Buckets", "Limiters", "global_limits", "queue_rates"]

QUEUE = "queue"
"""The ``kind`` of a queue's limiter row (keys and rate limits share the table)."""
QUEUE_RATE = "queue-rate"
"""The ``kind`` of a rate-limited queue's bucket."""
RATE = "rate"
"""The ``kind`` of a named bucket (``client.take``, ``cf.RateLimiter``)."""


def global_limits(request: ClaimRequest) -> dict[str, int]:
    """The global limit of each queue of ``request`` that has one, by queue name."""
    return {ask.name: ask.global_limit for ask in request.queues if ask.global_limit is not None}


def queue_rates(request: ClaimRequest) -> dict[str, Rate]:
    """The rate of each queue of ``request`` that has one, by queue name."""
    return {ask.name: ask.rate for ask in request.queues if ask.rate is not None}


class Buckets:
    """The buckets one claim locked: their arrival times, to charge what the claim leased."""

    def __init__(self, now: int) -> None:
        self.now = now
        self.tat: dict[str, int | None] = {}
        self.rate: dict[str, Rate] = {}

    def room(self, queue: str) -> int:
        """Tokens the queue's bucket holds now."""
        return _rates.room(self.tat[queue], self.now, self.rate[queue])


class Limiters(Part):
    """The limiter rows of globally limited queues: created once, locked by every claim."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._known: set[tuple[str, str]] = set()
        """(kind, name) of the rows this store created or found (rows are never deleted)."""
        self._known_lock = threading.Lock()

    def prepare(self, request: ClaimRequest | None) -> None:
        """Make sure every limited queue of ``request`` has its rows (outside any transaction)."""
        if request is None:
            return
        for name in sorted(global_limits(request)):
            self._create(QUEUE, name)
        for name in sorted(queue_rates(request)):
            self._create(QUEUE_RATE, name)

    def _create(self, kind: str, name: str) -> None:
        if (kind, name) in self._known:
            return
        q = self._q

        def work(cur: Cursor) -> None:
            if self._execute(cur, q.find_limiter, (kind, name)).fetchone() is None:
                self._execute(cur, q.insert_limiter, (kind, name))

        self._tx.upsert(work)  # a creator that loses the insert runs again and finds the row
        with self._known_lock:
            self._known.add((kind, name))

    def lock_buckets(self, cur: Cursor, rates: Mapping[str, Rate], now: int) -> Buckets:
        """Lock each rate-limited queue's bucket (name order), read its arrival time.

        Called inside the claim's transaction after :meth:`room` (kind order:
        'queue' before 'queue-rate'); the locks are held until it commits.
        """
        buckets = Buckets(now)
        for name in sorted(rates):
            buckets.tat[name] = self._lock_bucket(cur, QUEUE_RATE, name)
            buckets.rate[name] = rates[name]
        return buckets

    def charge(self, cur: Cursor, buckets: Buckets, queue: str, leased: int) -> None:
        """Charge ``queue``'s bucket for the ``leased`` attempts of this claim (none: no write)."""
        if leased:
            tat = _rates.charge(buckets.tat[queue], buckets.now, buckets.rate[queue], leased)
            self._execute(cur, self._q.set_bucket, (tat, QUEUE_RATE, queue))
            buckets.tat[queue] = tat

    def take(self, name: str, rate: Rate, n: int, now: int) -> RateTake:
        """Take ``n`` tokens of the named bucket, in a transaction of its own."""
        self._create(RATE, name)

        def work(cur: Cursor) -> RateTake:
            took = _rates.take(self._lock_bucket(cur, RATE, name), now, rate, n)
            if took.granted:
                self._execute(cur, self._q.set_bucket, (took.tat, RATE, name))
            return took

        return self._tx.run(work)

    def _lock_bucket(self, cur: Cursor, kind: str, name: str) -> int | None:
        row = self._execute(cur, self._q.lock_bucket, (kind, name)).fetchone()
        if row is None:
            # Deleted since it was created: insert it again, locked by the insert.
            self._execute(cur, self._q.insert_limiter, (kind, name))
            return None
        return None if row[0] is None else int(row[0])

    def lock(self, cursors: Callable[[], Cursor], limits: Mapping[str, int]) -> Callable[[], None]:
        """Lock each queue's limiter (name order) without waiting for the answers.

        Where the claim statement counts the running attempts itself
        (:attr:`Dialect.limit_expressions`), nothing needs to be read before it:
        inside a pipeline the locks, the claim and the COMMIT go out together.
        Returns what to call once the transaction's results are read: a row found
        missing (deleted by hand; the claim then took nothing of its queue,
        ``ROOM_LIMIT``) is forgotten, so the next claim's :meth:`prepare` creates it.
        """
        q = self._q
        pipelined = self._dialect.pipelines  # else each answer is read before the next statement
        sent: list[tuple[str, Cursor | bool]] = []
        for name in sorted(limits):
            result = self._execute(cursors(), q.lock_limiter, (QUEUE, name))
            sent.append((name, result if pipelined else result.fetchone() is not None))

        def check() -> None:
            missing = [
                name
                for name, result in sent
                if not (result if isinstance(result, bool) else result.fetchone() is not None)
            ]
            if missing:
                with self._known_lock:
                    self._known.difference_update((QUEUE, name) for name in missing)

        return check

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
