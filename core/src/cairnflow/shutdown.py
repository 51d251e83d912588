"""Stopping a worker process on a signal, without ``Event.set()`` in the handler.

A Python signal handler runs in the main thread between two of its bytecodes, and
that may be while the main thread holds the lock inside the ``threading.Event`` it
is waiting on (``Event.wait`` runs bytecodes under its condition's lock). A handler
that calls ``set()`` on that event then waits for a lock its own thread holds, and
the process never stops: seen in CI, a conformance worker that ignored SIGTERM for
15 s, its main thread in ``Event.set`` called by the handler from inside
``Condition.__exit__``. :class:`StopRequest`'s handler counts and writes a byte to a
socket the waiting thread selects on: no lock anywhere.
"""

from __future__ import annotations

import contextlib
import select
import signal
import socket
from collections.abc import Callable
from types import FrameType

__all__ = ["StopRequest"]


class StopRequest:
    """A request to stop, made by a signal or by another thread, and waited for.

    ``install()`` makes SIGTERM and SIGINT (by default) request the stop; ``set()``
    requests it from any thread; ``wait()`` returns once either has. Neither takes a
    lock: both write a byte to a socket pair that ``wait()`` selects on, so the wait
    ends at once (the kernel's wake-up, not a slice of polling). ``wait`` still wakes
    every ``slice`` seconds, for ``until`` and for a signal the kernel gave another
    thread (Python runs handlers only in the main thread, when it runs).
    """

    def __init__(self, slice: float = 0.2) -> None:
        self.slice = slice
        self.signals = 0
        """Stop signals received so far."""
        self._requested = False
        self._wake, self._woken = socket.socketpair()
        self._wake.setblocking(False)
        self._woken.setblocking(False)

    def install(self, *signums: int) -> None:
        """Handle ``signums`` (SIGTERM and SIGINT when none are given); main thread only."""
        for signum in signums or (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.handler)

    def handler(self, signum: int, frame: FrameType | None) -> None:
        """The signal handler: counts, and wakes :meth:`wait`, taking no lock."""
        self.signals += 1
        self._poke()

    def set(self) -> None:
        """Request the stop (from any thread, or from a signal handler)."""
        self._requested = True
        self._poke()

    def is_set(self) -> bool:
        """True once a signal came or :meth:`set` was called."""
        return self.signals > 0 or self._requested

    def wait(self, until: Callable[[], bool] | None = None) -> None:
        """Return once the stop is requested, or ``until()`` is true (checked every slice)."""
        while not self.is_set() and not (until is not None and until()):
            with contextlib.suppress(OSError, ValueError):
                select.select([self._woken], [], [], self.slice)

    def close(self) -> None:
        """Close the socket pair (the request itself stays readable)."""
        self._wake.close()
        self._woken.close()

    def _poke(self) -> None:
        # A full buffer already holds a wake-up; a closed pair has no waiter left.
        with contextlib.suppress(OSError):
            self._wake.send(b"\0")
