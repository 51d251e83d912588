"""The conformance kit on MariaDB and on MySQL: every capability the store declares, proven.

``nox -s conformance-mariadb`` and ``nox -s conformance-mysql`` run one class each
(``CAIRNFLOW_TEST_MARIADB_URL`` / ``CAIRNFLOW_TEST_MYSQL_URL``, else a ``mariadb:11`` /
``mysql:8.4`` container) and write ``conformance-report-<server>.json``. Without the
kit installed this module is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pymysql
import pytest

from cairnflow.sql import TABLES
from cairnflow_mysql import MySQLStore, parse_url

kit = pytest.importorskip("cairnflow_conformance", reason="the conformance kit is not installed")
databases = pytest.importorskip("cairnflow_conformance.databases")


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


def target(database: Callable[[], AbstractContextManager[str]], label: str) -> Iterator[Any]:
    """The kit's view of the driver on one server: one table prefix per kit namespace."""
    with database() as url:
        yield kit.StoreTarget(
            factory=lambda namespace: MySQLStore(url, table_prefix=namespace, pool_size=8),
            worker_factory="cairnflow_mysql.testing:make_store",
            worker_config={"url": url, "pool_size": 8},
            label=label,
            cleanup=lambda namespace: drop_namespace(url, namespace),
            app_connection=lambda namespace: app_connection(url),
        )


class TestMariaDB(kit.ConformanceSuite):  # type: ignore[misc, name-defined]
    """The whole kit on MariaDB (10.6+)."""

    @pytest.fixture(scope="class")
    @classmethod
    def cairnflow_target(cls) -> Iterator[Any]:
        """MariaDB from ``CAIRNFLOW_TEST_MARIADB_URL``, else a ``mariadb:11`` container."""
        yield from target(databases.mariadb, "cairnflow-mysql on MariaDB")


class TestMySQL(kit.ConformanceSuite):  # type: ignore[misc, name-defined]
    """The whole kit on MySQL (8.0+)."""

    @pytest.fixture(scope="class")
    @classmethod
    def cairnflow_target(cls) -> Iterator[Any]:
        """MySQL from ``CAIRNFLOW_TEST_MYSQL_URL``, else a ``mysql:8.4`` container."""
        yield from target(databases.mysql, "cairnflow-mysql on MySQL")
