"""Rate limits (``Cap.RATE_LIMIT``): a durable leaky bucket per name, kept as one integer.

A :class:`Rate` admits ``limit`` takes per ``per`` seconds across every client of a
database. The bucket is the generic cell rate algorithm (GCRA), the leaky bucket in its
"virtual scheduling" form: a bucket's whole state is its *theoretical arrival time*
(``tat``, Unix nanoseconds), the moment the bucket would be empty again. Each token
pushes it one emission interval ``T = per / limit`` further; a take of ``n`` at ``now``
is admitted while the new ``tat`` stays within ``burst * T`` of ``now``. One integer
column, moved under the bucket row's lock, instead of a level and a timestamp that must
be leaked in floating point.

What it promises, for any stretch of time of length ``d`` (and whatever the order in
which several clients' takes reach the row): at most ``burst + d / T`` tokens are
admitted. With the default ``burst=1`` that is at most ``limit`` in any window of
``per`` seconds, the window sliding (takes spaced ``T`` apart); ``burst=b`` lets ``b``
go at once after a quiet spell, and any window of ``per`` then admits at most
``limit + b - 1``. ``T`` is rounded up to a whole nanosecond, so rounding never admits
more.

The arithmetic lives here, once: the SQL layer and the memory store lock their row,
read ``tat``, call :func:`take` or :func:`room`, and write the ``tat`` it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._checks import check_int, check_seconds

__all__ = ["Rate", "RateTake", "charge", "room", "take"]

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` per ``per`` seconds, across every client; ``burst`` at once.

    Every client that uses a bucket (a queue's ``QueueConfig(rate=...)``, or a named
    bucket of ``client.take``) must give it the same rate, as every client of a
    globally limited queue gives the same ``limit``: the bucket row holds the state,
    the callers hold the rule.
    """

    limit: int
    per: float = 1.0
    burst: int = 1

    def __post_init__(self) -> None:
        check_int("Rate limit", self.limit, minimum=1)
        check_seconds("Rate per", self.per)
        check_int("Rate burst", self.burst, minimum=1)
        if self.interval_ns <= 0:  # pragma: no cover - per > 0 and limit finite
            raise ValueError(f"Rate: {self.limit} per {self.per}s is finer than a nanosecond")

    @property
    def interval_ns(self) -> int:
        """``T``: nanoseconds one token holds the bucket (``per / limit``, rounded up)."""
        per_ns = round(self.per * _NS)
        return -(-per_ns // self.limit)


@dataclass(frozen=True, slots=True)
class RateTake:
    """What a take got: ``granted``, and the bucket's new ``tat`` or when to ask again.

    ``retry_at`` (Unix ns) is the first moment the same take could be granted, when it
    was refused; None when granted.
    """

    granted: bool
    tat: int
    retry_at: int | None = None


def take(tat: int | None, now: int, rate: Rate, n: int = 1) -> RateTake:
    """Take ``n`` tokens at ``now`` from a bucket whose arrival time is ``tat`` (None: new).

    Raises ValueError when ``n`` exceeds ``rate.burst``: such a take could never be
    granted, and waiting for it would wait forever.
    """
    check_int("tokens", n, minimum=1)
    if n > rate.burst:
        raise ValueError(f"cannot take {n} tokens at once from a bucket of burst {rate.burst}")
    interval = rate.interval_ns
    start = now if tat is None or tat < now else tat
    new_tat = start + n * interval
    allowed_until = now + rate.burst * interval
    if new_tat <= allowed_until:
        return RateTake(True, new_tat)
    return RateTake(False, start if tat is not None else now, new_tat - rate.burst * interval)


def room(tat: int | None, now: int, rate: Rate) -> int:
    """How many tokens a take at ``now`` could have at once (0 to ``rate.burst``)."""
    interval = rate.interval_ns
    start = now if tat is None or tat < now else tat
    return max(0, (now + rate.burst * interval - start) // interval)


def charge(tat: int | None, now: int, rate: Rate, n: int) -> int:
    """The bucket's ``tat`` after ``n`` tokens went at ``now`` (``n`` within :func:`room`)."""
    start = now if tat is None or tat < now else tat
    return start + n * rate.interval_ns
