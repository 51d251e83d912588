"""The lease keeper: renews this client's leases and enforces deadlines.

Two threads per client, so that a hung database call cannot stop the other:

* the *renewer* renews every attempt the client holds in one store call every
  third of the lease, from the claim on (an attempt waiting for a free worker
  keeps its lease too);
* the *watchdog* only looks at local state: an attempt whose renewal has not
  landed for a whole lease, measured on this process's monotonic clock, fences
  itself (another node may already hold the step, so its outcome must not be
  written), and an attempt past its timeout is failed with StepTimeout.

The renewer also records the client's heartbeat row (``Cap.SERVERS``) when it
starts and at each pass, and the keeper marks it stopped on a clean stop.
"""

from __future__ import annotations

import os
import socket
import threading

from .._version import __version__
from ..store import ServerRecord
from ..store._servers import PRUNE_AFTER_NS
from . import _events as events
from ._attempt import End, RunningAttempt, monotonic
from ._runner import StepRunner
from ._state import EngineState

__all__ = ["LeaseKeeper"]

# Ends after which the lease is deliberately let go, so it is not renewed.
_RELEASED = frozenset({End.LEASE_LOST, End.CANCELLED, End.STOPPING, End.TIMED_OUT})


class LeaseKeeper:
    """The renewer and watchdog threads of one client (see the module docstring)."""

    def __init__(self, state: EngineState, runner: StepRunner) -> None:
        self._state = state
        self._runner = runner
        self._stop = threading.Event()
        self._poke = state.replan
        self._started_at: int | None = None
        self._beats = 0
        node = state.settings.node_id
        self._threads = [
            threading.Thread(
                target=self._renew_loop, name=f"cairnflow-renewer-{node}", daemon=True
            ),
            threading.Thread(
                target=self._watch_loop, name=f"cairnflow-watchdog-{node}", daemon=True
            ),
        ]

    def start(self) -> None:
        """Start both threads."""
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop both threads and wait for them (a renewal hung in the store is left behind)."""
        self._stop.set()
        self._poke.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout)
        self._stopped()

    # -- renewer -------------------------------------------------------------------------------
    def _renew_loop(self) -> None:
        every = self._state.settings.lease / 3
        self._beat()
        while not self._stop.wait(every):
            self._renew()
            self._beat()

    # -- servers (Cap.SERVERS) ---------------------------------------------------------------
    def _beat(self) -> None:
        """Record this client's heartbeat row; prune day-old rows every 100th beat."""
        state = self._state
        servers = state.facets.servers
        if servers is None:
            return
        now = state.now()
        if self._started_at is None:
            self._started_at = now
        try:
            servers.record_server(
                ServerRecord(
                    node=state.settings.node_id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    queues=tuple(sorted(state.queues)),
                    workers=state.settings.workers,
                    version=__version__,
                    started_at=self._started_at,
                    seen_at=now,
                    beat_every=max(int(state.settings.lease / 3 * 1e9), 1),
                )
            )
            if self._beats % 100 == 0:
                servers.prune_servers(before=now - PRUNE_AFTER_NS, limit=100)
        except Exception:
            state.log.warning("could not record this server's heartbeat", exc_info=True)
        self._beats += 1

    def _stopped(self) -> None:
        """Mark this client's row stopped (a clean stop; a killed client's row goes stale)."""
        state = self._state
        if state.facets.servers is None or self._started_at is None:
            return
        try:
            state.facets.servers.stop_server(state.settings.node_id, state.now())
        except Exception:
            state.log.warning("could not mark this server stopped", exc_info=True)

    def _renewable(self, running: RunningAttempt, now: float) -> bool:
        if running.end is None:
            return True
        if running.end is End.COMPLETED:
            # Its outcome is being written: renewing it now would only race that write for
            # the same row (a deadlock on engines with row locks). A write still pending
            # after a third of the lease is slow (an outage): keep its lease alive then.
            return now - running.ended_at > self._state.settings.lease / 3
        return running.end not in _RELEASED

    def _renew(self) -> None:
        state = self._state
        now = monotonic()
        attempts = [a for a in state.held_attempts() if self._renewable(a, now)]
        if not attempts:
            return
        started = monotonic()
        try:
            result = state.store.renew([a.token for a in attempts], state.lease_until())
        except Exception:
            # Not fatal yet: an attempt fences itself once a whole lease passes unrenewed.
            state.log.warning("lease renewal failed; retrying", exc_info=True)
            return
        for running in attempts:
            if running.token in result.lost:
                self._fence(running)
            elif running.token in result.cancelled:
                running.stop(End.CANCELLED)
            else:
                running.renewed_at = max(running.renewed_at, started)

    # -- watchdog --------------------------------------------------------------------------------
    def _watch_loop(self) -> None:
        lease = self._state.settings.lease
        while not self._stop.is_set():
            self._poke.clear()
            wake_at = monotonic() + lease / 3
            for running in self._state.held_attempts():
                if running.finalized:
                    continue
                now = monotonic()
                if running.expired(now, lease):
                    self._fence(running)
                    continue
                if running.overdue(now):
                    self._time_out(running)
                    continue
                wake_at = min(wake_at, running.renewed_at + lease)
                if running.deadline is not None:
                    wake_at = min(wake_at, running.deadline)
            self._poke.wait(max(0.001, wake_at - monotonic()))

    def _time_out(self, running: RunningAttempt) -> None:
        # The failure is written from its own thread: the watchdog never waits on the store.
        if running.stop(End.TIMED_OUT):
            threading.Thread(
                target=self._runner.write_timeout,
                args=(running,),
                name="cairnflow-timeout",
                daemon=True,
            ).start()

    def _fence(self, running: RunningAttempt) -> None:
        if running.stop(End.LEASE_LOST):
            events.lease_lost(running.claimed, self._state.settings.node_id)
