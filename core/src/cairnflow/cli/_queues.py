"""``cairn worker --queues mail:1,default``: the queues a worker serves, as one option.

Each entry is ``name`` or ``name:workers``, comma-separated (a queue name may
hold ``:``; digits after the last one are the workers). The text is only
split here; what makes a queue configuration valid (a queue name, workers of at
least one, no queue twice) is checked by the client's own check
(:func:`cairnflow._engine._settings.check_queues`), run here before any store is
opened, so a mistyped option ends with a usage error (exit status 2), not a
traceback or a worker that never starts.
"""

from __future__ import annotations

import click

from .._caps import Cap
from .._engine._settings import check_queues
from .._queues import QueueConfig

__all__ = ["parse_queues"]

_EVERY = frozenset(Cap)
"""Check the entries alone: what the store supports is checked when the client is built."""


def parse_queues(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[QueueConfig, ...] | None:
    """``name[:workers],...`` to :class:`~cairnflow.QueueConfig`\\ s (a click callback)."""
    if value is None:
        return None
    configs: list[QueueConfig] = []
    for entry in value.split(","):
        # A queue name may hold ':' itself: only digits after the last one are workers.
        name, sep, workers = entry.strip().rpartition(":")
        if sep and workers.isdigit():
            configs.append(QueueConfig(name, workers=int(workers)))
        else:
            configs.append(QueueConfig(entry.strip()))
    try:
        return check_queues(_EVERY, configs)
    except (ValueError, TypeError) as error:  # InvalidName is a ValueError
        raise click.BadParameter(f"{value!r}: {error}", ctx, param) from None
