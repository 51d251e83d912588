"""``cairnflow.shutdown.StopRequest``: a stop request that takes no lock, and wakes at once."""

from __future__ import annotations

import os
import signal
import threading
import time

from cairnflow.shutdown import StopRequest

LONG = 120.0
"""A slice no test waits out: a wait that returns ended by its wake-up, not by polling."""


def _send_soon(signum: int) -> None:
    threading.Timer(0.1, os.kill, (os.getpid(), signum)).start()


def test_a_signal_ends_the_wait_at_once_without_a_lock() -> None:
    stop = StopRequest(slice=LONG)
    previous = signal.getsignal(signal.SIGUSR2)
    stop.install(signal.SIGUSR2)
    try:
        _send_soon(signal.SIGUSR2)
        started = time.monotonic()
        stop.wait()
        assert time.monotonic() - started < LONG / 2, "the wait ran out its slice"
        assert stop.signals == 1 and stop.is_set()
        # A handler called again, while another thread holds a lock of the waiter's kind,
        # returns: it takes none (Event.set() in a handler deadlocked inside Event.wait).
        held = threading.Lock()
        with held:
            stop.handler(signal.SIGUSR2, None)
        assert stop.signals == 2
    finally:
        signal.signal(signal.SIGUSR2, previous)
        stop.close()


def test_a_thread_and_until_end_the_wait() -> None:
    stop = StopRequest(slice=LONG)
    threading.Timer(0.1, stop.set).start()
    stop.wait()
    assert stop.is_set() and stop.signals == 0
    stop.close()
    idle = StopRequest(slice=0.01)
    idle.wait(until=lambda: True)
    assert not idle.is_set()
    idle.close()
