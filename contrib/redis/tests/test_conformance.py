"""The conformance kit on MariaDB and on a multi-process SQLite file, each given a
:class:`RedisNotifier`: the stores declare ``Cap.NOTIFY`` and the kit proves it (with every
other capability they declare: the kit cannot run one capability's tests alone).

The worker processes the kit spawns open the same stores with a notifier of their own
(``cairnflow_redis.testing:make_store``), so "an idle worker process is woken by an
enqueue elsewhere" crosses processes over Redis.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from cairnflow_conformance import ConformanceSuite, StoreTarget, databases
from cairnflow_mysql import MySQLStore
from cairnflow_mysql.testing import app_connection, drop_namespace
from cairnflow_redis import RedisNotifier
from cairnflow_sqlite import SQLiteStore


class TestMariaDBRedis(ConformanceSuite):
    """``mysql://`` on MariaDB with ``notifier=RedisNotifier(...)``."""

    @pytest.fixture(scope="class")
    @classmethod
    def cairnflow_target(cls, redis_url: str, session_prefix: str) -> Iterator[Any]:
        """MariaDB from ``CAIRNFLOW_TEST_MARIADB_URL`` (else a container), Redis from the
        ``redis_url`` fixture."""
        with databases.mariadb() as url:
            yield StoreTarget(
                factory=lambda namespace: MySQLStore(
                    url,
                    table_prefix=namespace,
                    pool_size=8,
                    notifier=RedisNotifier(redis_url, prefix=session_prefix),
                ),
                worker_factory="cairnflow_redis.testing:make_store",
                worker_config={
                    "store": "cairnflow_mysql.testing:make_store",
                    "redis_url": redis_url,
                    "prefix": session_prefix,
                    "url": url,
                    "pool_size": 8,
                },
                label="cairnflow-mysql on MariaDB + RedisNotifier",
                cleanup=lambda namespace: drop_namespace(url, namespace),
                app_connection=lambda namespace: app_connection(url),
            )


class TestSQLiteRedis(ConformanceSuite):
    """``sqlite:///file`` shared by worker processes, with ``notifier=RedisNotifier(...)``."""

    @pytest.fixture(scope="class")
    @classmethod
    def cairnflow_target(
        cls, redis_url: str, session_prefix: str, tmp_path_factory: pytest.TempPathFactory
    ) -> StoreTarget:
        """One SQLite file for the class; each kit test gets its own table prefix in it."""
        path = str(tmp_path_factory.mktemp("kit-redis") / "kit.db")
        return StoreTarget(
            factory=lambda namespace: SQLiteStore(
                path,
                table_prefix=namespace,
                synchronous="NORMAL",
                notifier=RedisNotifier(redis_url, prefix=session_prefix),
            ),
            worker_factory="cairnflow_redis.testing:make_store",
            worker_config={
                "store": "cairnflow_sqlite.testing:make_store",
                "redis_url": redis_url,
                "prefix": session_prefix,
                "path": path,
                "synchronous": "NORMAL",
            },
            label="cairnflow-sqlite (file) + RedisNotifier",
            app_connection=lambda namespace: sqlite3.connect(path, timeout=30),
        )
