"""The seams an integration (metrics, tracing) plugs into: step middleware, enqueue hooks,
engine observers.

Why three seams and not one: a step middleware sees what the step's code sees (its
context, its result, its exception) and can change it, so it runs in the worker around
the step's code; but a claim's round trip, a lease taken over, or whether a failure is
retried are decided by the engine outside any step's code, so an integration learns them
from an :class:`EngineObserver`, told after the fact and unable to change anything. An
enqueue hook adds headers to a run as it is enqueued (a trace context), which every step
of the run then reads as ``ctx.headers``.

Middleware are plain callables ``mw(ctx, call_next)``: they run in the worker thread
around every step attempt (and every ``on_failure`` handler, whose ``ctx.step`` is
``"<on_failure>"``), the first registered outermost, and return what the step
returns (or something else). ``call_next()`` runs the rest of the chain and the step's
code; an async step's coroutine is run to completion inside ``call_next()`` on the
worker's event loop (as the engine runs every async step), so a middleware is the same
for sync and async steps, and a :mod:`contextvars` value it sets is seen by the step's
code. Whatever a middleware raises is the attempt's failure, judged by the step's retry
policy like any exception of the step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from ._names import MAX_HEADER_VALUE, MAX_HEADERS
from .context import StepContext
from .store import ClaimedAttempt, Outcome

__all__ = [
    "MAX_HEADERS",
    "MAX_HEADER_VALUE",
    "EngineObserver",
    "EnqueueHook",
    "StepMiddleware",
    "chain",
]

StepMiddleware: TypeAlias = Callable[[StepContext, Callable[[], Any]], Any]
"""``mw(ctx, call_next) -> result``: runs around every step attempt (first registered
outermost); ``call_next()`` runs the inner middleware and the step, and returns its result
or raises its exception."""

EnqueueHook: TypeAlias = Callable[[str, dict[str, str]], None]
"""``hook(workflow, headers)``: called for every run a client enqueues, before it is
written, with the workflow's name and the headers made so far (the hooks' own, in the
order they were added); it adds or changes entries in ``headers``. Headers the caller
gave to ``enqueue(headers=...)`` are applied after every hook, so they win. A run has at
most :data:`MAX_HEADERS` headers, each name 1-64 letters, digits, ``_``, ``.`` or ``-``
and each value at most :data:`MAX_HEADER_VALUE` characters; the enqueue is refused
(:class:`~cairnflow.InvalidName`, nothing written) otherwise."""


class EngineObserver:
    """Told what the engine of one client did; a base class whose methods do nothing.

    Override what you need. The methods are called on the engine's threads (the
    dispatcher, a worker, the committer), after the fact: they must be quick and
    must not block. An exception they raise is logged and ignored; it never changes
    what the engine does.
    """

    def claimed(self, attempts: Sequence[ClaimedAttempt], seconds: float, *, joined: bool) -> None:
        """A claim returned ``attempts`` (maybe none) after ``seconds`` of round trip.

        ``joined``: the claim was made in the transaction that wrote outcomes of
        this client's attempts (``seconds`` is then the whole transaction's).
        """

    def took_over(self, requeued: int, abandoned: int) -> None:
        """This client took back expired leases: ``requeued`` attempts made ready again,
        ``abandoned`` failed for having been taken over too often."""

    def outcome(self, claimed: ClaimedAttempt, outcome: Outcome) -> None:
        """The outcome of an attempt is handed to be written (a ``Failed`` with a
        ``retry_at`` is a retry; ``Succeeded``, ``Failed``, ``Snoozed``, ``SleepUntil``
        and ``WaitFor`` as the store's SPI defines them)."""


def chain(
    middleware: Sequence[StepMiddleware], ctx: StepContext, innermost: Callable[[], Any]
) -> Callable[[], Any]:
    """``innermost`` wrapped by ``middleware`` (the first outermost), ready to call."""
    call = innermost
    for mw in reversed(middleware):
        call = _Link(mw, ctx, call)
    return call


class _Link:
    """One middleware bound to its context and to the rest of the chain."""

    __slots__ = ("_ctx", "_mw", "_next")

    def __init__(self, mw: StepMiddleware, ctx: StepContext, call_next: Callable[[], Any]) -> None:
        self._mw = mw
        self._ctx = ctx
        self._next = call_next

    def __call__(self) -> Any:
        return self._mw(self._ctx, self._next)
