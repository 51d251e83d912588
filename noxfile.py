"""Every way to build, check and run cairnflow: ``nox -s demo``, ``nox -s tests``, ...

Sessions install the workspace's distributions in editable mode into their own
virtualenvs, so a fresh machine needs only Python and ``pip install nox``.
Databases: set ``CAIRNFLOW_TEST_POSTGRES_URL`` / ``CAIRNFLOW_TEST_MARIADB_URL`` /
``CAIRNFLOW_TEST_MYSQL_URL``, or let testcontainers start them where a Docker
engine runs. ``.ci/run`` sets them to the local servers.
"""

from __future__ import annotations

from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

CORE = "./core"
DRIVERS = {"sqlite": "./drivers/sqlite"}
CONFORMANCE = "./conformance"
TEST_DEPS = ["pytest>=8", "pytest-xdist>=3.5", "pytest-timeout>=2.3"]
DEMO_DB = ROOT / ".cairnflow-demo" / "demo.db"


def _editable(*paths: str) -> list[str]:
    args: list[str] = []
    for path in paths:
        args += ["-e", path]
    return args


def _install_all(session: nox.Session, *extra: str) -> None:
    session.install(*_editable(CORE, *DRIVERS.values()), *TEST_DEPS, *extra)


@nox.session
def demo(session: nox.Session) -> None:
    """Run the demo on a SQLite file (run it twice: the second run reads the first back)."""
    session.install(*_editable(CORE, DRIVERS["sqlite"]))
    DEMO_DB.parent.mkdir(exist_ok=True)
    session.run("cairn", "demo", "--db", f"sqlite:///{DEMO_DB}", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the raw SQL loop of each engine (``-- --engine X --quick --json F``)."""
    session.install(*_editable(CORE, *DRIVERS.values()))
    session.run("python", "bench/run.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and import order."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every distribution's sources."""
    _install_all(session, "mypy>=1.10")
    session.run("mypy", "--strict", "core/src", *[f"{p}/src" for p in DRIVERS.values()])


@nox.session
def tests(session: nox.Session) -> None:
    """Everything CI runs: lint, types, unit and integration tests, conformance."""
    _install_all(session, "ruff>=0.5", "mypy>=1.10")
    session.run("ruff", "check", ".")
    session.run("mypy", "--strict", "core/src", *[f"{p}/src" for p in DRIVERS.values()])
    pytest = ["pytest", "-p", "no:cacheprovider", *session.posargs]
    session.run(*pytest, "core/tests")
    session.run(*pytest, "drivers/sqlite/tests")
