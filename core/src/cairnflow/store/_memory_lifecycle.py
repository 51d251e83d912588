"""The ``Lifecycle`` facet of ``memory://``: the lifecycle outbox as a dict of rows.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module. The
store calls :meth:`MemoryLifecycle._step_event` and :meth:`_run_event` under
its lock, in the same step that makes the transition, as a SQL store's
triggers write the row in the transition's transaction; an attempt fenced out
never reaches a transition, so it writes nothing. Rows are written only while
a subscription wants the run's workflow, leased to a token, and deleted by it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Collection
from dataclasses import dataclass, replace

from .._errors import ErrorInfo
from .._models import (
    LIFECYCLE_ALL,
    LIFECYCLE_EVENTS,
    LIFECYCLE_FAILURES,
    LifecycleEvent,
    LifecycleSubscription,
)

__all__ = ["MemoryLifecycle"]

_STEP_KINDS = {
    "claimed": "step.started",
    "succeeded": "step.succeeded",
    "failed": "step.failed",
    "retried": "step.retried",
    "reclaimed": "step.reclaimed",
    "cancelled": "step.cancelled",
}
"""The step transitions that are lifecycle events, by their step history name."""


@dataclass(slots=True)
class _Row:
    channel: str
    event: LifecycleEvent
    token: str | None = None
    lease_until: int | None = None


def _covers(channel: str, workflow: str, row: _Row) -> bool:
    """Whether the subscription of ``channel`` to ``workflow`` (``""``: every one) wants ``row``."""
    return row.channel == channel and workflow in (LIFECYCLE_ALL, row.event.workflow)


class MemoryLifecycle:
    """The lifecycle outbox of a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()  # the store's other facets
        self._subscriptions: dict[tuple[str, str], int] = {}
        """When each ``(channel, workflow)`` was first recorded."""
        self._outbox: dict[int, _Row] = {}
        self._outbox_ids = itertools.count(1)

    def _wants(self, channel: str, workflow: str) -> bool:
        subs = self._subscriptions
        return (channel, workflow) in subs or (channel, LIFECYCLE_ALL) in subs

    def _write_event(self, channel: str, event: LifecycleEvent) -> None:
        event_id = next(self._outbox_ids)
        self._outbox[event_id] = _Row(channel, replace(event, id=event_id, deliveries=0))

    def _step_event(
        self,
        *,
        run_id: str,
        workflow: str,
        step: str,
        first: bool,
        attempt: int,
        node: str | None,
        transition: str,
        error: ErrorInfo | None,
        now: int,
    ) -> None:
        """Write the event of a step's ``transition`` when one is wanted (lock held)."""
        kind = _STEP_KINDS.get(transition)
        if kind is None or not self._subscriptions or not self._wants(LIFECYCLE_EVENTS, workflow):
            return
        if kind == "step.started" and attempt == 1 and first:
            started = LifecycleEvent(0, "run.started", run_id, workflow, None, 1, node, now)
            self._write_event(LIFECYCLE_EVENTS, started)
        failure = error if kind in ("step.failed", "step.retried") else None
        event = LifecycleEvent(0, kind, run_id, workflow, step, attempt, node, now, failure)
        self._write_event(LIFECYCLE_EVENTS, event)

    def _run_event(
        self, run_id: str, workflow: str, state: str, error: ErrorInfo | None, now: int
    ) -> None:
        """Write the events of a run that ended in ``state`` when they are wanted (lock held)."""
        if not self._subscriptions:
            return
        event = LifecycleEvent(0, f"run.{state}", run_id, workflow, None, 0, None, now, error)
        if self._wants(LIFECYCLE_EVENTS, workflow):
            self._write_event(LIFECYCLE_EVENTS, event)
        if state == "failed" and self._wants(LIFECYCLE_FAILURES, workflow):
            self._write_event(LIFECYCLE_FAILURES, event)

    def subscribe_lifecycle(self, channel: str, workflow: str, now: int) -> None:
        """Record a subscription of ``channel`` to ``workflow`` (idempotent)."""
        with self._lock:
            self._subscriptions.setdefault((channel, workflow), now)

    def unsubscribe_lifecycle(self, channel: str, workflow: str) -> int | None:
        """Drop a subscription and its undelivered rows no other subscription covers; how many
        rows went (None: no such subscription, nothing changed)."""
        with self._lock:
            if self._subscriptions.pop((channel, workflow), None) is None:
                return None
            gone = [
                i
                for i, row in self._outbox.items()
                if _covers(channel, workflow, row) and not self._wants(channel, row.event.workflow)
            ]
            for i in gone:
                del self._outbox[i]
            return len(gone)

    def lifecycle_subscriptions(self) -> list[LifecycleSubscription]:
        """Every subscription, by channel then workflow, with the backlog each covers."""
        found = []
        with self._lock:
            for (channel, workflow), since in sorted(self._subscriptions.items()):
                covered = [
                    row.event.at_ns
                    for row in self._outbox.values()
                    if _covers(channel, workflow, row)
                ]
                oldest = min(covered) if covered else None
                found.append(LifecycleSubscription(channel, workflow, since, len(covered), oldest))
        return found

    def claim_lifecycle(
        self,
        channel: str,
        workflows: Collection[str] | None,
        *,
        token: str,
        lease_until: int,
        now: int,
        limit: int,
    ) -> list[LifecycleEvent]:
        """Lease up to ``limit`` free rows of ``channel``, oldest first."""
        claimed: list[LifecycleEvent] = []
        with self._lock:
            for row in self._outbox.values():
                if len(claimed) >= limit:
                    break
                if row.channel != channel or (
                    row.lease_until is not None and row.lease_until >= now
                ):
                    continue
                if workflows is not None and row.event.workflow not in workflows:
                    continue
                row.token = token
                row.lease_until = lease_until
                row.event = replace(row.event, deliveries=row.event.deliveries + 1)
                claimed.append(row.event)
        return claimed

    def renew_lifecycle(self, ids: Collection[int], token: str, lease_until: int) -> list[int]:
        """Extend the leases ``token`` still holds among ``ids``; return their ids."""
        held: list[int] = []
        with self._lock:
            for i in sorted(ids):
                row = self._outbox.get(i)
                if row is not None and row.token == token:
                    row.lease_until = lease_until
                    held.append(i)
        return held

    def release_lifecycle(self, event_id: int, token: str, due_at: int) -> bool:
        """Hand a held row back, claimable again from ``due_at``."""
        with self._lock:
            row = self._outbox.get(event_id)
            if row is None or row.token != token:
                return False
            row.token = None
            row.lease_until = due_at
            return True

    def ack_lifecycle(self, ids: Collection[int], token: str) -> int:
        """Delete the rows among ``ids`` that ``token`` still holds; how many went."""
        gone = 0
        with self._lock:
            for i in ids:
                row = self._outbox.get(i)
                if row is not None and row.token == token:
                    del self._outbox[i]
                    gone += 1
        return gone
