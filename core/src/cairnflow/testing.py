"""Helpers for testing code that uses cairnflow (and for cairnflow's own tests).

:class:`Partition` wraps a real store and makes chosen operations hang, the
way a lost network or a stalled process would: a client behind a cut
partition cannot renew its leases or write its outcomes. It fakes nothing
about the store itself.

:func:`faults` arms the engine's named fault points (:data:`FAULT_POINTS`) in
this process: a crash, an error or a stall at the worst places, for chaos
tests. Worker subprocesses are armed through the :data:`FAULTS_ENV`
environment variable instead. The points are the engine's internals: they
move with its code, and nothing outside tests should rely on them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from . import _faults
from ._faults import Fault, FaultInjected
from .store import FACETS

__all__ = [
    "FAULTS_ENV",
    "FAULT_POINTS",
    "Fault",
    "FaultInjected",
    "Faults",
    "Partition",
    "faults",
    "wait_until",
]

DEFAULT_BLOCKED = frozenset(
    method for facet in FACETS for method in facet.methods
) - {"describe", "default_notifier", "migrate", "check_schema", "close"}
"""Every Store SPI operation that talks to the database, the facets' included."""


class Partition:
    """A real store behind a switch: ``cut()`` hangs the ``blocked`` operations.

    ``heal()`` lets hung calls through again (so their threads can finish).
    ``calls`` records the blocked operations that went through, in order.
    """

    def __init__(self, inner: Any, blocked: Iterable[str] = DEFAULT_BLOCKED) -> None:
        self._inner = inner
        self._blocked = frozenset(blocked)
        self._open = threading.Event()
        self._open.set()
        self.calls: list[str] = []

    @property
    def inner(self) -> Any:
        """The wrapped store."""
        return self._inner

    def cut(self) -> None:
        """From now on, the blocked operations hang."""
        self._open.clear()

    def heal(self) -> None:
        """Let every hung and future call through."""
        self._open.set()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in self._blocked or not callable(target):
            return target

        def gated(*args: Any, **kwargs: Any) -> Any:
            self._open.wait()
            self.calls.append(name)
            return target(*args, **kwargs)

        return gated


def wait_until(
    predicate: Callable[[], bool], timeout: float = 10.0, what: str = "a condition"
) -> None:
    """Poll ``predicate`` every 10 ms until it is true; ``TimeoutError`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.01)


# -- fault points ------------------------------------------------------------------------------
FAULT_POINTS: Mapping[str, str] = _faults.POINTS
"""Every named fault point, and where it sits in the engine."""

FAULTS_ENV = _faults.ENV
"""``CAIRNFLOW_FAULTS``: the faults a process arms when it imports cairnflow, e.g.
``"outcome.before_commit=kill@0.02,sql.after_commit=raise@0.05,claim.before_commit=stall:2#1"``
(``point=action[:seconds][@probability][#times]``; actions ``kill``, ``raise``, ``stall``)."""


class Faults:
    """The faults :func:`faults` armed: how often each point fired so far."""

    def __init__(self, armed: list[Fault]) -> None:
        self.armed = armed

    def fired(self, point: str | None = None) -> int:
        """How many times ``point`` fired (every point's total when None)."""
        counts = _faults.fired()
        return sum(counts.values()) if point is None else counts.get(point, 0)


@contextmanager
def faults(spec: str, *, observe: Callable[[Fault], None] | None = None) -> Iterator[Faults]:
    """Arm the faults ``spec`` (the :data:`FAULTS_ENV` format) in this process for the block.

    ``kill`` would end the test process itself: use it in subprocesses only.
    ``observe`` is called with each fault that fires, before it acts. Whatever
    was armed before (from the environment) is armed again after the block.
    """
    armed = _faults.parse(spec)
    before = _faults.plan
    _faults.arm(armed, [observe] if observe is not None else [])
    try:
        yield Faults(armed)
    finally:
        _faults.plan = before
