"""Checks of numeric settings, one place for each rule.

A setting that comes in wrong is refused where it is given, with its name,
what it must be and what it was; ``True`` is never taken for 1.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_int", "check_seconds"]


def check_int(
    name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` if it is an int (not a bool) within ``[minimum, maximum]``; else ValueError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        if minimum is not None and maximum is not None:
            rule = f"an int from {minimum} to {maximum}"
        elif minimum is not None:
            rule = f"an int >= {minimum}"
        elif maximum is not None:
            rule = f"an int <= {maximum}"
        else:
            rule = "an int"
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return value


def check_seconds(name: str, value: Any, *, zero: bool = False) -> float:
    """``value`` as float seconds if it is a finite number > 0 (>= 0 with ``zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not zero):
        raise ValueError(f"{name} must be {'>= 0' if zero else '> 0'} seconds, got {value!r}")
    return float(value)
