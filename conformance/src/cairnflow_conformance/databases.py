"""Test databases for drivers: a DSN from the environment, else a container, else a skip.

::

    @pytest.fixture(scope="session")
    def cairnflow_target():
        with databases.postgres() as url:
            yield StoreTarget(factory=lambda ns: PostgresStore(url, table_prefix=ns))

Each function is a context manager yielding a DSN:

1. ``CAIRNFLOW_TEST_POSTGRES_URL`` / ``CAIRNFLOW_TEST_MYSQL_URL`` /
   ``CAIRNFLOW_TEST_MARIADB_URL`` when set;
2. else a testcontainers container (``postgres:16``, ``mysql:8.4``,
   ``mariadb:11``) when testcontainers is installed
   (``cairnflow-conformance[containers]``) and a Docker engine answers;
3. else the test is skipped, saying why; with ``$CI`` set or
   ``--conformance-require-db`` given, it fails instead, since a CI run that
   silently skips its databases proves nothing.

``CAIRNFLOW_TEST_REQUIRE`` narrows which servers must be there: a comma list
of ``postgres``, ``mysql``, ``mariadb`` (default: all of them). A CI machine
that provides Postgres and MariaDB but no MySQL says
``CAIRNFLOW_TEST_REQUIRE=postgres,mariadb``: a missing MySQL is then skipped,
saying so, while a missing Postgres or MariaDB still fails the run.

A driver on another client library wants the server, not the URL: :func:`parts`
splits a DSN into its host, port, user, password and database
(:class:`ServerURL`), and :meth:`ServerURL.with_scheme` gives the same server
under the driver's own scheme (``pg8000://...`` for a ``postgresql://`` DSN).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote, unquote, urlsplit

import pytest

__all__ = [
    "REQUIRE_ENV",
    "ServerURL",
    "mariadb",
    "mysql",
    "parts",
    "postgres",
    "require_databases",
    "required",
]

REQUIRE_ENV = "CAIRNFLOW_TEST_REQUIRE"
"""Names the servers a run must have (comma list); unset: every one."""

_required = False


def require_databases(required: bool = True) -> None:
    """Make a missing database fail instead of skip (the plugin's ``--conformance-require-db``)."""
    global _required
    _required = required


def required(server: str) -> bool:
    """True when a missing ``server`` must fail the run rather than skip its tests."""
    if not (_required or os.environ.get("CI")):
        return False
    named = os.environ.get(REQUIRE_ENV)
    if named is None:
        return True
    return server in {part.strip() for part in named.split(",") if part.strip()}


def _unavailable(server: str, why: str) -> NoReturn:
    if required(server):
        pytest.fail(
            f"{why} (a database is required here: $CI is set or --conformance-require-db "
            f"given, and {REQUIRE_ENV} does not leave {server} out)",
            pytrace=False,
        )
    if _required or os.environ.get("CI"):
        why += f" ({REQUIRE_ENV}={os.environ.get(REQUIRE_ENV)!s} leaves {server} out)"
    pytest.skip(why)


@dataclass(frozen=True, slots=True)
class _Engine:
    name: str
    env: str
    image: str
    start: Callable[[str], Any]
    url: Callable[[Any], str]


def _docker_answers() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        docker: Any = importlib.import_module("docker")
    except ImportError:
        return "the docker package is not installed"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:  # noqa: BLE001 - any failure means: no engine to use
        return f"no Docker engine answers ({type(error).__name__}: {error})"
    return None


def _container_class(kind: str, name: str) -> Any:
    """testcontainers' class, from the community package (newer) or the old module."""
    for module in (f"testcontainers.community.{kind}", f"testcontainers.{kind}"):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return None


@contextmanager
def _database(engine: _Engine) -> Iterator[str]:
    url = os.environ.get(engine.env)
    if url:
        yield url
        return
    try:
        importlib.import_module("testcontainers")
    except ImportError:
        _unavailable(
            engine.name,
            f"{engine.env} is not set and testcontainers is not installed "
            f"(pip install 'cairnflow-conformance[containers]') to start {engine.image}",
        )
    why = _docker_answers()
    if why is not None:
        _unavailable(engine.name, f"{engine.env} is not set and {why} to start {engine.image}")
    container = engine.start(engine.image)
    container.start()
    try:
        yield engine.url(container)
    finally:
        container.stop()


def _postgres_container(image: str) -> Any:
    cls = _container_class("postgres", "PostgresContainer")
    return cls(image, driver=None)


def _mysql_container(image: str) -> Any:
    cls = _container_class("mysql", "MySqlContainer")
    return cls(image, dialect=None)


def _postgres_url(container: Any) -> str:
    return str(container.get_connection_url(driver=None))


def _mysql_url(container: Any) -> str:
    url = str(container.get_connection_url())
    # Some releases name a default driver in the scheme (mysql+pymysql://): drop it.
    scheme, rest = url.split("://", 1)
    return f"{scheme.split('+', 1)[0]}://{rest}"


_POSTGRES = _Engine(
    "postgres", "CAIRNFLOW_TEST_POSTGRES_URL", "postgres:16", _postgres_container, _postgres_url
)
_MYSQL = _Engine("mysql", "CAIRNFLOW_TEST_MYSQL_URL", "mysql:8.4", _mysql_container, _mysql_url)
_MARIADB = _Engine(
    "mariadb", "CAIRNFLOW_TEST_MARIADB_URL", "mariadb:11", _mysql_container, _mysql_url
)


@contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL DSN (``postgresql://...``): env, else ``postgres:16``, else skip."""
    with _database(_POSTGRES) as url:
        yield url


@contextmanager
def mysql() -> Iterator[str]:
    """A MySQL DSN (``mysql://...``): env, else ``mysql:8.4``, else skip."""
    with _database(_MYSQL) as url:
        yield url


@contextmanager
def mariadb() -> Iterator[str]:
    """A MariaDB DSN (``mysql://...``): env, else ``mariadb:11``, else skip."""
    with _database(_MARIADB) as url:
        yield url


@dataclass(frozen=True, slots=True)
class ServerURL:
    """The parts of a database URL: what a client library's ``connect()`` takes.

    ``port`` is None when the URL names none (the library's default applies);
    ``query`` is the URL's query string, without ``?``.
    """

    scheme: str
    host: str
    port: int | None
    user: str | None
    password: str | None
    database: str
    query: str = ""

    def with_scheme(self, scheme: str) -> str:
        """The same server as a URL of ``scheme`` (``pg8000://user@host:5432/test``)."""
        auth = ""
        if self.user is not None:
            auth = quote(self.user, safe="")
            if self.password is not None:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        port = f":{self.port}" if self.port is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?{self.query}" if self.query else ""
        return f"{scheme}://{auth}{host}{port}/{quote(self.database, safe='')}{query}"

    def __str__(self) -> str:
        return self.with_scheme(self.scheme)


def parts(url: str) -> ServerURL:
    """Split ``url`` (``postgresql://user:pw@host:port/db?...``, ``mysql://...``) into parts.

    The credentials and the database name are percent-decoded; a URL without
    a host (a Unix socket through the query string) keeps ``host`` empty.
    """
    split = urlsplit(url)
    if not split.scheme:
        raise ValueError(f"not a URL: {url!r} (expected scheme://user@host:port/database)")
    return ServerURL(
        scheme=split.scheme,
        host=split.hostname or "",
        port=split.port,
        user=unquote(split.username) if split.username is not None else None,
        password=unquote(split.password) if split.password is not None else None,
        database=unquote(split.path.lstrip("/")),
        query=split.query,
    )
