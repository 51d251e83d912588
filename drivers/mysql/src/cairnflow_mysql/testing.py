"""Helpers for tests that run MySQL stores in worker subprocesses (the conformance kit)."""

from __future__ import annotations

from typing import Any

import pymysql

from cairnflow.sql import TABLES

from ._store import MySQLStore
from ._url import parse_url

__all__ = ["app_connection", "drop_namespace", "make_store"]


def make_store(namespace: str, *, url: str, **options: Any) -> MySQLStore:
    """The store a worker process opens: the same database, the test's table prefix."""
    return MySQLStore(url, table_prefix=namespace, **options)


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
