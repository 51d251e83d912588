"""Clocks: where "now" comes from.

cairnflow keeps two clocks apart. The *scheduling clock* (``Client(clock=...)``)
drives every due time: delayed starts, sleeps, wait deadlines, retry backoff.
The *lease clock* (``Client(lease_clock=...)``) measures leases, which other
nodes compare against their own, so it must be wall time shared by the cluster.
A test that moves a :class:`Fake` scheduling clock by an hour must not make
every running step look abandoned, which is why the two are separate.

Every time is an integer of Unix nanoseconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = [
    "Clock",
    "DatabaseClock",
    "Fake",
    "Real",
    "Scaled",
    "Subscribable",
    "from_ns",
    "to_ns",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@runtime_checkable
class Clock(Protocol):
    """A source of "now" as integer Unix nanoseconds."""

    def now_ns(self) -> int:
        """Return the current time in Unix nanoseconds."""
        ...


@runtime_checkable
class Subscribable(Protocol):
    """A clock that says when it jumps (a fake clock moved by a test): clients subscribe."""

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after every move; return a function that unsubscribes."""
        ...


class Real:
    """The machine's wall clock (``time.time_ns``)."""

    def now_ns(self) -> int:
        """Return ``time.time_ns()``."""
        return time.time_ns()

    def __repr__(self) -> str:
        return "clock.Real()"


class Scaled:
    """Wall time sped up ``speed`` times from ``epoch_ns``, as of the real instant ``since_ns``.

    Every process given the same three numbers reads the same time, so a
    cluster of processes can be run through hours of schedules in minutes (a
    test, a demo). Only ever use it as a scheduling clock: leases stay on the
    real one.
    """

    def __init__(self, speed: float, epoch_ns: int, since_ns: int) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.speed = float(speed)
        self.epoch_ns = int(epoch_ns)
        self.since_ns = int(since_ns)

    def now_ns(self) -> int:
        """``epoch_ns`` plus the real time since ``since_ns``, times ``speed``."""
        return self.epoch_ns + int((time.time_ns() - self.since_ns) * self.speed)

    def __repr__(self) -> str:
        return f"clock.Scaled({self.speed:g}x from {from_ns(self.epoch_ns).isoformat()})"


class Fake:
    """A clock that moves only when told to; for tests.

    Clients subscribe to it, so :meth:`advance` wakes them at once to look for
    work that became due.
    """

    def __init__(self, start: datetime | int | None = None) -> None:
        if start is None:
            start = datetime(2026, 1, 1, tzinfo=UTC)
        self._now = to_ns(start) if isinstance(start, datetime) else int(start)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def now_ns(self) -> int:
        """Return the fake time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> int:
        """Move the clock forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError(f"a Fake clock only moves forward, got {seconds!r}")
        with self._lock:
            self._now += int(seconds * 1_000_000_000)
            now = self._now
            listeners = list(self._listeners)
        for listener in listeners:
            listener()
        return now

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after every move; return a function that unsubscribes."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def __repr__(self) -> str:
        return f"clock.Fake({from_ns(self.now_ns()).isoformat()})"


class DatabaseClock:
    """The database server's clock as the one "now" of every node.

    ``read`` returns the server's time in Unix nanoseconds. It is read at
    construction (which fails when it cannot) and again every ``resync``
    seconds; in between the clock advances on this process's monotonic clock,
    so a wall-clock jump on a node moves nothing. A failed resync keeps the
    last reading and is tried again at the next call.
    """

    def __init__(self, read: Callable[[], int], resync: float = 60.0) -> None:
        if resync <= 0:
            resync = 60.0
        self._read = read
        self._resync_ns = int(resync * 1_000_000_000)
        self._lock = threading.Lock()
        self._base_db = 0
        self._base_mono = 0
        self.uncertainty_ns = 0
        """Half the round trip of the last reading: how far off it may be."""
        self.offset_ns = 0
        """How far the database's clock was ahead of this machine's at the last reading."""
        self.sync()

    def sync(self) -> None:
        """Read the database's clock now."""
        before = time.monotonic_ns()
        wall_before = time.time_ns()
        database = int(self._read())
        after = time.monotonic_ns()
        wall_after = time.time_ns()
        with self._lock:
            self._base_mono = (before + after) // 2
            self._base_db = database
            self.uncertainty_ns = (after - before) // 2
            self.offset_ns = database - (wall_before + wall_after) // 2

    def now_ns(self) -> int:
        """The database's time now: the last reading advanced on the monotonic clock."""
        mono = time.monotonic_ns()
        with self._lock:
            stale = mono - self._base_mono >= self._resync_ns
        if stale:
            try:
                self.sync()
            except Exception:
                logging.getLogger("cairnflow").warning(
                    "database clock resync failed", exc_info=True
                )
        with self._lock:
            return self._base_db + (time.monotonic_ns() - self._base_mono)

    def __repr__(self) -> str:
        return f"clock.DatabaseClock(offset={self.offset_ns / 1e6:.3f}ms)"


def to_ns(moment: datetime) -> int:
    """Return ``moment`` (timezone-aware) as Unix nanoseconds."""
    if moment.tzinfo is None:
        raise ValueError("a naive datetime is ambiguous: give it a tzinfo (e.g. datetime.UTC)")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def from_ns(ns: int) -> datetime:
    """Return Unix nanoseconds ``ns`` as a UTC datetime (microsecond precision)."""
    return _EPOCH + timedelta(microseconds=ns // 1_000)
