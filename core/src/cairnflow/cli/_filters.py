"""The filters of ``cairn runs`` as options: ``--label k=v``, ``--label-prefix k=pre``, ``--since``.

Only the text is parsed here (click callbacks, so a mistyped option is a usage
error with exit status 2); what makes a filter valid is checked once, by
:class:`cairnflow.store.RunQuery`, whose :class:`~cairnflow.InvalidQuery` the
command reports the same way.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import click

__all__ = ["parse_label", "parse_labels", "parse_since"]

_DURATION = re.compile(r"(\d+)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_labels(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    """``--label k=v`` (repeatable) to a dict."""
    labels: dict[str, str] = {}
    for pair in value:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", ctx, param)
        labels[name] = text
    return labels


def parse_label(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, str] | None:
    """``--label-prefix k=pre`` to ``(k, pre)``."""
    if value is None:
        return None
    name, sep, prefix = value.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"expected NAME=PREFIX, got {value!r}", ctx, param)
    return name, prefix


def parse_since(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``--since 90m`` (s, m, h, d before now) or an ISO 8601 time, to Unix nanoseconds."""
    if value is None:
        return None
    match = _DURATION.fullmatch(value.strip())
    if match:
        seconds = int(match.group(1)) * _UNIT[match.group(2)]
        return max(time.time_ns() - seconds * 1_000_000_000, 0)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"expected a duration (30s, 90m, 2h, 7d) or an ISO 8601 time, got {value!r}",
            ctx,
            param,
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(int(when.timestamp() * 1_000_000) * 1000, 0)
