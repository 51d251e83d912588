"""Worker slots per queue: what one client holds and has promised of each queue it serves.

A client's ``workers`` bound the attempts it holds in all; each queue it serves
bounds its own (:attr:`QueueSlots.workers`). A claim asks each queue for at
most ``min(its free slots, the client's free slots)``, highest priority first,
and the store stops at the client's total: so a higher-priority queue is
drained first, and a lower one still gets what the higher one could not fill
in the same claim. Queues of equal priority take turns at being asked first
(:class:`QueueOrder`), so a client that serves several queues from one pool
drains them side by side rather than one after the other.

Everything here is changed under :attr:`EngineState.lock`; it holds counts and
flags, never attempts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .._queues import QueueConfig
from .._rates import Rate
from ..store import ClaimedAttempt, QueueClaim

__all__ = ["QueueOrder", "QueueSlots", "note_claimed"]


@dataclass(slots=True, eq=False)
class QueueSlots:
    """One served queue's slots on this client."""

    name: str
    workers: int
    """At most this many attempts of the queue held at once by this client."""
    priority: int
    global_limit: int | None
    may_claim_ahead: bool
    """True when the queue may use the client's claim-ahead: its workers are the client's
    (or more), so the worker pool already bounds how many of it run. A queue capped below
    the client's workers claims only for its own free workers, since any attempt it holds
    may start at once on a free thread."""
    held: int = 0
    """Attempts of the queue holding a slot (running, queued for a worker, being written)."""
    reserved: int = 0
    """Slots promised to claims planned and not yet accepted or released."""
    want_claim: bool = True
    """False once a claim of the queue came back short, until something suggests work."""
    rate: Rate | None = None
    """The queue's rate limit (``Cap.RATE_LIMIT``), or None."""

    @classmethod
    def of(cls, config: QueueConfig, client_workers: int) -> QueueSlots:
        """The slots of a configured queue (its ``workers`` already resolved)."""
        workers = config.workers if config.workers is not None else client_workers
        return cls(
            name=config.name,
            workers=workers,
            priority=config.priority,
            global_limit=config.limit,
            may_claim_ahead=workers >= client_workers and config.rate is None,
            rate=config.rate,
        )

    def free(self, ahead: int) -> int:
        """Slots of this queue a claim may ask for now (``ahead``: the client's claim-ahead)."""
        bound = self.workers + (ahead if self.may_claim_ahead else 0)
        return bound - self.held - self.reserved


class QueueOrder:
    """The served queues in the order a claim asks them: by priority, equal ones in turn."""

    def __init__(self) -> None:
        self._levels: list[list[QueueSlots]] = []
        self._turn = 0

    def set(self, queues: Iterable[QueueSlots]) -> None:
        """Order ``queues`` (kept in the order given within one priority)."""
        ordered = sorted(queues, key=lambda slots: -slots.priority)
        self._levels = [
            list(level) for _, level in itertools.groupby(ordered, key=lambda s: s.priority)
        ]

    def next(self) -> list[QueueSlots]:
        """Every queue, highest priority first; each call starts equal ones one further on."""
        self._turn += 1
        order: list[QueueSlots] = []
        for level in self._levels:
            start = self._turn % len(level)
            order.extend(level[start:] + level[:start])
        return order


def note_claimed(
    queues: dict[str, QueueSlots],
    asked: Sequence[QueueClaim],
    limit: int,
    claimed: Sequence[ClaimedAttempt],
) -> None:
    """Keep wanting a claim for each queue that may have more ready steps.

    The store claims the queues in order, each for ``min(its limit, what the
    request still wants)``: a queue that got all of that, or that the request's
    total never reached, may have more; one that came back short has no more
    ready now, unless it has a global limit: then it may have been short of room
    (attempts running anywhere), not of work, and stays asked, so the refill that
    follows this client's next outcome asks it again (without that, a limited
    queue waited for the next poll each time its room ran out: W2 with a limit
    of its workers fell from thousands of runs a second to 16). Only ever sets
    the flag: a wake-up that came during the claim is not undone.
    """
    got: dict[str, int] = {}
    for attempt in claimed:
        got[attempt.queue] = got.get(attempt.queue, 0) + 1
    left = limit
    for ask in asked:
        wanted = left if ask.limit is None else min(ask.limit, left)
        taken = got.get(ask.name, 0)
        slots = queues.get(ask.name)
        if slots is not None and (taken >= wanted or ask.global_limit is not None):
            slots.want_claim = True
        left -= taken
