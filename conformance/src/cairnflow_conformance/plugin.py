"""The cairnflow conformance kit as a pytest plugin.

A driver's ``tests/conftest.py`` opts in::

    pytest_plugins = ["cairnflow_conformance.plugin"]

This module adds the command-line options and pulls in the plugin's parts:
collection (markers, capability names, the override check), fixtures (the
namespace, the capability gate, the kit) and the proof gate with its report.
"""

from __future__ import annotations

import pytest

from . import databases

__all__ = ["pytest_addoption", "pytest_configure"]

pytest_plugins = [
    "cairnflow_conformance._plugins.collection",
    "cairnflow_conformance._plugins.fixtures",
    "cairnflow_conformance._plugins.gate",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--conformance-report=PATH`` and ``--conformance-require-db``."""
    group = parser.getgroup("cairnflow-conformance", "cairnflow conformance kit")
    group.addoption(
        "--conformance-report",
        dest="conformance_report",
        metavar="PATH",
        default=None,
        help="write the conformance report (JSON) to PATH",
    )
    group.addoption(
        "--conformance-require-db",
        dest="conformance_require_db",
        action="store_true",
        default=False,
        help="fail, instead of skipping, when a test database cannot be had (implied by $CI)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Tell :mod:`cairnflow_conformance.databases` whether a missing database fails."""
    if config.getoption("conformance_require_db", False):
        databases.require_databases(True)
