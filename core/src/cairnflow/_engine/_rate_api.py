"""The rate-limit methods of :class:`~cairnflow.Client`, in a module of their own.

A bucket is a row of the store (the ``RateLimiting`` facet), shared by every client of
the database and by application code holding a :class:`~cairnflow.RateLimiter` over the
same store; a client that is never started takes from buckets like any other.
"""

from __future__ import annotations

from .._rates import Rate, RateTake
from ._state import EngineState

__all__ = ["RateMethods"]


class RateMethods:
    """``take`` and ``try_take`` (``Cap.RATE_LIMIT``)."""

    _state: EngineState

    def take(
        self,
        name: str,
        rate: Rate,
        n: int = 1,
        *,
        timeout: float | None = None,
        tenant: str | None = None,
    ) -> bool:
        """Wait until bucket ``name`` admits ``n`` tokens at ``rate``; False after ``timeout``.

        Every caller of one bucket, on any client or process, must give the same
        rate (:class:`~cairnflow.RateLimiter`). ``tenant`` takes from that
        tenant's own bucket of the name (``Cap.TENANT``).
        """
        limiter = self._state.rates("client.take()")
        return limiter.take(name, rate, n, timeout=timeout, tenant=tenant)

    def try_take(self, name: str, rate: Rate, n: int = 1, *, tenant: str | None = None) -> RateTake:
        """Take ``n`` tokens of bucket ``name`` if it holds them now; never waits (``tenant``
        as in :meth:`take`)."""
        return self._state.rates("client.try_take()").try_take(name, rate, n, tenant=tenant)
