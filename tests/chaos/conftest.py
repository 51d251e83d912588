"""Fixtures and options of the chaos tests (``nox -s chaos``; a short profile runs in ``tests``).

Options:

``--duration SECONDS``
    how long each scenario injects faults (default 3: the short profile);
``--chaos-profile short|full``
    ``short`` (the default, what ``nox -s tests`` runs) runs each process
    scenario on one engine only, rotating the engines across scenarios;
    ``full`` (``nox -s chaos``) runs every scenario on every engine;
``--chaos-report FILE``
    writes every scenario's figures (:class:`chaos_run.Figures`) as JSON; the
    figures are also printed per engine at the end of the run.

Server restarts run only with ``CAIRNFLOW_CHAOS_RESTARTS=1`` (``nox -s chaos``
sets it unless the environment sets it to ``0``). Each test works on a
database of its own (a SQLite file, or a database it creates and drops on the
Postgres and MariaDB servers of ``CAIRNFLOW_TEST_POSTGRES_URL`` /
``CAIRNFLOW_TEST_MARIADB_URL``), so killing "every connection of the test
database" touches nothing else on a shared server.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the chaos_* helper modules

from chaos_engines import (
    RESTARTS_ENV,
    Engine,
    MariaDBEngine,
    PostgresEngine,
    SQLiteEngine,
)

from cairnflow_conformance import databases

HERE = Path(__file__).parent
_FIGURES = "chaos"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "cairnflow chaos tests")
    group.addoption(
        "--duration", type=float, default=3.0, help="seconds of faults per chaos scenario"
    )
    group.addoption(
        "--chaos-profile",
        choices=("short", "full"),
        default="short",
        help="short: each process scenario on one engine; full: on every engine",
    )
    group.addoption("--chaos-report", default=None, help="write the figures as JSON here")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos_full: left out of the short chaos profile")
    config.addinivalue_line(
        "markers", "chaos_restarts: restarts database servers (run alone, by nox -s chaos)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A scenario runs --duration seconds, up to four times that while what it breaks has not
    # landed, then drains: its timeout grows with the duration.
    timeout = pytest.mark.timeout(max(600.0, 300.0 + 6 * config.getoption("--duration")))
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(timeout)
    if config.getoption("--chaos-profile") == "full":
        return
    kept, left = [], []
    for item in items:
        (left if item.get_closest_marker("chaos_full") else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


@pytest.fixture
def duration(request: pytest.FixtureRequest) -> float:
    """Seconds of faults per scenario (``--duration``)."""
    return float(request.config.getoption("--duration"))


@pytest.fixture
def full_profile(request: pytest.FixtureRequest) -> bool:
    """True under ``--chaos-profile full``."""
    return bool(request.config.getoption("--chaos-profile") == "full")


# -- engines -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    with databases.postgres() as url:
        yield url


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[str]:
    with databases.mariadb() as url:
        yield url


def _engine(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> Engine:
    if name == "sqlite":
        return SQLiteEngine(tmp_path)
    if name == "postgres":
        return PostgresEngine(request.getfixturevalue("postgres_server"))
    if name == "mariadb":
        return MariaDBEngine(request.getfixturevalue("mariadb_server"))
    raise ValueError(name)


@pytest.fixture
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """The engine named by the test's ``engine`` parameter, on a database of the test's own."""
    made = _engine(request, request.param, tmp_path)
    yield made
    made.drop()


@pytest.fixture
def restarts() -> bool:
    """True when this run may restart the local database servers."""
    return os.environ.get(RESTARTS_ENV) == "1"


# -- figures ------------------------------------------------------------------------------------
_collected: list[dict[str, Any]] = []
"""Every scenario's figures that reached this process (the controller, under xdist)."""


@pytest.fixture
def report_figures(record_property: Any) -> Any:
    """``report_figures(figures)``: carry a scenario's figures to the end-of-run table."""

    def report(figures: Any) -> None:
        record_property(_FIGURES, json.dumps(figures.as_json()))

    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == _FIGURES:
            _collected.append(json.loads(str(value)))


_COLUMNS = (
    ("scenario", "scenario"),
    ("runs", "runs"),
    ("kills", "kills"),
    ("stalls", "stalls"),
    ("connection_kills", "conn kills"),
    ("restarts", "restarts"),
    ("faults", "faults"),
    ("enqueues_unknown", "enq. unknown"),
    ("re_executions", "re-exec"),
    ("lost", "lost"),
    ("duplicated", "dup"),
    ("stuck", "stuck"),
    ("seconds", "s"),
)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not _collected:
        return
    rows = sorted(_collected, key=lambda f: (f["engine"], f["scenario"]))
    path = config.getoption("--chaos-report")
    if path:
        Path(path).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    write = terminalreporter.write_line
    terminalreporter.section("chaos figures")
    for engine in sorted({row["engine"] for row in rows}):
        mine = [row for row in rows if row["engine"] == engine]
        write(f"{engine}:")
        widths = [max(len(title), *(len(str(row[key])) for row in mine)) for key, title in _COLUMNS]
        write("  " + "  ".join(t.ljust(w) for (_, t), w in zip(_COLUMNS, widths, strict=True)))
        for row in mine:
            cells = [str(row[key]).ljust(w) for (key, _), w in zip(_COLUMNS, widths, strict=True)]
            write("  " + "  ".join(cells))
        total = {
            key: sum(row[key] for row in mine)
            for key, _ in _COLUMNS
            if key not in ("scenario", "seconds")
        }
        write("  total: " + ", ".join(f"{name} {n}" for name, n in total.items()))
