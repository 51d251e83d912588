"""The lifecycle API of :class:`~cairnflow.Client`: ``on_event`` and the operator's view of
the store's durable subscriptions (``Cap.LIFECYCLE``).

A mixin of its own, as the schedule and queue methods are. The events come from
the store's outbox through the client's :class:`~._lifecycle.LifecycleDispatcher`
(docs/lifecycle.md), started with the client when it has subscribers or a
registered workflow with an ``on_failure`` handler. ``lifecycle_subscriptions`` and
``drop_lifecycle_subscription`` work from a client never started (``cairn lifecycle``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from .._caps import Cap
from .._models import (
    LIFECYCLE_ALL,
    LIFECYCLE_EVENTS,
    LIFECYCLE_FAILURES,
    LIFECYCLE_KINDS,
    LifecycleEvent,
    LifecycleSubscription,
)
from .._names import check_name
from ..store import Lifecycle, StoredRun
from ._lifecycle import LifecycleDispatcher, Subscriber
from ._state import EngineState

__all__ = ["LifecycleMethods"]


class LifecycleMethods:
    """``on_event``, starting the lifecycle dispatcher, and the store's subscriptions."""

    _state: EngineState
    _lifecycle: threading.Lock
    _started: bool
    _stopped: bool
    _subscribers: list[Subscriber]
    _events: LifecycleDispatcher | None

    def on_event(
        self,
        callback: Callable[[LifecycleEvent], object],
        *,
        kinds: Iterable[str] | None = None,
        workflows: Iterable[str] | None = None,
    ) -> None:
        """Call ``callback(event)`` for run and step events of the fleet (``Cap.LIFECYCLE``).

        Events (:class:`~cairnflow.LifecycleEvent`) are read from the store, so
        they come from every client's transitions, not only this one's; the
        subscribing clients of a fleet share them, so each event is delivered
        by one of them (again by another only when the first died or stalled
        past its lease before it acknowledged it: at-least-once). ``kinds``
        (see :data:`~cairnflow._models.LIFECYCLE_KINDS`) and ``workflows``
        narrow what this callback is given (None: all). The store records what
        is wanted from the client's :meth:`start` on (docs/lifecycle.md).
        """
        if not callable(callback):
            raise TypeError(f"on_event takes a callable (event), got {callback!r}")
        chosen_kinds = None if kinds is None else frozenset(kinds)
        if chosen_kinds is not None:
            unknown = sorted(chosen_kinds - LIFECYCLE_KINDS)
            if unknown or not chosen_kinds:
                raise ValueError(
                    f"on_event kinds must be some of {', '.join(sorted(LIFECYCLE_KINDS))}; "
                    f"got {unknown or 'none'}"
                )
        chosen_workflows = None
        if workflows is not None:
            if isinstance(workflows, str):
                workflows = [workflows]
            chosen_workflows = frozenset(check_name("workflow", w) for w in workflows)
            if not chosen_workflows:
                raise ValueError("on_event workflows= names at least one workflow (None: all)")
        self._state.require(Cap.LIFECYCLE, "on_event()")
        subscriber = Subscriber(callback, chosen_kinds, chosen_workflows)
        with self._lifecycle:
            self._subscribers.append(subscriber)
            if self._events is not None:
                self._events.add(subscriber)
            elif self._started and not self._stopped:
                self._start_events()

    def lifecycle_subscriptions(self) -> list[LifecycleSubscription]:
        """Every durable subscription the store records, with its backlog (``Cap.LIFECYCLE``).

        A client records its subscriptions when it starts, and they outlive it:
        events keep being written for them while no client runs
        (docs/lifecycle.md). One whose backlog only grows is served by no
        running client; :meth:`drop_lifecycle_subscription` ends it.
        """
        return self._lifecycle_facet("lifecycle_subscriptions()").lifecycle_subscriptions()

    def drop_lifecycle_subscription(self, channel: str, workflow: str | None = None) -> int | None:
        """End the subscription of ``channel`` to ``workflow`` (None: the one to every workflow).

        ``channel`` is ``"events"`` (``on_event``) or ``"on_failure"`` (``on_failure``
        handlers). Its undelivered rows that no other subscription covers are
        deleted; returns how many, or None when no such subscription is recorded
        (nothing is changed). A running client that wants it records it again
        only when it next starts: until then no new events of it are written.
        """
        if channel not in (LIFECYCLE_EVENTS, LIFECYCLE_FAILURES):
            raise ValueError(
                f"a lifecycle channel is {LIFECYCLE_EVENTS!r} or {LIFECYCLE_FAILURES!r}, "
                f"got {channel!r}"
            )
        name = LIFECYCLE_ALL if workflow is None else check_name("workflow", workflow)
        outbox = self._lifecycle_facet("drop_lifecycle_subscription()")
        return outbox.unsubscribe_lifecycle(channel, name)

    def _lifecycle_facet(self, what: str) -> Lifecycle:
        state = self._state
        state.require(Cap.LIFECYCLE, what)
        outbox = state.facets.lifecycle
        assert outbox is not None  # declared (required above), so check_store made sure
        return outbox

    def _start_events(self) -> None:
        """Start delivering lifecycle events and running on_failure handlers, when wanted."""
        state = self._state
        outbox = state.facets.lifecycle
        wanted = self._subscribers or any(
            w.failure_handler is not None for w in state.registry.values()
        )
        if outbox is None or not wanted:
            return
        self._events = LifecycleDispatcher(state, outbox, self._subscribers, self._run_of)
        self._events.start()

    def _run_of(self, run_id: str) -> tuple[Any, StoredRun | None]:
        """A run's decoded payload and its stored row (None, None once the run was deleted)."""
        stored = self._state.store.get_run(run_id)
        return (
            (None, None) if stored is None else (self._state.codec.decode(stored.payload), stored)
        )
