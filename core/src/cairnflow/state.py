"""Durable step state: a journal of memoised results, named locks with a time to live, and
rate-limit buckets.

Both are rows in the store, so they hold across processes and crashes:

* :class:`Journal` (``Cap.JOURNAL``): ``memo(scope, name, fn)`` runs ``fn``
  once and records its result; every later call with the same key, in any
  process, returns the recorded result without calling ``fn``. Inside a step
  it is ``ctx.memo(name, fn, *args)``, keyed by the run and the step, and the
  record is fenced by the attempt's lease.
* :class:`Locks` (``Cap.LOCKS``): ``lock(name, ttl)`` returns a token, or
  None while another holds the name; ``unlock(name, token)`` frees it only
  for that token; ``extend_lock`` moves its expiry. A lock is a row with an expiry,
  not a database session lock: a holder that dies keeps it until the expiry,
  and nobody holds it past that.
* :class:`RateLimiter` (``Cap.RATE_LIMIT``): ``take(name, rate)`` waits until
  bucket ``name`` admits a token (or a timeout passes); ``try_take`` answers at
  once. Every client and every piece of application code taking from one name
  draws from one bucket, so every worker calling one upstream API shares its
  limit.

The engine (``ctx.memo``, ``ctx.lock``, ``client.lock``) and application code
(``cf.Journal(store)``, ``cf.Locks(store)``) share these classes, so there is
one implementation of each rule.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import Any

from ._caps import Cap
from ._checks import check_int, check_seconds
from ._errors import LeaseLost, Unsupported
from ._names import check_name, check_tenant, tenant_scoped
from ._rates import Rate, RateTake
from .clock import Clock, DatabaseClock, Real
from .codec import Codec, JSONCodec, encode_within
from .store import HeldLock, Journaling, Locking, RateLimiting, Store, StoreFacets

__all__ = ["Journal", "Locks", "RateLimiter"]

_NS = 1_000_000_000
MAX_BUCKET_NAME = 128
"""The longest name a bucket's row holds: a per-tenant bucket's tenant, separator and name."""


def _facets(store: Store, cap: Cap, what: str) -> StoreFacets:
    facets = StoreFacets.of(store)
    if cap not in store.capabilities:
        raise Unsupported(cap, what, store=f"the {store.describe().driver} store")
    return facets


def _shared_clock(facets: StoreFacets) -> Clock:
    """The database server's clock where the store has one (one "now" for every node), else
    this machine's: what lock expiries and rate buckets are compared with."""
    server = facets.clock
    return DatabaseClock(server.database_now) if server is not None else Real()


class Journal:
    """Memoised results over a store (``Cap.JOURNAL``): ``memo`` runs ``fn`` once per key.

    ``codec`` encodes the results (JSON by default) and ``payload_limit``
    bounds each one in bytes, as ``Client(payload_limit=...)`` bounds a step's
    output. A result is returned as the codec reads it back, the first time as
    every later time (a tuple comes back a list under JSON).
    """

    def __init__(
        self,
        store: Store,
        *,
        codec: Codec | None = None,
        payload_limit: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        facets = _facets(store, Cap.JOURNAL, "cf.Journal(store)")
        assert facets.journal is not None  # declared, so check_store found its facet
        if payload_limit is not None:
            check_int("payload_limit (bytes)", payload_limit, minimum=1)
        self._facet: Journaling = facets.journal
        self._codec = codec or JSONCodec()
        self._limit = payload_limit
        self._clock = clock or Real()

    def memo(self, scope: str, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` the first time the key (``scope``, ``name``) is asked for.

        Its result is recorded, and this call and every later one return it;
        if two callers run ``fn`` at once, both return the result recorded
        first. An exception of ``fn`` records nothing and propagates.
        """
        check_name("journal scope", scope)
        return self.run(scope, "", name, fn, args, kwargs, lease=None)

    def run(
        self,
        scope: str,
        step: str,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        lease: str | None,
    ) -> Any:
        """The recorded result of the key, or ``fn``'s, recorded (fenced by ``lease``).

        Raises :class:`~cairnflow.LeaseLost` when ``lease`` is no longer held
        at the record: ``fn`` ran, but its result is not recorded and the
        attempt's outcome will not be written (the step's next attempt runs
        ``fn`` again).
        """
        check_name("memo", name)
        if not callable(fn):
            raise TypeError(f"memo {name!r}: fn must be callable, got {fn!r}")
        found = self._facet.read_journal(scope, step, name)
        if found is not None:
            return self._codec.decode(found)
        data = self.encode(fn(*args, **kwargs), name)
        stored = self._facet.record_journal(
            scope, step, name, data, lease=lease, now=self._clock.now_ns()
        )
        if stored is None:
            raise LeaseLost(
                f"memo {name!r} of step {step!r}: the attempt's lease is gone, so its result "
                f"is not recorded; the step's next attempt runs it again"
            )
        return self._codec.decode(stored)

    def encode(self, value: Any, name: str) -> bytes:
        """``value`` by the codec, within the payload limit (refused before any write)."""
        return encode_within(self._codec, value, f"the result of memo {name!r}", self._limit)


class Locks:
    """Named locks with a time to live over a store (``Cap.LOCKS``).

    Times are read from ``clock``; by default the database server's clock
    where the store has one (``Cap.DATABASE_CLOCK``, read again every minute
    and advanced on this process's monotonic clock in between), so every
    node compares expiries with one clock; otherwise this machine's.
    """

    def __init__(self, store: Store, *, clock: Clock | None = None) -> None:
        facets = _facets(store, Cap.LOCKS, "cf.Locks(store)")
        assert facets.locks is not None  # declared, so check_store found its facet
        self._facet: Locking = facets.locks
        self._clock = clock if clock is not None else _shared_clock(facets)

    def lock(self, name: str, ttl: float) -> str | None:
        """Take ``name`` for ``ttl`` seconds: its token, or None while another holds it."""
        check_name("lock", name)
        now = self._clock.now_ns()
        until = now + int(check_seconds("lock ttl", ttl) * _NS)
        token = secrets.token_hex(16)
        return token if self._facet.take_lock(name, token, now=now, until=until) else None

    def unlock(self, name: str, token: str) -> bool:
        """Free ``name`` if ``token`` holds it; False (nothing changed) otherwise."""
        check_name("lock", name)
        return self._facet.release_lock(name, token)

    def extend_lock(self, name: str, token: str, ttl: float) -> bool:
        """Hold ``name`` for ``ttl`` seconds from now; False if ``token`` no longer holds it."""
        check_name("lock", name)
        now = self._clock.now_ns()
        until = now + int(check_seconds("lock ttl", ttl) * _NS)
        return self._facet.extend_lock(name, token, now=now, until=until)

    def holder(self, name: str) -> HeldLock | None:
        """The lock of ``name`` as stored, or None; held only while ``expires_at`` is ahead."""
        check_name("lock", name)
        return self._facet.read_lock(name)

    def now(self) -> int:
        """Now on the clock the expiries are compared with (Unix nanoseconds)."""
        return self._clock.now_ns()


class RateLimiter:
    """Durable leaky buckets over a store (``Cap.RATE_LIMIT``), one per name.

    A bucket admits takes at its :class:`~cairnflow.Rate` across every client
    and process using the store (see :mod:`cairnflow._rates` for the exact
    bound). Every caller of one name must give the same rate. Times are read
    from ``clock``; by default the database server's where the store has one
    (``Cap.DATABASE_CLOCK``), so the bucket's clock is one for every node.
    """

    def __init__(self, store: Store, *, clock: Clock | None = None) -> None:
        facets = _facets(store, Cap.RATE_LIMIT, "cf.RateLimiter(store)")
        assert facets.rates is not None  # declared, so check_store found its facet
        self._facet: RateLimiting = facets.rates
        self._clock = clock if clock is not None else _shared_clock(facets)
        self._store = store

    def try_take(self, name: str, rate: Rate, n: int = 1, *, tenant: str | None = None) -> RateTake:
        """Take ``n`` tokens of bucket ``name`` now if it holds them; never waits.

        ``RateTake.granted`` says whether it did; when not, ``retry_at`` (Unix
        ns, on this limiter's clock) is the first moment the same take could be.
        ``tenant`` (``Cap.TENANT``) takes from that tenant's own bucket of the name:
        each tenant has its own rate, and none draws from another's.
        """
        check_name("rate bucket", name)
        if tenant is not None:
            check_tenant(tenant)
            if Cap.TENANT not in self._store.capabilities:
                store = f"the {self._store.describe().driver} store"
                raise Unsupported(Cap.TENANT, "a per-tenant rate bucket", store=store)
            name = tenant_scoped(tenant, name, most=MAX_BUCKET_NAME, what="rate bucket")
        if not isinstance(rate, Rate):
            raise TypeError(f"rate must be a cairnflow.Rate, got {rate!r}")
        check_int("tokens", n, minimum=1)
        if n > rate.burst:
            raise ValueError(f"cannot take {n} tokens at once from a bucket of burst {rate.burst}")
        return self._facet.take_tokens(name, rate, n, self._clock.now_ns())

    def take(
        self,
        name: str,
        rate: Rate,
        n: int = 1,
        *,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        tenant: str | None = None,
    ) -> bool:
        """Wait until bucket ``name`` admits ``n`` tokens; True once taken.

        False when ``timeout`` seconds pass first, or when ``cancel`` is set
        (a step's cancellation): nothing was taken then. ``tenant`` as in
        :meth:`try_take`.
        """
        if timeout is not None:
            check_seconds("timeout", timeout, zero=True)
        waiter = cancel if cancel is not None else threading.Event()
        give_up = None if timeout is None else self._clock.now_ns() + int(timeout * _NS)
        while True:
            took = self.try_take(name, rate, n, tenant=tenant)
            if took.granted:
                return True
            assert took.retry_at is not None
            now = self._clock.now_ns()
            if give_up is not None and took.retry_at > give_up:
                return False  # other takes only move the bucket's next token later
            if waiter.wait(max(took.retry_at - now, 0) / _NS):
                return False
