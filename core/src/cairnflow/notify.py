"""Wake-ups between clients of one store.

A notifier is a hint, never a delivery: clients keep polling, so a lost, late
or duplicated notification changes when work starts, never whether it runs.
The channel is derived from the store's namespace (schema and table prefix),
so two clusters on one database never wake each other.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = [
    "LOCAL",
    "ClosableNotifier",
    "InlineNotifier",
    "LocalNotifier",
    "Notifier",
    "Subscribers",
    "reaches_other_processes",
]

log = logging.getLogger("cairnflow.notify")


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


@runtime_checkable
class ClosableNotifier(Notifier, Protocol):
    """A notifier holding threads or connections: a store given one closes it with itself."""

    def close(self) -> None:
        """Stop the notifier's threads and close its connections (idempotent)."""
        ...


@runtime_checkable
class InlineNotifier(Notifier, Protocol):
    """A notifier whose hint a store can send inside the enqueue's own transaction.

    Requirement: the hint is a statement of the database the runs are written
    to, delivered at that transaction's commit and dropped with its rollback
    (Postgres's ``NOTIFY``: :meth:`Dialect.notify_in_transaction`). The store
    then sends no statement more and no second round trip, and the listeners
    wake as the runs become visible, not one round trip later.
    """

    def reserve_inline(self, channel: str) -> bool:
        """Whether a hint of ``channel`` would go out now (no hint sent within the
        notifier's window): if so, it counts as sent now, and the caller sends it in its
        transaction. False: the caller sends none, and its :meth:`notify` after the
        commit is coalesced as usual. Hints still pending may be left to that
        transaction (:meth:`sent_inline`), never dropped if it rolls back."""
        ...

    def sent_inline(self, channel: str) -> None:
        """The transaction holding a reserved hint of ``channel`` committed: the next
        :meth:`notify` of ``channel`` from this thread (the one that follows that commit)
        is covered by it, and sends nothing; so may be the hints pending since before
        the reservation (their runs committed before it)."""
        ...


def reaches_other_processes(notifier: Notifier) -> bool:
    """True unless ``notifier`` is an in-process bus (:class:`LocalNotifier`).

    The one rule by which a store given a notifier declares ``Cap.NOTIFY``: a
    notifier that carries hints beyond this process (a broker, a database's
    LISTEN/NOTIFY) wakes idle clients of other processes.
    """
    return not isinstance(notifier, LocalNotifier)


class Subscribers:
    """The ``wake`` callbacks of a notifier by channel, for notifiers over a transport.

    Thread-safe: ``listen()`` adds from any thread while the notifier's own
    thread calls :meth:`wake` on each hint. A ``wake`` that raises is logged
    and the others are still called.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wakes: dict[str, list[Callable[[], None]]] = {}

    def add(self, channel: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Register ``wake`` on ``channel``; return the function that removes it (idempotent)."""
        with self._lock:
            self._wakes.setdefault(channel, []).append(wake)

        def remove() -> None:
            with self._lock:
                wakes = self._wakes.get(channel)
                if wakes is not None and wake in wakes:
                    wakes.remove(wake)
                    if not wakes:
                        del self._wakes[channel]

        return remove

    def channels(self) -> frozenset[str]:
        """The channels somebody listens on."""
        with self._lock:
            return frozenset(self._wakes)

    def wake(self, channel: str) -> None:
        """Call every ``wake`` of ``channel``."""
        with self._lock:
            wakes = list(self._wakes.get(channel, ()))
        for wake in wakes:
            _call(wake)

    def wake_all(self) -> None:
        """Call every ``wake`` of every channel (after a reconnection: hints may be lost)."""
        with self._lock:
            wakes = [wake for channel in self._wakes.values() for wake in channel]
        for wake in wakes:
            _call(wake)


def _call(wake: Callable[[], None]) -> None:
    try:
        wake()
    except Exception:
        log.exception("a wake-up callback raised")


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
