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

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "Fake", "Real", "from_ns", "to_ns"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@runtime_checkable
class Clock(Protocol):
    """A source of "now" as integer Unix nanoseconds."""

    def now_ns(self) -> int:
        """Return the current time in Unix nanoseconds."""
        ...


class Real:
    """The machine's wall clock (``time.time_ns``)."""

    def now_ns(self) -> int:
        """Return ``time.time_ns()``."""
        return time.time_ns()

    def __repr__(self) -> str:
        return "clock.Real()"


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


def to_ns(moment: datetime) -> int:
    """Return ``moment`` (timezone-aware) as Unix nanoseconds."""
    if moment.tzinfo is None:
        raise ValueError("a naive datetime is ambiguous: give it a tzinfo (e.g. datetime.UTC)")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def from_ns(ns: int) -> datetime:
    """Return Unix nanoseconds ``ns`` as a UTC datetime (microsecond precision)."""
    return _EPOCH + timedelta(microseconds=ns // 1_000)
