"""Helpers for tests that run MySQL stores in worker subprocesses (the conformance kit).

:func:`kit_target` is the kit's view of the driver on one server; a ``notifier`` spec
(``("module:callable", {kwargs})``, see :func:`cairnflow.testing.build_notifier`)
gives every store of it, in the test process and in the kit's worker processes, a
notifier of its own: how a notifier's distribution runs the kit on MySQL or MariaDB
without the driver knowing it.
"""

from __future__ import annotations

from typing import Any

import pymysql

from cairnflow.sql import TABLES
from cairnflow.testing import NotifierSpec, build_notifier

from ._store import MySQLStore
from ._url import parse_url

__all__ = ["app_connection", "drop_namespace", "kit_target", "make_store"]


def make_store(
    namespace: str, *, url: str, notifier: NotifierSpec | None = None, **options: Any
) -> MySQLStore:
    """The store a worker process opens: the same database, the test's table prefix."""
    return MySQLStore(url, table_prefix=namespace, notifier=build_notifier(notifier), **options)


def kit_target(url: str, *, label: str, notifier: NotifierSpec | None = None) -> Any:
    """A ``cairnflow_conformance.StoreTarget`` on the database of ``url``, one table prefix
    per kit namespace (dropped after each test: the server is shared)."""
    from cairnflow_conformance import StoreTarget

    config: dict[str, Any] = {"url": url, "pool_size": 8}
    if notifier is not None:
        config["notifier"] = list(notifier)
    return StoreTarget(
        factory=lambda namespace: make_store(namespace, **config),
        worker_factory="cairnflow_mysql.testing:make_store",
        worker_config=config,
        label=label,
        cleanup=lambda namespace: drop_namespace(url, namespace),
        app_connection=lambda namespace: app_connection(url),
    )


def app_connection(url: str) -> Any:
    """What an application hands to ``enqueue_tx``: its own PyMySQL connection, autocommit off."""
    parts = parse_url(url)
    return pymysql.connect(
        host=parts.host,
        port=parts.port,
        user=parts.user,
        password=parts.password or "",
        database=parts.database,
        charset="utf8mb4",
        autocommit=False,
    )


def drop_namespace(url: str, namespace: str) -> None:
    """Drop a kit test's tables: the server is shared with other suites."""
    conn = app_connection(url)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SET SESSION lock_wait_timeout = 60")
            names = ", ".join(f"`{namespace}{table}`" for table in TABLES)
            cursor.execute(f"DROP TABLE IF EXISTS {names}")
    finally:
        conn.close()
