"""How times, ages and values read on the pages (Jinja2 filters), in one place.

Times are stored as integer Unix nanoseconds; the pages show UTC, to the second,
so that two operators in different time zones read the same thing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

__all__ = ["age", "clock", "duration", "pretty", "when"]


def when(ns: int | None) -> str:
    """``2026-12-02 00:54:19`` (UTC), or an empty string for no time."""
    if ns is None:
        return ""
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def clock(ns: int) -> str:
    """``00:54`` (UTC): an axis label."""
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%H:%M")


def duration(ns: int | None) -> str:
    """``1h 2m``, ``3m 20s``, ``4.2s``, ``12ms``: a span in its two largest units."""
    if ns is None:
        return ""
    seconds = max(ns, 0) / 1e9
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    return f"{hours // 24}d {hours % 24}h"


def age(ns: int | None, now: int) -> str:
    """How long ago ``ns`` was, judged at ``now``."""
    return "" if ns is None else duration(now - ns)


def pretty(value: Any) -> str:
    """A payload or output as indented JSON; what JSON cannot hold, by its ``repr``."""
    if isinstance(value, bytes):
        return repr(value)
    try:
        return json.dumps(value, indent=2, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
