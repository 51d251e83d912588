"""The SQLite driver's tests, and the conformance kit's target."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairnflow_conformance import StoreTarget
from cairnflow_sqlite.testing import kit_target

pytest_plugins = ["cairnflow_conformance.plugin"]


@pytest.fixture(scope="session")
def cairnflow_target(tmp_path_factory: pytest.TempPathFactory) -> StoreTarget:
    """One SQLite file for the session; each kit test gets its own table prefix in it."""
    path = str(tmp_path_factory.mktemp("conformance") / "kit.db")
    target: StoreTarget = kit_target(path)
    return target


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database file of the test's own."""
    return tmp_path / "cairn.db"
