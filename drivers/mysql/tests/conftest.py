"""Fixtures: the servers under test, a fresh table prefix per test, raw connections.

Servers come from ``CAIRNFLOW_TEST_MARIADB_URL`` and ``CAIRNFLOW_TEST_MYSQL_URL``;
where one is unset, a testcontainers container (``mariadb:11``, ``mysql:8.4``)
when testcontainers is installed and a Docker engine answers; otherwise the
tests needing that server are skipped, saying why, or fail when ``$CI`` is set
(a CI run that silently skips its databases proves nothing).

The kit's classes (test_conformance.py) take their servers from the kit's own
``cairnflow_conformance.databases``, as its contract says; these tests use the same
variables but start their containers as root, since they create triggers (which MySQL
with binary logging reserves to privileged users) and kill their own connections.

Every test gets its own table prefix and its tables are dropped afterwards:
other people's tests share the server.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest

from cairnflow.sql import TABLES
from cairnflow_mysql import MySQLStore, parse_url

# The conformance kit (cairnflow-conformance) is optional here: the driver's own tests run
# without it, and test_conformance.py skips itself when it is missing.
pytest_plugins = (
    ["cairnflow_conformance.plugin"]
    if importlib.util.find_spec("cairnflow_conformance") is not None
    else []
)

SERVERS = {
    "mariadb": ("CAIRNFLOW_TEST_MARIADB_URL", "mariadb:11"),
    "mysql": ("CAIRNFLOW_TEST_MYSQL_URL", "mysql:8.4"),
}


def _unavailable(kind: str, why: str) -> None:
    # The kit's policy: under $CI a missing server fails, unless CAIRNFLOW_TEST_REQUIRE
    # leaves it out (a CI machine with MariaDB and no MySQL 8 says so).
    if os.environ.get("CI") and _required(kind):
        pytest.fail(f"{why} (a database is required: $CI is set)", pytrace=False)
    pytest.skip(why)


def _required(kind: str) -> bool:
    named = os.environ.get("CAIRNFLOW_TEST_REQUIRE")
    return named is None or kind in {part.strip() for part in named.split(",")}


def _docker_problem() -> str | None:
    try:
        docker: Any = importlib.import_module("docker")
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:
        return f"no Docker engine answers ({type(error).__name__})"
    return None


@contextlib.contextmanager
def server_url(kind: str) -> Iterator[str]:
    """A DSN for ``kind`` ("mariadb" or "mysql"): the environment, else a container, else skip."""
    env, image = SERVERS[kind]
    url = os.environ.get(env)
    if url:
        yield url
        return
    try:
        community: Any = importlib.import_module("testcontainers.community.mysql")
    except ImportError:
        _unavailable(kind, f"{env} is not set and testcontainers is not installed to start {image}")
    problem = _docker_problem()
    if problem is not None:
        _unavailable(kind, f"{env} is not set and {problem} to start {image}")
    # root: the tests create triggers (binary logging wants SUPER for that) and kill sessions.
    container = community.MySqlContainer(image, username="root", password="test", dbname="test")
    container.start()
    try:
        raw = str(container.get_connection_url())
        scheme, rest = raw.split("://", 1)
        yield f"{scheme.split('+', 1)[0]}://{rest}"
    finally:
        container.stop()


@dataclass
class Server:
    """One server under test, and raw connections to it (not through the store)."""

    kind: str
    url: str
    _opened: list[Any] = field(default_factory=list)

    def connect(self, **options: Any) -> Any:
        """A raw PyMySQL connection (autocommit unless told otherwise); closed at teardown."""
        parts = parse_url(self.url)
        options.setdefault("autocommit", True)
        # Never wait a year for a metadata lock (the server's default) if a test goes wrong.
        options.setdefault("init_command", "SET SESSION lock_wait_timeout = 60")
        conn = pymysql.connect(
            host=parts.host,
            port=parts.port,
            user=parts.user,
            password=parts.password or "",
            database=parts.database,
            charset="utf8mb4",
            **options,
        )
        self._opened.append(conn)
        return conn

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement on a fresh autocommit connection; return its rows."""
        conn = self.connect()
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql, params or None)
                return list(cursor.fetchall())
        finally:
            conn.close()
            self._opened.remove(conn)

    def tables(self, like: str) -> list[str]:
        """Tables of the test database whose names match ``like`` (SQL LIKE, ``\\`` escapes)."""
        rows = self.query(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_name LIKE %s",
            like,
        )
        return sorted(str(r[0]) for r in rows)

    def drop(self, prefix: str, *extra: str) -> None:
        """Drop the namespace's tables (and ``extra`` tables)."""
        names = [prefix + t for t in TABLES] + list(extra)
        self.query("DROP TABLE IF EXISTS " + ", ".join(f"`{name}`" for name in names))

    def close(self) -> None:
        """Close every raw connection still open."""
        for conn in self._opened:
            with contextlib.suppress(Exception):
                conn.close()
        self._opened.clear()


@pytest.fixture(scope="session", params=sorted(SERVERS))
def server_url_of(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``(kind, url)`` of each server kind, once per session."""
    with server_url(request.param) as url:
        yield request.param, url


@pytest.fixture
def server(server_url_of: tuple[str, str]) -> Iterator[Server]:
    """The server under test (every test that takes it runs on MariaDB and on MySQL)."""
    kind, url = server_url_of
    found = Server(kind, url)
    yield found
    found.close()


@pytest.fixture
def prefix(server: Server) -> Iterator[str]:
    """A fresh table prefix; its tables (and the test's own ``<prefix>*``) are dropped after."""
    name = f"cft{uuid.uuid4().hex[:10]}_"
    yield name
    server.close()  # a raw connection left in a transaction would hold the tables' metadata lock
    server.drop(name, f"{name}audit", f"{name}app", f"{name}scratch")


@pytest.fixture
def store(server: Server, prefix: str) -> Iterator[MySQLStore]:
    """A migrated store on a fresh prefix."""
    made = MySQLStore(server.url, table_prefix=prefix)
    made.migrate()
    yield made
    made.close()
