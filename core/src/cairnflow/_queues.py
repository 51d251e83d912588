"""Queues as an application configures them: :class:`QueueConfig`.

A queue is a name on every run (its workflow's, or the one ``enqueue(queue=...)``
chose). A client serves the queues it is given (``Client(queues=[...])``), or
without them the queues of the workflows it registered; a run waits in the
table until a client that serves its queue claims it. This module holds the
plain configuration only: it is checked, with every other setting of a client,
by :class:`cairnflow._engine._settings.Settings` (one place, one message per
rule), and the engine counts each queue's slots (``_engine/_slots.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._rates import Rate

__all__ = ["DEFAULT_QUEUE", "QueueConfig"]

DEFAULT_QUEUE = "default"
"""The queue of a workflow that names none."""


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """One queue a client serves.

    ``workers``: at most this many attempts of the queue run at once on this
    client (default: the client's ``workers``; the client's ``workers`` bounds
    the sum, and when it is not given it *is* the sum of its queues' workers).
    ``limit``: at most this many attempts of the queue run at once across every
    client of the database (``Cap.QUEUE_LIMIT_GLOBAL``). ``rate``: attempts of the
    queue start at most at this :class:`~cairnflow.Rate` across every client of the
    database (``Cap.RATE_LIMIT``; every client of the queue gives the same rate).
    ``priority``: when the client's total is what bounds a claim, higher-priority
    queues are asked first; queues of equal priority take turns.
    """

    name: str
    workers: int | None = None
    limit: int | None = None
    priority: int = 0
    rate: Rate | None = None
