"""Leader election: one client of a cluster fires the schedules.

Without election every client fires schedules and the store's compare-and-swap
makes each tick fire once; that needs nothing and survives a split brain. Some
work must come from one known node (a job that talks to a system that allows
one caller); ``Client(leader_election=True)`` then limits schedule firing (and
the clean-up of old ticks) to the leader of the role ``scheduler``. Steps run
on every client either way, and so does the housekeeping of leases and due
work, which every client does for its own workflows.

The leader holds a lease row (the ``Leadership`` facet) renewed every third of
its length; a leader that dies is replaced once its lease runs out, and the
row's *term* grows on every handover, a fencing token that tells the new
leader's acts from a deposed one's. A leader answers :meth:`Elector.is_leader`
from memory and stops believing it once its last renewal is a whole lease old,
so it steps down by itself when cut off from the store, before anyone else can
take over. Any other lock fits the :class:`Elector` protocol (a Redis lock, a
Kubernetes Lease).
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from ..store import Leader, Leadership
from ._attempt import monotonic
from ._state import EngineState

__all__ = ["LEADER_ROLE", "Elector", "StoreElector"]

LEADER_ROLE = "scheduler"
"""The role whose leader fires schedules."""


@runtime_checkable
class Elector(Protocol):
    """Decides whether this client leads (``Client(leader_election=...)``).

    Requirement: :meth:`is_leader` is answered from memory (it is asked at
    every poll) and is True on at most one client of a cluster at a time, as
    far as the elector can know.
    """

    def start(self) -> None:
        """Begin taking part (called by ``Client.start()``)."""
        ...

    def stop(self) -> None:
        """Stop taking part, and hand the leadership on if this client holds it."""
        ...

    def is_leader(self) -> bool:
        """True while this client leads."""
        ...


class StoreElector:
    """An :class:`Elector` over the store's ``Leadership`` facet (see the module docstring)."""

    def __init__(
        self, state: EngineState, leadership: Leadership, *, lease: float, role: str = LEADER_ROLE
    ) -> None:
        self._state = state
        self._store = leadership
        self._lease = lease
        self._role = role
        self._node = state.settings.node_id
        self._leader: Leader | None = None
        self._held_until = 0.0
        """Monotonic time until which this client may believe it leads."""
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"cairnflow-elector-{self._node}", daemon=True
        )

    @property
    def leader(self) -> Leader | None:
        """The lease as last read (any node's)."""
        return self._leader

    @property
    def term(self) -> int | None:
        """The term of this client's leadership while it leads, else None."""
        leader = self._leader
        return leader.term if leader is not None and self.is_leader() else None

    def is_leader(self) -> bool:
        """True while this client holds the lease and its last renewal is under a lease old."""
        leader = self._leader
        return leader is not None and leader.node == self._node and monotonic() < self._held_until

    def start(self) -> None:
        """Claim at once, then keep claiming every third of the lease."""
        self.claim()
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and give the lease up, so another client leads at once."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self._lease)
        if self.is_leader():
            try:
                self._store.resign_leadership(self._role, self._node)
            except Exception:  # the lease runs out instead
                self._state.log.warning("could not resign the leadership", exc_info=True)
        self._held_until = 0.0

    def claim(self) -> None:
        """Take or extend the lease once (also the renewal)."""
        state = self._state
        started = monotonic()
        lease_ns = int(self._lease * 1_000_000_000)
        now = state.lease_clock.now_ns()
        try:
            leader = self._store.claim_leadership(
                self._role, self._node, lease_now=now, lease_until=now + lease_ns
            )
        except Exception:  # keep believing only until the last renewal is a lease old
            state.log.warning("could not renew the leadership", exc_info=True)
            return
        was = self.is_leader()
        self._leader = leader
        if leader.node == self._node:
            self._held_until = started + self._lease
            if not was:
                state.log.info("leading %r (term %d)", self._role, leader.term)
                state.wake()

    def _loop(self) -> None:
        while not self._stop.wait(self._lease / 3):
            self.claim()
