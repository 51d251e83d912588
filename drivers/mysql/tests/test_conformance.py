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

import pytest

from cairnflow_mysql.testing import kit_target

kit = pytest.importorskip("cairnflow_conformance", reason="the conformance kit is not installed")
databases = pytest.importorskip("cairnflow_conformance.databases")


def target(database: Callable[[], AbstractContextManager[str]], label: str) -> Iterator[Any]:
    """The kit's view of the driver on one server: one table prefix per kit namespace."""
    with database() as url:
        yield kit_target(url, label=label)


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
