"""Helpers for testing code that uses cairnflow (and for cairnflow's own tests).

:class:`Partition` wraps a real store and makes chosen operations hang, the
way a lost network or a stalled process would: a client behind a cut
partition cannot renew its leases or write its outcomes. It fakes nothing
about the store itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .store import FACETS

__all__ = ["Partition", "wait_until"]

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
