"""Helpers for tests that run SQLite stores in worker subprocesses (the conformance kit).

:func:`kit_target` is the kit's view of the driver on one file; a ``notifier`` spec
(``("module:callable", {kwargs})``, see :func:`cairnflow.testing.build_notifier`)
gives every store of it, in the test process and in the kit's worker processes, a
notifier of its own: how a notifier's distribution runs the kit on SQLite without
the driver knowing it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from cairnflow.testing import NotifierSpec, build_notifier

from ._store import SQLiteStore

__all__ = ["kit_target", "make_store"]


def make_store(
    namespace: str, *, path: str, notifier: NotifierSpec | None = None, **options: Any
) -> SQLiteStore:
    """The store a worker process opens: the same file, the test's table prefix."""
    return SQLiteStore(path, table_prefix=namespace, notifier=build_notifier(notifier), **options)


def kit_target(path: str, *, label: str | None = None, notifier: NotifierSpec | None = None) -> Any:
    """A ``cairnflow_conformance.StoreTarget`` on the SQLite file ``path``, shared by the
    kit's worker processes, one table prefix per kit namespace."""
    from cairnflow_conformance import StoreTarget

    config: dict[str, Any] = {"path": path, "synchronous": "NORMAL"}
    if notifier is not None:
        config["notifier"] = list(notifier)
    return StoreTarget(
        factory=lambda namespace: make_store(namespace, **config),
        worker_factory="cairnflow_sqlite.testing:make_store",
        worker_config=config,
        label=label,
        app_connection=lambda namespace: sqlite3.connect(path, timeout=30),
    )
