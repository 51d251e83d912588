"""Fixtures of the Postgres driver's tests: the server, stores on private namespaces, cleanup.

The server comes from ``CAIRNFLOW_TEST_POSTGRES_URL`` (``.ci/run`` points it at the
local server), else from a ``postgres:16`` container when testcontainers and a
Docker engine are there. Without either the integration tests are skipped,
saying why, unless ``$CI`` is set: then they fail, since a CI run that skips
its database proves nothing.

Every test works on its own table prefix (and schema, when it uses one) and
drops them afterwards, so the tests run in parallel (pytest-xdist) and beside
other suites on a shared server. Tests that terminate backends do it on a
database they create themselves, never on the shared one.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import cairnflow as cf
from cairnflow_postgres import PostgresStore
from cairnflow_postgres.testing import drop_namespace, unique_prefix

# The conformance kit is a separate distribution: its plugin is loaded when it is installed
# (`nox -s conformance-postgres` installs it); test_conformance.py skips without it.
pytest_plugins = (
    ["cairnflow_conformance.plugin"]
    if importlib.util.find_spec("cairnflow_conformance") is not None
    else []
)

ENV = "CAIRNFLOW_TEST_POSTGRES_URL"


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why} ($CI is set: the Postgres tests must run here)", pytrace=False)
    pytest.skip(why)


def _container_class() -> Any:
    """testcontainers' PostgresContainer, from the community package (newer) or the old one."""
    for name in ("testcontainers.community.postgres", "testcontainers.postgres"):
        try:
            return importlib.import_module(name).PostgresContainer
        except (ImportError, AttributeError):
            continue
    return None


@contextlib.contextmanager
def _container() -> Iterator[str | None]:
    """A ``postgres:16`` container's DSN, or None when none can run here."""
    try:
        container_class = _container_class()
        docker: Any = importlib.import_module("docker")
        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception:  # no docker package, or no engine answering
        container_class = None
    if container_class is None:
        yield None
        return
    container = container_class("postgres:16", driver=None)
    container.start()
    try:
        yield str(container.get_connection_url(driver=None))
    finally:
        container.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The test server's DSN (see the module docstring).

    With the conformance kit installed, its ``databases.postgres()`` decides (the same
    variable, container and CI rule); this module's own lookup serves without the kit.
    """
    if importlib.util.find_spec("cairnflow_conformance") is not None:
        from cairnflow_conformance import databases

        with databases.postgres() as url:
            yield url
        return
    url = os.environ.get(ENV)
    if url:
        yield url
        return
    with _container() as started:
        if started is None:
            _unavailable(
                f"{ENV} is not set and no postgres:16 container could be started "
                f"(testcontainers and a Docker engine are needed)"
            )
        assert started is not None
        yield started


@pytest.fixture(scope="session")
def admin_conn(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    """One autocommit connection of the test session, for inspection and cleanup."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


StoreFactory = Callable[..., PostgresStore]


@pytest.fixture
def make_store(postgres_url: str, admin_conn: psycopg.Connection[Any]) -> Iterator[StoreFactory]:
    """Build stores on a private namespace; close them and drop their tables afterwards.

    ``make_store()`` makes a fresh prefix; ``make_store(prefix=p)`` another
    store object on the same tables. ``migrate=False`` leaves it unmigrated.
    """
    made: list[PostgresStore] = []
    namespaces: set[tuple[str, str | None]] = set()

    def factory(
        *, prefix: str | None = None, migrate: bool = True, **options: Any
    ) -> PostgresStore:
        options.setdefault("max_size", 8)
        store = PostgresStore(
            options.pop("dsn", postgres_url), table_prefix=prefix or unique_prefix(), **options
        )
        made.append(store)
        namespaces.add((store.tables.prefix, store.schema))
        if migrate:
            store.migrate()
        return store

    yield factory
    for store in made:
        store.close()
    for prefix, schema in namespaces:
        drop_namespace(admin_conn, prefix, schema)


@pytest.fixture
def store(make_store: StoreFactory) -> PostgresStore:
    """A migrated store on a fresh table prefix."""
    return make_store()


ClientFactory = Callable[..., cf.Client]


@pytest.fixture(scope="session")
def cairnflow_target(postgres_url: str) -> Any:
    """The conformance kit's view of this driver: one table prefix per kit namespace.

    Worker processes build the same store through ``cairnflow_postgres.testing:make_store``;
    ``enqueue_tx`` gets what an application has, a psycopg connection with autocommit off;
    each test's tables are dropped after it.
    """
    from cairnflow_conformance import StoreTarget

    def cleanup(namespace: str) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            drop_namespace(conn, namespace)

    return StoreTarget(
        factory=lambda namespace: PostgresStore(
            postgres_url, table_prefix=namespace, min_size=1, max_size=6
        ),
        worker_factory="cairnflow_postgres.testing:make_store",
        worker_config={"dsn": postgres_url},
        cleanup=cleanup,
        app_connection=lambda namespace: psycopg.connect(postgres_url),
    )


@pytest.fixture
def make_client(make_store: StoreFactory) -> Iterator[ClientFactory]:
    """Build clients with test-friendly timings; they stop before their stores close.

    ``make_client(store, *workflows, start=True, **options)``.
    """
    made: list[cf.Client] = []

    def factory(
        store: PostgresStore, *workflows: cf.Workflow, start: bool = True, **options: Any
    ) -> cf.Client:
        options.setdefault("workers", 4)
        options.setdefault("poll_interval", 0.1)
        options.setdefault("lease", 2.0)
        client = cf.Client(store, **options)
        client.register(*workflows)
        made.append(client)
        if start:
            client.start()
        return client

    yield factory
    for client in made:
        client.stop(timeout=5)
