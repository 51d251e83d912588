"""Run the cairnflow conformance kit on litestore, found through its entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

import cairnflow as cf
from cairnflow_conformance import StoreTarget

pytest_plugins = ["cairnflow_conformance.plugin"]


@pytest.fixture(scope="session")
def cairnflow_target(tmp_path_factory: pytest.TempPathFactory) -> StoreTarget:
    """One SQLite file per test process; every test gets its own table prefix in it."""
    url = f"litestore://{tmp_path_factory.mktemp('litestore') / 'kit.db'}"
    return StoreTarget(
        # cf.open_store finds the driver by its URL scheme, through the entry point.
        factory=lambda namespace: cf.open_store(url, table_prefix=namespace),
        worker_factory="cairnflow_litestore.testing:make_store",
        worker_config={"url": url},
    )


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A fresh litestore file for the driver's own tests."""
    return f"litestore://{tmp_path / 'own.db'}"
