"""The timing methods of :class:`~cairnflow.Client`: reschedule, force, and the next due time.

Each is one call of the ``RunTiming`` facet, so it works from a client that
is never started (an operator's script, ``cairn run reschedule``) and holds
for every client at once: a rescheduled or forced run is rows in the store,
read by every claim. Validation happens here, once, before anything is sent.

``next_due`` lets an application that embeds cairnflow (and drives it on its
own loop) sleep exactly until its next piece of work, instead of polling.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from .._caps import Cap
from ..store import RunTiming
from ._reads import RunLike, run_id_of
from ._state import EngineState

__all__ = ["TimingMethods"]

_NS = 1_000_000_000


def start_time(now: int, at: int | datetime | None, delay: float | timedelta | None) -> int:
    """The new start time of :meth:`TimingMethods.reschedule`, in Unix nanoseconds.

    Exactly one of ``at`` (Unix nanoseconds, or an aware datetime) and ``delay``
    (seconds from ``now``, or a timedelta); a time in the past means now.
    """
    if (at is None) == (delay is None):
        raise ValueError("reschedule() takes exactly one of at= (a time) and delay= (seconds)")
    if at is not None:
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError(f"reschedule(at=...) needs an aware datetime, got {at!r}")
            at = int(at.timestamp() * _NS)
        if isinstance(at, bool) or not isinstance(at, int):
            raise ValueError(
                f"reschedule(at=...) takes Unix nanoseconds (an int) or a datetime, got {at!r}"
            )
        return max(at, now)
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"reschedule(delay=...) takes seconds, got {delay!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"reschedule(delay=...) must be a finite number >= 0, got {delay!r}")
    return now + int(seconds * _NS)


class TimingMethods:
    """Rescheduling and forcing runs, and when this client's next work falls due."""

    _state: EngineState

    def _timing(self, cap: Cap, what: str) -> RunTiming:
        """The store's ``RunTiming`` facet, once ``cap`` is found declared."""
        self._state.require(cap, what)
        facets = self._state.facets
        if facets.timing is None:  # pragma: no cover - declared, so check_store made sure
            raise AssertionError(f"{what}: {cap.value} declared without the run timing facet")
        return facets.timing

    def reschedule(
        self,
        run: RunLike,
        *,
        at: int | datetime | None = None,
        delay: float | timedelta | None = None,
    ) -> bool:
        """Move a run that has not started to another start time (``Cap.RESCHEDULE``).

        ``at`` is Unix nanoseconds (or an aware datetime), ``delay`` seconds
        from now (or a timedelta): exactly one. A time in the past means now.
        The run moves whole, in one transaction, while none of its steps was
        ever attempted (a queued or delayed run); False, changing nothing, once
        a step of it was claimed (even by a claim racing this call) or it
        finished. Raises :class:`~cairnflow.RunNotFound` for an unknown run.
        """
        state = self._state
        timing = self._timing(Cap.RESCHEDULE, "reschedule()")
        run_id = run_id_of(run)
        now = state.now()
        start = start_time(now, at, delay)
        moved = timing.reschedule_run(run_id, start, now)
        if moved:
            if start <= now:
                state.work_made_ready(others=True)
            else:
                state.add_timer(start)
        return moved

    def force_run(self, run: RunLike) -> bool:
        """Start a delayed or paused run now (``Cap.FORCE_RUN``); False if nothing changed.

        Its scheduled steps (a delayed start, a retry's backoff) become ready
        now, and no queue or workflow pause holds any step of it from now on:
        every client serving its queue may claim it. False for a finished run,
        or one forced already with nothing left to bring forward. Raises
        :class:`~cairnflow.RunNotFound` for an unknown run.
        """
        state = self._state
        timing = self._timing(Cap.FORCE_RUN, "force_run()")
        forced = timing.force_run(run_id_of(run), state.now())
        if forced:
            state.work_made_ready(others=True)
        return forced

    def next_due(self) -> int | None:
        """When this client's next piece of work falls due, in Unix nanoseconds (``Cap.DUE_QUERY``).

        Now when a step of its workflows on its queues is ready (and no pause
        holds it); otherwise the earliest of a delayed run's start, a retry's,
        a sleep's end, a wait's deadline, an expired lease, and (with
        schedules) a schedule's next fire. None when nothing is pending. An
        application that drives a client on its own loop sleeps until then.
        """
        state = self._state
        timing = self._timing(Cap.DUE_QUERY, "next_due()")
        now = state.now()
        with state.lock:
            workflows = sorted(state.workflow_names)
            queues = sorted(state.queues)
        if not workflows:
            return None
        due = timing.next_due(workflows=workflows, queues=queues, now=now)
        schedules = state.facets.schedules
        if schedules is not None and due != now:
            for record in schedules.list_schedules(workflows):
                if not record.paused and (due is None or record.next_fire < due):
                    due = max(record.next_fire, now)
        return due
