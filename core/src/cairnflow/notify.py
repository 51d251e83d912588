"""Wake-ups between clients of one store.

A notifier is a hint, never a delivery: clients keep polling, so a lost, late
or duplicated notification changes when work starts, never whether it runs.
The channel is derived from the store's namespace (schema and table prefix),
so two clusters on one database never wake each other.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["LOCAL", "LocalNotifier", "Notifier"]


@runtime_checkable
class Notifier(Protocol):
    """Sends and receives "work may be due" hints on a channel."""

    def notify(self, channel: str) -> None:
        """Tell every listener of ``channel`` (in any process the notifier reaches).

        Requirement: it must not block its caller. The engine calls it from an
        enqueue and from the committer, right after a write: a notifier whose
        transport can stall (a broker, a second connection) hands the hint to a
        thread of its own and returns; a hint it cannot send is dropped (the
        listeners' polls find the work).
        """
        ...

    def listen(self, channel: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` (quickly, from any thread) on each hint; return a function that stops."""
        ...


class LocalNotifier:
    """An in-process bus: wakes clients of the same store in this process at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: defaultdict[str, list[Callable[[], None]]] = defaultdict(list)

    def notify(self, channel: str) -> None:
        """Call every ``wake`` registered on ``channel``."""
        with self._lock:
            subscribers = list(self._subscribers.get(channel, ()))
        for wake in subscribers:
            wake()

    def listen(self, channel: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Register ``wake`` on ``channel``; it is also called once now, to cover earlier hints."""
        with self._lock:
            self._subscribers[channel].append(wake)
        wake()

        def stop() -> None:
            with self._lock:
                subscribers = self._subscribers.get(channel)
                if subscribers and wake in subscribers:
                    subscribers.remove(wake)
                    if not subscribers:
                        del self._subscribers[channel]

        return stop


LOCAL = LocalNotifier()
"""The process-wide in-process bus that in-process and file stores offer by default."""
