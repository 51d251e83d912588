"""The SQLite driver's tests, and the conformance kit's target."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cairnflow_conformance import StoreTarget
from cairnflow_sqlite import SQLiteStore

pytest_plugins = ["cairnflow_conformance.plugin"]


@pytest.fixture(scope="session")
def cairnflow_target(tmp_path_factory: pytest.TempPathFactory) -> StoreTarget:
    """One SQLite file for the session; each kit test gets its own table prefix in it."""
    path = str(tmp_path_factory.mktemp("conformance") / "kit.db")
    return StoreTarget(
        factory=lambda namespace: SQLiteStore(path, table_prefix=namespace, synchronous="NORMAL"),
        worker_factory="cairnflow_sqlite.testing:make_store",
        worker_config={"path": path, "synchronous": "NORMAL"},
        app_connection=lambda namespace: sqlite3.connect(path, timeout=30),
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database file of the test's own."""
    return tmp_path / "cairn.db"
