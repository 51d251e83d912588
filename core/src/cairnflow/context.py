"""The context every step function receives as its first argument."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import Cancelled

if TYPE_CHECKING:
    from ._rates import Rate
    from .state import Locks, RateLimiter

__all__ = ["Cancellation", "StepContext"]


class _AttemptControl(Protocol):
    def heartbeat(self) -> None: ...

    def progress(self, value: Any) -> None: ...

    def memo(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    def locks(self, what: str) -> Locks: ...

    def rates(self, what: str) -> RateLimiter: ...


class Cancellation(Protocol):
    """Where a context learns that its attempt should stop (the engine's attempt)."""

    @property
    def cancelled(self) -> bool:
        """True once the attempt should stop."""
        ...

    @property
    def cancel_event(self) -> threading.Event:
        """An event set when the attempt should stop."""
        ...


class _EventCancellation:
    """A plain :class:`threading.Event` as a :class:`Cancellation`."""

    __slots__ = ("cancel_event",)

    def __init__(self, event: threading.Event) -> None:
        self.cancel_event = event

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


class StepContext:
    """What a step attempt knows about itself, and what it can tell the store.

    ``payload`` is the run's payload and ``parents`` the outputs of the step's
    parents by name. ``deadline`` is the attempt's deadline on
    ``time.monotonic()`` (``None`` without a timeout). ``cancel_event`` is set
    when the run is cancelled, the attempt timed out or lost its lease, or the
    client stops: long steps should check :attr:`cancelled` (or call
    :meth:`raise_if_cancelled`) between units of work.
    """

    __slots__ = (
        "_cancellation",
        "_control",
        "attempt",
        "deadline",
        "headers",
        "labels",
        "node_id",
        "parents",
        "payload",
        "queue",
        "run_id",
        "step",
        "tenant",
        "workflow",
    )

    def __init__(
        self,
        *,
        run_id: str,
        workflow: str,
        step: str,
        attempt: int,
        payload: Any,
        parents: Mapping[str, Any],
        labels: Mapping[str, str],
        node_id: str,
        queue: str,
        deadline: float | None,
        cancel_event: threading.Event | Cancellation,
        control: _AttemptControl,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.step = step
        self.attempt = attempt
        self.payload = payload
        self.parents = parents
        self.labels = labels
        self.headers: Mapping[str, str] = {} if headers is None else headers
        """The run's headers (``Cap.HEADERS``): given at enqueue, or added by enqueue hooks."""
        self.tenant: str | None = tenant
        """The run's tenant (``Cap.TENANT``), None for a run enqueued without one."""
        self.node_id = node_id
        self.queue = queue
        self.deadline = deadline
        self._cancellation = (
            _EventCancellation(cancel_event)
            if isinstance(cancel_event, threading.Event)
            else cancel_event
        )
        self._control = control

    @property
    def cancel_event(self) -> threading.Event:
        """Set when the attempt should stop: ``ctx.cancel_event.wait(s)`` sleeps until then."""
        return self._cancellation.cancel_event

    @property
    def cancelled(self) -> bool:
        """True once the attempt should stop (see the class docstring)."""
        return self._cancellation.cancelled

    @property
    def remaining(self) -> float | None:
        """Seconds left before the attempt's timeout, or ``None`` without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~cairnflow.Cancelled` if the attempt should stop."""
        if self._cancellation.cancelled:
            raise Cancelled(f"step {self.step!r} of run {self.run_id} was asked to stop")

    def heartbeat(self) -> None:
        """Renew the attempt's lease now and record the heartbeat.

        Raises :class:`~cairnflow.LeaseLost` if another worker may hold the step
        now, and :class:`~cairnflow.Cancelled` if the run was cancelled; either
        way the attempt's outcome will not be written. Needs ``Cap.HEARTBEAT``.
        """
        self._control.heartbeat()

    def progress(self, value: Any) -> None:
        """Record ``value`` (encoded by the client's codec) as the step's progress.

        Any client can read it from ``RunInfo.steps[name].progress`` while the
        step runs. Needs ``Cap.PROGRESS``.
        """
        self._control.progress(value)

    def memo(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` once for this step of this run, whatever its attempts.

        The first call runs ``fn`` and records its result (encoded by the
        client's codec, within its payload limit) under (run, step, ``name``);
        a later attempt of the step (a retry, or a retake after a crash, on any
        node) gets the recorded result without calling ``fn``. The value
        returned is the codec's reading of what was recorded, the first time as
        every later time. Only the attempt that holds the step's lease records:
        a stale one (its step retaken or its run cancelled) gets
        :class:`~cairnflow.LeaseLost` after ``fn`` ran, nothing is recorded and
        its outcome is not written. An exception of ``fn`` records nothing.
        Needs ``Cap.JOURNAL``.
        """
        return self._control.memo(name, fn, args, kwargs)

    def lock(self, name: str, ttl: float) -> str | None:
        """Take the named lock ``name`` for ``ttl`` seconds: its token, or None while held.

        The lock is a row with an expiry, shared by every client of the store
        (:class:`~cairnflow.Locks`); it is not released when the step ends:
        :meth:`unlock` it, or let it expire. Needs ``Cap.LOCKS``.
        """
        return self._control.locks("ctx.lock()").lock(name, ttl)

    def unlock(self, name: str, token: str) -> bool:
        """Release ``name`` if ``token`` holds it; False otherwise. Needs ``Cap.LOCKS``."""
        return self._control.locks("ctx.unlock()").unlock(name, token)

    def extend_lock(self, name: str, token: str, ttl: float) -> bool:
        """Hold ``name`` ``ttl`` seconds from now; False if ``token`` lost it (``Cap.LOCKS``)."""
        return self._control.locks("ctx.extend_lock()").extend_lock(name, token, ttl)

    def take(
        self,
        name: str,
        rate: Rate,
        n: int = 1,
        *,
        timeout: float | None = None,
        per_tenant: bool = False,
    ) -> bool:
        """Wait until bucket ``name`` admits ``n`` tokens at ``rate``; True once taken.

        The bucket is a row shared by every client of the store
        (:class:`~cairnflow.RateLimiter`): every worker calling one upstream draws
        from it. The wait ends early, False and nothing taken, when ``timeout``
        seconds pass or the attempt is cancelled (its lease lost, its run
        cancelled, its timeout reached). Needs ``Cap.RATE_LIMIT``.

        ``per_tenant=True`` takes from the run's tenant's own bucket of that name
        (``Cap.TENANT``): each tenant has its rate; a run without a tenant takes
        from the bucket every such run shares.
        """
        limiter = self._control.rates("ctx.take()")
        tenant = self._tenant(per_tenant)
        return limiter.take(name, rate, n, timeout=timeout, cancel=self.cancel_event, tenant=tenant)

    def try_take(self, name: str, rate: Rate, n: int = 1, *, per_tenant: bool = False) -> bool:
        """Take ``n`` tokens of bucket ``name`` if it holds them now; never waits.

        To give the worker back while the bucket is empty, snooze:
        ``if not ctx.try_take("stripe", RATE): raise cf.Snooze(1)``.
        ``per_tenant`` as in :meth:`take`. Needs ``Cap.RATE_LIMIT``.
        """
        limiter = self._control.rates("ctx.try_take()")
        return limiter.try_take(name, rate, n, tenant=self._tenant(per_tenant)).granted

    def _tenant(self, per_tenant: bool) -> str | None:
        """The tenant whose bucket a take draws from: the run's with ``per_tenant``."""
        if not isinstance(per_tenant, bool):
            raise TypeError(f"per_tenant takes True or False, got {per_tenant!r}")
        return self.tenant if per_tenant else None

    def __repr__(self) -> str:
        return (
            f"StepContext(run_id={self.run_id!r}, workflow={self.workflow!r}, "
            f"step={self.step!r}, attempt={self.attempt})"
        )
