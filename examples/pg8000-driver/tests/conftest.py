"""Run the cairnflow conformance kit on cairnflow-pg8000, found through its entry point.

The server is ``CAIRNFLOW_TEST_POSTGRES_URL`` (else a container, else a skip; a
failure under ``$CI``), through :func:`cairnflow_conformance.databases.postgres`.
It is a ``postgresql://`` DSN: :func:`~cairnflow_conformance.databases.parts`
gives the same server as a ``pg8000://`` URL. The server is shared, so every
test's tables are dropped after it (``cleanup``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import cairnflow as cf
from cairnflow_conformance import StoreTarget, databases
from cairnflow_pg8000.testing import drop_namespace

pytest_plugins = ["cairnflow_conformance.plugin"]


@pytest.fixture(scope="session")
def pg8000_url() -> Iterator[str]:
    """The test server as a ``pg8000://`` URL."""
    with databases.postgres() as dsn:
        yield databases.parts(dsn).with_scheme("pg8000")


@pytest.fixture(scope="session")
def cairnflow_target(pg8000_url: str) -> StoreTarget:
    """One table prefix per kit namespace, dropped after each test."""
    return StoreTarget(
        # cf.open_store finds the driver by its URL scheme, through the entry point.
        factory=lambda namespace: cf.open_store(pg8000_url, table_prefix=namespace, max_size=6),
        worker_factory="cairnflow_pg8000.testing:make_store",
        worker_config={"url": pg8000_url},
        cleanup=lambda namespace: drop_namespace(namespace, url=pg8000_url),
    )
