"""The conformance kit on PostgreSQL: every capability the store declares must be proven.

Run it with ``nox -s conformance-postgres`` (which installs the kit and writes
``conformance-report-postgres.json``); without the kit installed it is skipped.
"""

from __future__ import annotations

import pytest

kit = pytest.importorskip("cairnflow_conformance", reason="the conformance kit is not installed")


class TestPostgres(kit.ConformanceSuite):  # type: ignore[misc, name-defined]
    """The whole kit, on one table prefix per test (see ``cairnflow_target`` in conftest.py)."""
