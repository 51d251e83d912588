"""Retry policies and backoff.

Only failures count against ``max_attempts``: an attempt handed back by a
stopping client, or retaken after its worker died, is not a failure (leases
and ``max_reclaims`` bound those), and neither is a :class:`~cairnflow.Snooze`.

A policy can also stop retrying at a deadline (``until``, ``Cap.RETRY_UNTIL``)
and end a run that ran out of retries ``discarded`` rather than ``failed``
(``on_exhausted="discard"``, ``Cap.DISCARD``). Both are judged by the store in
the transaction that records the failure, with the run row locked, as is the
workflow's ``max_errors`` (``Cap.RETRY_MAX_ERRORS``): so they hold across
clients, and on the store's record of the run rather than one process's view.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from ._errors import Permanent

__all__ = ["NO_RETRY", "Backoff", "Exhausted", "JitterSource", "RetryPolicy"]

Exhausted = Literal["fail", "discard"]
"""What a run whose step ran out of retries becomes: ``failed`` or ``discarded``."""

_NS = 1_000_000_000

JitterSource = Callable[[], float]
"""Returns a float in [0, 1); must be safe to call from several threads."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff: ``initial * factor ** (n - 1)`` seconds, capped at ``max``.

    ``jitter`` spreads each delay uniformly by up to that fraction either way
    (0.2 turns 10 s into 8 to 12 s), so retries of many runs do not arrive in
    lockstep.
    """

    initial: float = 1.0
    factor: float = 2.0
    max: float = 60.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.initial) and self.initial >= 0):
            raise ValueError(f"Backoff.initial must be a finite number >= 0, got {self.initial!r}")
        if not (math.isfinite(self.factor) and self.factor >= 1):
            raise ValueError(f"Backoff.factor must be a finite number >= 1, got {self.factor!r}")
        if not (math.isfinite(self.max) and self.max >= self.initial):
            raise ValueError(f"Backoff.max must be finite and >= initial, got {self.max!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"Backoff.jitter must be between 0 and 1, got {self.jitter!r}")

    def delay(self, failures: int, rand: float = 0.5) -> float:
        """Seconds to wait after the ``failures``-th failure (1-based).

        ``rand`` is a draw in [0, 1) from the client's jitter source; 0.5 means
        no jitter.
        """
        exponent = max(failures - 1, 0)
        try:
            base = min(self.max, self.initial * self.factor**exponent)
        except OverflowError:
            base = self.max
        spread = self.jitter * (2.0 * rand - 1.0)
        return max(0.0, base * (1.0 + spread))


def _never(_: BaseException) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how soon a failed step runs again.

    ``max_attempts`` counts failed attempts: 1 means no retry. ``no_retry_on``
    returns True for an error that must fail the step at once; raising (or
    wrapping in) :class:`~cairnflow.Permanent` does the same from inside a step.

    ``until`` (``Cap.RETRY_UNTIL``) stops the retries at a deadline as well: a
    retry that would fall due after it is not made, and the step is out of
    retries. An aware :class:`~datetime.datetime` is an absolute deadline; a
    number of seconds (or a :class:`~datetime.timedelta`) counts from the time
    the run was due to start (its ``run_at``: its enqueue, or the end of its
    delay), so every run of the workflow gets the same span.

    ``on_exhausted`` (``Cap.DISCARD``): ``"discard"`` ends a run whose step ran
    out of retries (by count, by ``until`` or by the workflow's ``max_errors``)
    ``discarded`` instead of ``failed``. An error that is not retried at all
    (:class:`~cairnflow.Permanent`, ``no_retry_on``) still fails the run.
    """

    max_attempts: int = 1
    backoff: Backoff = field(default_factory=Backoff)
    no_retry_on: Callable[[BaseException], bool] = _never
    until: datetime | timedelta | float | None = None
    on_exhausted: Exhausted = "fail"

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ValueError(
                f"RetryPolicy.max_attempts must be an int >= 1, got {self.max_attempts!r}"
            )
        until = self.until
        if isinstance(until, datetime):
            if until.tzinfo is None or until.utcoffset() is None:
                raise ValueError(
                    f"RetryPolicy.until must be an aware datetime (with a time zone), got {until!r}"
                )
        elif isinstance(until, timedelta):
            if until <= timedelta(0):
                raise ValueError(f"RetryPolicy.until must be a positive span, got {until!r}")
        elif until is not None and (
            isinstance(until, bool)
            or not isinstance(until, int | float)
            or not math.isfinite(until)
            or until <= 0
        ):
            raise ValueError(
                "RetryPolicy.until must be an aware datetime, a timedelta or a finite number "
                f"of seconds > 0, got {until!r}"
            )
        if self.on_exhausted not in ("fail", "discard"):
            raise ValueError(
                f"RetryPolicy.on_exhausted must be 'fail' or 'discard', got {self.on_exhausted!r}"
            )

    @property
    def discards(self) -> bool:
        """True when a run out of retries ends ``discarded``."""
        return self.on_exhausted == "discard"

    @property
    def deadline_ns(self) -> int | None:
        """``until`` as an absolute deadline in Unix nanoseconds (None: none, or relative)."""
        if isinstance(self.until, datetime):
            return int(self.until.timestamp() * _NS)
        return None

    @property
    def window_ns(self) -> int | None:
        """``until`` as nanoseconds after the run's ``run_at`` (None: none, or absolute)."""
        until = self.until
        if isinstance(until, timedelta):
            return int(until.total_seconds() * _NS)
        if until is None or isinstance(until, datetime):
            return None
        return int(until * _NS)

    @property
    def retries(self) -> bool:
        """True when the policy can ever run a step again after a failure."""
        return self.max_attempts > 1

    def next_delay(self, error: BaseException, failures: int, rand: float) -> float | None:
        """Seconds until the next attempt, or ``None`` when the step must fail.

        ``failures`` counts the failed attempts including this one. The
        deadline (``until``) and the workflow's ``max_errors`` are judged by the
        store, when it records the failure.
        """
        if self.permanent(error):
            return None
        if failures >= self.max_attempts:
            return None
        return self.backoff.delay(failures, rand)

    def permanent(self, error: BaseException) -> bool:
        """True for an error that fails the step at once, never retried (nor discarded)."""
        return isinstance(error, Permanent) or self.no_retry_on(error)


NO_RETRY = RetryPolicy()
"""The default: a failed step fails its run; only you know whether a step is safe to repeat."""
