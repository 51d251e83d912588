"""Worker processes of the conformance kit: a driver's store with a :class:`RedisNotifier`.

The kit builds a store in a fresh process from ``"module:function"`` and a
JSON config; this wraps the driver's own worker factory (``store``), adding
the notifier, so the processes the kit spawns wake and are woken over Redis.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._notifier import RedisNotifier

__all__ = ["make_store"]


def make_store(
    namespace: str, *, store: str, redis_url: str, prefix: str = "", **options: Any
) -> Any:
    """``store`` (``"module:function"``, e.g. ``cairnflow_mysql.testing:make_store``) with a
    :class:`RedisNotifier` on ``redis_url`` under ``prefix``; ``options`` go to ``store``."""
    module, _, function = store.partition(":")
    factory = getattr(importlib.import_module(module), function)
    return factory(namespace, notifier=RedisNotifier(redis_url, prefix=prefix), **options)
