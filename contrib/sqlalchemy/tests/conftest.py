"""Fixtures: a store and a SQLAlchemy engine on the same database, for each of the three engines.

SQLite is a file of the test's own; Postgres and MariaDB are the servers named by
``CAIRNFLOW_TEST_POSTGRES_URL`` and ``CAIRNFLOW_TEST_MARIADB_URL``. Without one of
them its tests are skipped, saying why, unless ``$CI`` is set: then they fail, since a
CI run that skips its database proves nothing. Every test works on its own table
prefix (the store's tables and the application's table) and drops them afterwards.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import cairnflow as cf
from cairnflow.testing import CountingNotifier

ENV = {"postgres": "CAIRNFLOW_TEST_POSTGRES_URL", "mariadb": "CAIRNFLOW_TEST_MARIADB_URL"}
SQLALCHEMY_SCHEME = {"postgres": "postgresql+psycopg", "mariadb": "mysql+pymysql"}


def ship() -> cf.Workflow:
    return cf.Workflow("sa-ship", steps=[cf.Step("ship", lambda ctx, data: {"shipped": data})])


@dataclass
class Setup:
    """One database: the store, the application's engine and table, and the clients."""

    name: str
    store: Any
    engine: sa.Engine
    orders: sa.Table
    notifier: CountingNotifier
    app: cf.Client
    """A client that is never started, as a web application's: it enqueues and wakes."""
    make_worker: Callable[[], cf.Client]

    def order_items(self) -> list[str]:
        with self.engine.connect() as conn:
            return [row.item for row in conn.execute(sa.select(self.orders.c.item))]


def _urls(name: str, tmp_path: Path) -> tuple[str, str]:
    """The store's URL and SQLAlchemy's for database ``name``."""
    if name == "sqlite":
        path = tmp_path / "app.db"
        return f"sqlite:///{path}", f"sqlite:///{path}"
    url = os.environ.get(ENV[name])
    if not url:
        why = f"{ENV[name]} is not set"
        if os.environ.get("CI"):
            pytest.fail(f"{why} ($CI is set: the {name} tests must run here)", pytrace=False)
        pytest.skip(why)
    rest = url.split("://", 1)[1]
    alchemy = f"{SQLALCHEMY_SCHEME[name]}://{rest}"
    if name == "mariadb":
        alchemy += ("&" if "?" in rest else "?") + "charset=utf8mb4"
    return url, alchemy


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    name: str = request.param
    store_url, alchemy_url = _urls(name, tmp_path)
    prefix = f"sa{secrets.token_hex(4)}_"
    store = cf.open_store(store_url, table_prefix=prefix)
    store.migrate()
    engine = sa.create_engine(alchemy_url)
    metadata = sa.MetaData()
    orders = sa.Table(
        f"{prefix}orders",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("item", sa.String(50), nullable=False),
    )
    metadata.create_all(engine)
    notifier = CountingNotifier()
    clients: list[cf.Client] = []

    def make_worker() -> cf.Client:
        # Polls once when it starts, then only every 10 minutes: a run it finishes within a
        # test's timeout was started by a wake-up.
        worker = cf.Client(store, poll_interval=600, notifier=notifier.inner)
        worker.register(ship())
        clients.append(worker)
        worker.start()
        return worker

    app = cf.Client(store, notifier=notifier)
    app.register(ship())
    try:
        yield Setup(name, store, engine, orders, notifier, app, make_worker)
    finally:
        for client in clients:
            client.stop()
        metadata.drop_all(engine)
        engine.dispose()
        store.drop_tables()
        store.close()
