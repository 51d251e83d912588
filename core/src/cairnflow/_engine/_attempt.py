"""The local state of one claimed attempt, and how it is interrupted.

An attempt's outcome is decided exactly once on this node: whoever first
*finalizes* it (the worker with the step's return value, the keeper at the
deadline, a lost or cancelled lease, a stopping client) decides what, if
anything, is written. Everyone else finds it finalized and writes nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from enum import Enum

from .._errors import Cancelled, LeaseLost, StepTimeout
from ..store import ClaimedAttempt

__all__ = ["End", "RunningAttempt"]


class End(Enum):
    """Why a running attempt was finalized, in this client (never stored).

    Decided once per attempt, by whoever finalizes it first (worker, watchdog,
    lease keeper, ``stop``); it says who writes what: only ``COMPLETED`` and
    ``TIMED_OUT`` hand an outcome to the committer. The store's side of the same
    moment is the :class:`~cairnflow.StepStatus` that outcome writes.
    """

    COMPLETED = "completed"
    """The worker has the outcome and writes it."""
    TIMED_OUT = "timed_out"
    """The keeper wrote a StepTimeout failure at the deadline."""
    LEASE_LOST = "lease_lost"
    """The lease is gone; nothing may be written."""
    CANCELLED = "cancelled"
    """The run was cancelled; the store already knows."""
    STOPPING = "stopping"
    """The client stops; the attempt is handed back."""


class _StepTimedOut(StepTimeout):
    """Raised inside a sync step that ran past its deadline."""


class _LeaseWasLost(LeaseLost):
    """Raised inside a sync step whose lease was lost."""


class _RunCancelled(Cancelled):
    """Raised inside a sync step whose run was cancelled or whose client stops."""


_RAISED_FOR: dict[End, type[BaseException]] = {
    End.TIMED_OUT: _StepTimedOut,
    End.LEASE_LOST: _LeaseWasLost,
    End.CANCELLED: _RunCancelled,
    End.STOPPING: _RunCancelled,
}


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    """Schedule ``exc`` to be raised in thread ``thread_id`` (None clears a pending one)."""
    set_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    target = ctypes.c_ulong(thread_id)
    if set_exc(target, ctypes.py_object(exc) if exc is not None else None) > 1:
        set_exc(target, None)  # more than one thread matched: undo, as the C API asks


class RunningAttempt:
    """One claimed attempt held by this client, from claim to outcome.

    One name for one thing: in the engine a variable holding one of these is
    ``running``; ``attempt`` is always the attempt *number* (``claimed.attempt``,
    ``ctx.attempt``: 1 for the first try of a step).
    """

    def __init__(
        self, claimed: ClaimedAttempt, renewed_at: float, *, interrupt: bool = True
    ) -> None:
        self.claimed = claimed
        self.may_interrupt = interrupt
        self.token = claimed.token
        self._cancelled = False
        self._cancel_event: threading.Event | None = None
        self.renewed_at = renewed_at
        """``time.monotonic()`` when the latest renewal that landed began."""
        self.deadline: float | None = None
        self.end: End | None = None
        self.ended_at = 0.0
        """``time.monotonic()`` when the end was decided."""
        self.slot_freed = False
        """True once the attempt's worker slot was given back (see ``EngineState.free_slots``)."""
        self.begun = False
        """True once a worker took the attempt up (see :meth:`begin`)."""
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self._in_user_code = False
        self._interrupted = False
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def finalized(self) -> bool:
        """True once an outcome was decided."""
        return self.end is not None

    @property
    def cancelled(self) -> bool:
        """True once the attempt was asked to stop (see :meth:`cancel`)."""
        return self._cancelled

    @property
    def cancel_event(self) -> threading.Event:
        """An event set when the attempt is asked to stop.

        Made on first use: most attempts end without anyone waiting on it, and
        an event (a condition and its lock) is the dearest part of an attempt.
        """
        event = self._cancel_event
        if event is None:
            with self._lock:
                event = self._cancel_event
                if event is None:
                    event = threading.Event()
                    if self._cancelled:
                        event.set()
                    self._cancel_event = event
        return event

    def cancel(self) -> None:
        """Ask the step's code to stop: :attr:`cancelled` and :attr:`cancel_event` say so."""
        with self._lock:
            self._cancelled = True
            event = self._cancel_event
        if event is not None:
            event.set()

    def finalize(self, end: End) -> bool:
        """Decide the attempt's end; True only for the first caller."""
        with self._lock:
            if self.end is not None:
                return False
            self.end = end
            self.ended_at = time.monotonic()
            return True

    def begin(self) -> bool:
        """A worker takes the attempt up; False if it was finalized before (nothing to run)."""
        with self._lock:
            if self.end is not None:
                return False
            self.begun = True
            return True

    def give_back_unbegun(self) -> bool:
        """Finalize for ``End.STOPPING`` an attempt no worker took up yet (a drain hands it
        back at once rather than start it); False if it began or was finalized."""
        with self._lock:
            if self.begun or self.end is not None:
                return False
            self.end = End.STOPPING
            self.ended_at = time.monotonic()
            return True

    def stop(self, end: End) -> bool:
        """Finalize for ``end``, set the cancel event and interrupt the step's code."""
        if not self.finalize(end):
            return False
        self.cancel()
        self.interrupt()
        return True

    # -- user code, sync and async ----------------------------------------------------------
    def enter_user_code(self) -> None:
        """Mark the calling thread as running this attempt's sync step function."""
        with self._lock:
            self._thread_id = threading.get_ident()
            self._in_user_code = True

    def leave_user_code(self) -> None:
        """Unmark, and drop an interrupt that was scheduled but not yet delivered."""
        while True:
            try:
                with self._lock:
                    self._in_user_code = False
                    if self._interrupted and self._thread_id is not None:
                        _set_async_exc(self._thread_id, None)
                return
            except (_StepTimedOut, _LeaseWasLost, _RunCancelled):
                # The interrupt landed on the way out; it is spent now, try again.
                continue

    def attach_task(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[object]) -> None:
        """Record the asyncio task running this attempt's async step function."""
        with self._lock:
            self._loop = loop
            self._task = task
        if self.end is not None:
            self.interrupt()

    def interrupt(self) -> None:
        """Stop the step's code: cancel its task, or raise in its thread.

        A sync step blocked inside a C call (``time.sleep``, a socket read) sees
        the exception only when that call returns; its outcome is already
        decided, so nothing it returns afterwards is written.
        """
        with self._lock:
            if self._task is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)
                return
            if not self.may_interrupt or not self._in_user_code or self._interrupted:
                return
            if self._thread_id is None:
                return
            exc = _RAISED_FOR.get(self.end) if self.end is not None else None
            if exc is None:
                return
            self._interrupted = True
            _set_async_exc(self._thread_id, exc)

    def expired(self, now: float, lease: float) -> bool:
        """True when no renewal landed for a whole lease (measured on ``time.monotonic``)."""
        return now - self.renewed_at >= lease

    def overdue(self, now: float) -> bool:
        """True past the attempt's deadline."""
        return self.deadline is not None and now >= self.deadline

    def __repr__(self) -> str:
        c = self.claimed
        return f"<attempt {c.workflow}/{c.step} run={c.run_id} #{c.attempt} end={self.end}>"


def monotonic() -> float:
    """The clock local lease accounting uses."""
    return time.monotonic()
