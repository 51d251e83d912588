"""Retry policies and backoff.

Only failures count against ``max_attempts``: an attempt handed back by a
stopping client, or retaken after its worker died, is not a failure (leases
and ``max_reclaims`` bound those), and neither is a :class:`~cairnflow.Snooze`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ._errors import Permanent

__all__ = ["NO_RETRY", "Backoff", "JitterSource", "RetryPolicy"]

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
    """

    max_attempts: int = 1
    backoff: Backoff = field(default_factory=Backoff)
    no_retry_on: Callable[[BaseException], bool] = _never

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(
                f"RetryPolicy.max_attempts must be an int >= 1, got {self.max_attempts!r}"
            )

    @property
    def retries(self) -> bool:
        """True when the policy can ever run a step again after a failure."""
        return self.max_attempts > 1

    def next_delay(self, error: BaseException, failures: int, rand: float) -> float | None:
        """Seconds until the next attempt, or ``None`` when the step must fail.

        ``failures`` counts the failed attempts including this one.
        """
        if isinstance(error, Permanent) or self.no_retry_on(error):
            return None
        if failures >= self.max_attempts:
            return None
        return self.backoff.delay(failures, rand)


NO_RETRY = RetryPolicy()
"""The default: a failed step fails its run; only you know whether a step is safe to repeat."""
