"""The conformance kit on MariaDB and on a multi-process SQLite file, each given a
:class:`RedisNotifier`: the stores declare ``Cap.NOTIFY`` and the kit proves it.

The notifier carries wake-up hints and nothing else, so the suites put NOTIFY under test
(``capabilities_under_test``): its tests, those that need it and the baseline run; the
drivers' own kits prove every other capability on the same stores.

The drivers' kit targets take the notifier as a spec, so the worker processes the kit
spawns build one of their own and "an idle worker process is woken by an enqueue
elsewhere" crosses processes over Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cairnflow import Cap
from cairnflow_conformance import ConformanceSuite, databases
from cairnflow_mysql.testing import kit_target as mysql_target
from cairnflow_sqlite.testing import kit_target as sqlite_target


def notifier(url: str, prefix: str) -> tuple[str, dict[str, Any]]:
    """The spec of a RedisNotifier on the test Redis, under the session's prefix."""
    return ("cairnflow_redis:RedisNotifier", {"url": url, "prefix": prefix})


class TestMariaDBRedis(ConformanceSuite):
    """``mysql://`` on MariaDB with ``notifier=RedisNotifier(...)``."""

    capabilities_under_test = frozenset({Cap.NOTIFY})

    @pytest.fixture(scope="class")
    @classmethod
    def cairnflow_target(cls, redis_url: str, session_prefix: str) -> Iterator[Any]:
        """MariaDB from ``CAIRNFLOW_TEST_MARIADB_URL`` (else a container)."""
        with databases.mariadb() as url:
            yield mysql_target(
                url,
                label="cairnflow-mysql on MariaDB + RedisNotifier",
                notifier=notifier(redis_url, session_prefix),
            )


class TestSQLiteRedis(ConformanceSuite):
    """``sqlite:///file`` shared by worker processes, with ``notifier=RedisNotifier(...)``."""

    capabilities_under_test = frozenset({Cap.NOTIFY})

    @pytest.fixture(scope="class")
    @classmethod
    def cairnflow_target(
        cls, redis_url: str, session_prefix: str, tmp_path_factory: pytest.TempPathFactory
    ) -> Any:
        """One SQLite file for the class; each kit test gets its own table prefix in it."""
        path = str(tmp_path_factory.mktemp("kit-redis") / "kit.db")
        return sqlite_target(
            path,
            label="cairnflow-sqlite (file) + RedisNotifier",
            notifier=notifier(redis_url, session_prefix),
        )
