"""The named-lock methods of :class:`~cairnflow.Client`, in a module of their own.

A named lock is a row with an expiry (the ``Locking`` facet), shared by every
client of the database and by application code holding a
:class:`~cairnflow.Locks` over the same store; a client that is never started
takes and releases locks like any other.
"""

from __future__ import annotations

from ._state import EngineState

__all__ = ["LockMethods"]


class LockMethods:
    """``lock``, ``unlock`` and ``extend_lock`` (``Cap.LOCKS``)."""

    _state: EngineState

    def lock(self, name: str, ttl: float) -> str | None:
        """Take the named lock ``name`` for ``ttl`` seconds: its token, or None while held.

        Nobody else can take it until it is released with its token
        (:meth:`unlock`) or ``ttl`` has passed, whatever happens to this
        process or its connections (see :class:`~cairnflow.Locks`).
        """
        return self._state.locks("client.lock()").lock(name, ttl)

    def unlock(self, name: str, token: str) -> bool:
        """Release ``name`` if ``token`` holds it; False (nothing changed) otherwise."""
        return self._state.locks("client.unlock()").unlock(name, token)

    def extend_lock(self, name: str, token: str, ttl: float) -> bool:
        """Hold ``name`` ``ttl`` seconds from now; False if ``token`` no longer holds it."""
        return self._state.locks("client.extend_lock()").extend_lock(name, token, ttl)
