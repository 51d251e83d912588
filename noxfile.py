"""Every way to build, check and run cairnflow: ``nox -s demo``, ``nox -s tests``, ...

Sessions install the workspace's distributions in editable mode into their own
virtualenvs, so a fresh machine needs only Python and ``pip install nox``.
Databases: set ``CAIRNFLOW_TEST_POSTGRES_URL`` / ``CAIRNFLOW_TEST_MARIADB_URL`` /
``CAIRNFLOW_TEST_MYSQL_URL``, or let testcontainers start them where a Docker
engine runs. ``.ci/run`` sets them to the local servers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

CORE = "./core"
DRIVERS = {
    "sqlite": "./drivers/sqlite",
    "postgres": "./drivers/postgres",
    "mysql": "./drivers/mysql",
}
CONFORMANCE = "./conformance"
EXAMPLE_DRIVER = "./examples/third-party-driver"
PG8000_DRIVER = "./examples/pg8000-driver"
KIT_MUTANTS = f"{CONFORMANCE}/mutants/kit_mutants.py"
CHAOS = "tests/chaos"
TYPED = [
    "core/src",
    f"{CONFORMANCE}/src",
    f"{CONFORMANCE}/mutants",
    f"{EXAMPLE_DRIVER}/src",
    f"{PG8000_DRIVER}/src",
]
TEST_DEPS = ["pytest>=8", "pytest-xdist>=3.5", "pytest-timeout>=2.3"]
# contrib/: one distribution per directory, each with its tests in ``tests/`` and what they
# need in its ``test`` extra. Found, not listed: a new integration needs no change here.
CONTRIB = sorted(
    path.parent.relative_to(ROOT).as_posix() for path in ROOT.glob("contrib/*/pyproject.toml")
)
DEMO_DB = ROOT / ".cairnflow-demo" / "demo.db"


def _editable(*paths: str) -> list[str]:
    args: list[str] = []
    for path in paths:
        args += ["-e", path]
    return args


# What a driver needs installed with it on a fresh machine (psycopg's wheels carry libpq).
# MySQL 8's caching_sha2_password over a connection without TLS needs PyMySQL[rsa].
EXTRAS = {"postgres": "[binary]", "mysql": "[rsa]"}


def _drivers() -> list[str]:
    return [path + EXTRAS.get(name, "") for name, path in DRIVERS.items()]


def _install_all(session: nox.Session, *extra: str) -> None:
    session.install(*_editable(CORE, CONFORMANCE, *_drivers(), PG8000_DRIVER), *TEST_DEPS, *extra)


def _contrib() -> list[str]:
    """Editable installs of every contrib distribution with its ``test`` extra."""
    return _editable(*[f"./{path}[test]" for path in CONTRIB])


def _typed() -> list[str]:
    return [*TYPED, *[f"{p}/src" for p in DRIVERS.values()], *[f"{p}/src" for p in CONTRIB]]


@nox.session
def demo(session: nox.Session) -> None:
    """Run the demo on a SQLite file (run it twice: the second run reads the first back)."""
    session.install(*_editable(CORE, DRIVERS["sqlite"]))
    DEMO_DB.parent.mkdir(exist_ok=True)
    session.run("cairn", "demo", "--db", f"sqlite:///{DEMO_DB}", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the raw SQL loop of each engine (``-- --engine X --quick --json F``)."""
    # The broker notifiers W4 measures on SQLite and MariaDB (bench/_brokers.py).
    brokers = [path for path in CONTRIB if path in ("contrib/redis", "contrib/nats")]
    session.install(*_editable(CORE, *_drivers(), *brokers))
    session.run("python", "bench/run.py", *session.posargs)


@nox.session(name="bench-http")
def bench_http(session: nox.Session) -> None:
    """An enqueuing endpoint under HTTP load on Postgres: loop lag in a uvicorn server (#19).

    ``-- --rate 500 --seconds 10``; ``--loop uvloop --http httptools`` for uvicorn's fast
    parts. See ``bench/async_http.py``; figures in docs/benchmarks.md.
    """
    session.install(
        *_editable(CORE, f"{DRIVERS['postgres']}{EXTRAS['postgres']}"),
        *RECIPE_DEPS,
        "uvicorn>=0.30",
        "uvloop>=0.19",
        "httptools>=0.6",
    )
    session.run("python", "bench/async_http.py", *session.posargs)


# The peers of ``bench-peers``, pinned: the versions its table in docs/benchmarks.md names.
BENCH_PEERS = {
    "pgqueuer": ["pgqueuer==1.6.0", "asyncpg==0.32.0"],
    "procrastinate": ["procrastinate==3.10.0"],
    "dbos": ["dbos==3.4.0"],
}


@nox.session(name="bench-peers")
def bench_peers(session: nox.Session) -> None:
    """cairnflow against PgQueuer, Procrastinate and DBOS on Postgres (``-- --quick --write``).

    cairnflow is installed as for ``bench``; each peer at its pinned version, one at a time: a
    peer that cannot be installed is named and marked "not installed", the others still run.
    """
    session.install(*_editable(CORE, *_drivers()))
    missing = []
    for peer, pins in BENCH_PEERS.items():
        try:
            session.install(*pins)
        except nox.command.CommandFailed:
            session.warn(f"bench-peers: {peer} ({', '.join(pins)}) could not be installed")
            missing.append(peer)
    if missing:
        session.log(f"bench-peers: not installed: {', '.join(missing)}")
    session.run("python", "bench/run_peers.py", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into ``.site/`` with warnings as errors (``-- serve``)."""
    _build_docs(session, *session.posargs)


def _build_docs(session: nox.Session, *args: str) -> None:
    session.install("-r", "docs/requirements.txt", *_editable(CORE, CONFORMANCE))
    command = ["mkdocs", *(args or ["build", "--strict"])]
    session.run(*command, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and import order."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every distribution's sources."""
    _install_all(session, "mypy>=1.10", *_contrib())
    session.run("mypy", "--strict", *_typed())


@nox.session
def tests(session: nox.Session) -> None:
    """Everything CI runs: lint, types, unit and integration tests, conformance."""
    _tests(session)
    # The example third-party drivers run the kit from fresh virtualenvs of their own.
    session.notify("conformance-example")
    session.notify("conformance-pg8000")


@nox.session(name="tests-under-load")
def tests_under_load(session: nox.Session) -> None:
    """``tests`` with a CPU burner on every core, as on a driver author's busy CI machine.

    The burners run at the same priority as the tests for the whole session and are
    stopped however it ends. ``-- --burners N`` changes their number (default: one per core).
    """
    args = list(session.posargs)
    burners = os.cpu_count() or 2
    if "--burners" in args:
        at = args.index("--burners")
        burners = int(args[at + 1])
        del args[at : at + 2]
    session.posargs[:] = args
    spinning = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)
    ]
    session.log(f"{burners} CPU burner(s) running")
    try:
        _tests(session)
    finally:
        for burner in spinning:
            burner.kill()
            burner.wait()


# What tests of documented recipes and of the example shop (tests/app) need beyond the drivers
# and the contrib distributions (the web-app guide's Starlette app; the shop's web app).
RECIPE_DEPS = ["starlette>=0.37", "httpx>=0.27"]


def _tests(session: nox.Session) -> None:
    _install_all(session, "ruff>=0.5", "mypy>=1.10", *RECIPE_DEPS, *_contrib())
    session.run("ruff", "check", ".")
    session.run("mypy", "--strict", *_typed())
    pytest = ["pytest", "-p", "no:cacheprovider", *session.posargs]
    session.run(*pytest, "core/tests")
    # Each contrib distribution's tests, one pytest each (their conftests stay apart).
    for path in CONTRIB:
        session.run(*pytest, "-n", "2", f"{path}/tests")
    # The SQLite driver's tests include the whole kit; its report must show declared == proven.
    _kit(session, "drivers/sqlite/tests", "sqlite", *session.posargs)
    # So do the Postgres driver's (CAIRNFLOW_TEST_POSTGRES_URL, set by .ci/run).
    _kit(session, "drivers/postgres/tests", "postgres", *session.posargs)
    # The MySQL driver: its own tests on every server configured, then the kit once per
    # server, each with its own report. A server a machine does not have is skipped, saying
    # so; under $CI it fails unless CAIRNFLOW_TEST_REQUIRE leaves it out (.ci/run does, for
    # MySQL 8: this machine has MariaDB only).
    session.run(
        *pytest,
        "-n",
        "2",
        "drivers/mysql/tests",
        "--ignore=drivers/mysql/tests/test_conformance.py",
    )
    mysql_kit = "drivers/mysql/tests/test_conformance.py"
    _kit(session, f"{mysql_kit}::TestMariaDB", "mariadb", *session.posargs)
    if os.environ.get("CAIRNFLOW_TEST_MYSQL_URL"):
        _kit(session, f"{mysql_kit}::TestMySQL", "mysql", *session.posargs)
    else:
        session.log("MySQL 8: no server configured (CAIRNFLOW_TEST_MYSQL_URL); not run here")
    # Tests that cross distributions: the tutorial run as written (tests/docs); the example
    # shop (tests/app): its web app enqueuing in its transaction (contrib/sqlalchemy), a
    # worker process with its metrics (contrib/prometheus), `cairn dashboard` showing the
    # runs (contrib/dashboard), on SQLite and Postgres. Installed above: RECIPE_DEPS and
    # every contrib distribution's test extra.
    session.run(*pytest, "tests/docs", "tests/app")
    # The pg8000 example's migrations against the reference schema, and the reference against
    # cairnflow-postgres's migrations: conformance-pg8000's fresh venv has no cairnflow-postgres,
    # so that check runs here, where both are installed.
    session.run(*pytest, f"{PG8000_DRIVER}/tests/test_driver.py")
    # The chaos tests' short profile: each scenario once, on one engine each, a few
    # seconds of faults (`nox -s chaos` runs them all at length); never a server restart.
    session.run(*pytest, "-n", "2", CHAOS, env={"CAIRNFLOW_CHAOS_RESTARTS": "0"})
    # The kit's self-tests and the whole kit on memory://; the example driver is
    # installed too, so the self-tests see every capability some store implements.
    session.install("-e", EXAMPLE_DRIVER)
    report = "conformance-report-memory.json"
    session.run(*pytest, "-n", "2", "conformance/tests", f"--conformance-report={report}")
    if not session.posargs:  # a -k/-m subset is never a verdict
        session.run("python", "-m", "cairnflow_conformance.report", report)
    # The documentation site builds without a warning (a broken link fails it); the
    # tutorial's own files and commands ran above (tests/docs).
    if not session.posargs:
        _build_docs(session)
    # Every benchmark workload completes on every engine here (speed is not judged here).
    if not session.posargs:
        session.run("python", "bench/run.py", "--quick")


def _kit(session: nox.Session, tests: str, name: str, *args: str) -> None:
    """Run ``tests`` (which subclass the kit) and check that the report proves what is declared."""
    report = f"conformance-report-{name}.json"
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        tests,
        f"--conformance-report={report}",
        *args,
    )
    if not args:  # a -k/-m subset is never a verdict
        session.run("python", "-m", "cairnflow_conformance.report", report)


@nox.session(name="conformance-sqlite")
def conformance_sqlite(session: nox.Session) -> None:
    """The conformance kit on a SQLite file; writes conformance-report-sqlite.json."""
    session.install(*_editable(CORE, CONFORMANCE, DRIVERS["sqlite"]), *TEST_DEPS)
    _kit(session, "drivers/sqlite/tests/test_conformance.py", "sqlite", *session.posargs)


@nox.session(name="conformance-postgres")
def conformance_postgres(session: nox.Session) -> None:
    """The conformance kit on PostgreSQL; writes conformance-report-postgres.json.

    The server is ``CAIRNFLOW_TEST_POSTGRES_URL`` (``.ci/run`` sets it to the local
    one), else a ``postgres:16`` container through testcontainers.
    """
    session.install(
        *_editable(CORE, f"{CONFORMANCE}[containers]", f"{DRIVERS['postgres']}[binary]"),
        *TEST_DEPS,
    )
    _kit(session, "drivers/postgres/tests/test_conformance.py", "postgres", *session.posargs)


def _mysql_kit(session: nox.Session, suite: str, server: str) -> None:
    session.install(
        *_editable(CORE, f"{CONFORMANCE}[containers]", f"{DRIVERS['mysql']}[rsa]"), *TEST_DEPS
    )
    _kit(session, f"drivers/mysql/tests/test_conformance.py::{suite}", server, *session.posargs)


@nox.session(name="conformance-mariadb")
def conformance_mariadb(session: nox.Session) -> None:
    """The conformance kit on MariaDB; writes conformance-report-mariadb.json.

    The server is ``CAIRNFLOW_TEST_MARIADB_URL``, else a ``mariadb:11`` container.
    """
    _mysql_kit(session, "TestMariaDB", "mariadb")


@nox.session(name="conformance-mysql")
def conformance_mysql(session: nox.Session) -> None:
    """The conformance kit on MySQL; writes conformance-report-mysql.json.

    The server is ``CAIRNFLOW_TEST_MYSQL_URL``, else a ``mysql:8.4`` container.
    """
    _mysql_kit(session, "TestMySQL", "mysql")


@nox.session(name="conformance-memory")
def conformance_memory(session: nox.Session) -> None:
    """The conformance kit on memory://; writes conformance-report-memory.json."""
    session.install(*_editable(CORE, CONFORMANCE), *TEST_DEPS)
    report = "conformance-report-memory.json"
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "conformance/tests/test_memory.py",
        f"--conformance-report={report}",
        *session.posargs,
    )
    session.run("python", "-m", "cairnflow_conformance.report", report)


@nox.session(name="conformance-example", reuse_venv=False)
def conformance_example(session: nox.Session) -> None:
    """The example third-party driver through the kit, built and installed into a fresh venv.

    Nothing is editable here: the driver must work as a wheel, found through its
    entry point; writes conformance-report-example.json.
    """
    _fresh_kit(session, EXAMPLE_DRIVER, "example")


@nox.session(name="conformance-pg8000", reuse_venv=False)
def conformance_pg8000(session: nox.Session) -> None:
    """The example SQL dialect driver (pg8000) through the kit, from a fresh venv, on Postgres.

    The server is ``CAIRNFLOW_TEST_POSTGRES_URL``; without it the session is
    skipped, saying so, except under ``$CI`` (``.ci/run`` sets it), where it
    fails. Writes conformance-report-pg8000.json.
    """
    if not os.environ.get("CAIRNFLOW_TEST_POSTGRES_URL"):
        why = "cairnflow-pg8000 needs a Postgres server: set CAIRNFLOW_TEST_POSTGRES_URL"
        if os.environ.get("CI"):
            session.error(f"{why} ($CI is set: it must run here)")
        session.skip(why)
    _fresh_kit(session, PG8000_DRIVER, "pg8000")


def _fresh_kit(session: nox.Session, driver: str, name: str) -> None:
    """Build ``driver``, core and the kit as wheels into the session's venv; run its kit."""
    # uv would install workspace members editable (tool.uv.sources): ask for wheels.
    fresh = ["--reinstall", "--no-sources"] if session.venv_backend == "uv" else []
    session.install(*fresh, CORE, CONFORMANCE, driver, *TEST_DEPS)
    report = ROOT / f"conformance-report-{name}.json"
    session.chdir(driver)
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        f"--conformance-report={report}",
        *session.posargs,
    )
    session.run("python", "-m", "cairnflow_conformance.report", str(report))


@nox.session(name="kit-mutants")
def kit_mutants(session: nox.Session) -> None:
    """The kit against one-line bugs: each must be refused with its capability named unproven.

    The mutants (``conformance/mutants/kit_mutants.py``) are applied to a scratch
    copy of ``core/`` and the drivers, installed editable into this session's
    virtualenv; the working tree is never changed. The Postgres kit runs once
    unmutated, then once per mutant (about 12 minutes on two cores); ``-- --engine
    postgres --engine sqlite`` adds the SQLite kit for the SQL layer's mutants,
    ``-- --only NAME`` picks mutants. Needs ``CAIRNFLOW_TEST_POSTGRES_URL``; not
    part of ``tests``.
    """
    if not os.environ.get("CAIRNFLOW_TEST_POSTGRES_URL"):
        session.error("kit-mutants runs the Postgres kit: set CAIRNFLOW_TEST_POSTGRES_URL")
    scratch = Path(session.create_tmp()) / "scratch"
    session.run("python", KIT_MUTANTS, "prepare", str(scratch))
    session.install(
        *_editable(
            str(scratch / "core"),
            str(scratch / "drivers" / "sqlite"),
            f"{scratch / 'drivers' / 'postgres'}{EXTRAS['postgres']}",
            CONFORMANCE,
        ),
        *TEST_DEPS,
    )
    session.run("python", KIT_MUTANTS, "run", str(scratch), *session.posargs)


@nox.session
def chaos(session: nox.Session) -> None:
    """The chaos tests at length: faults, kills, stalls, lost connections, poison, restarts.

    Every scenario on every engine, ``--duration`` seconds of faults each (default
    30; ``-- --duration 60``), then the history of every run checked against the
    store: nothing lost, no outcome written twice, nothing stuck. The servers of
    ``CAIRNFLOW_TEST_POSTGRES_URL`` and ``CAIRNFLOW_TEST_MARIADB_URL`` are restarted
    under load when they are this machine's (``CAIRNFLOW_CHAOS_RESTARTS=0`` turns
    that off); those scenarios run last, alone. Writes ``chaos-report.json`` and
    ``chaos-report-restarts.json``; ``docs/reliability.md`` quotes them. Not part of
    ``tests``, which runs a short profile of the same tests.
    """
    _install_all(session)
    args = list(session.posargs)
    if not any(arg.split("=", 1)[0] == "--duration" for arg in args):
        args += ["--duration", "30"]
    restarts = os.environ.get("CAIRNFLOW_CHAOS_RESTARTS", "1")
    pytest = ["pytest", "-p", "no:cacheprovider", CHAOS, "--chaos-profile=full", *args]
    session.run(
        *pytest,
        "-n",
        "2",
        "-m",
        "not chaos_restarts",
        "--chaos-report=chaos-report.json",
        env={"CAIRNFLOW_CHAOS_RESTARTS": restarts},
    )
    # Alone: a restart cuts every connection to the server, the other scenarios' too.
    session.run(
        *pytest,
        "-m",
        "chaos_restarts",
        "--chaos-report=chaos-report-restarts.json",
        env={"CAIRNFLOW_CHAOS_RESTARTS": restarts},
        success_codes=[0, 5],  # 5: a -k of the posargs left no restart scenario
    )
