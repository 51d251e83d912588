"""What the kit does not cover: discovery, URLs, prefixes and versions."""

from __future__ import annotations

import importlib.metadata
import sqlite3

import pytest
from cairnflow_litestore import LATEST_SCHEMA, LiteStore, __version__

import cairnflow as cf
from cairnflow.drivers import load_drivers


def test_the_entry_point_registers_the_scheme() -> None:
    driver = load_drivers(reload=True)["litestore"]
    assert driver.store_class is LiteStore
    assert driver.distribution == "cairnflow-litestore"
    assert driver.capabilities == LiteStore.capabilities


def test_the_version_matches_the_distribution() -> None:
    assert __version__ == importlib.metadata.version("cairnflow-litestore")


def test_urls_and_prefixes_are_checked(db_url: str) -> None:
    with pytest.raises(ValueError, match="litestore:///path"):
        LiteStore.from_url("litestore://")
    with pytest.raises(ValueError, match="needs a file"):
        LiteStore.from_url("litestore://:memory:")
    with pytest.raises(cf.InvalidName, match="table_prefix"):
        cf.open_store(db_url, table_prefix='x"; DROP TABLE y; --')


def test_prefixes_keep_stores_apart_in_one_file(db_url: str) -> None:
    wf = cf.Workflow("apart", steps=[cf.Step("a", lambda c, d: d)])
    one = cf.open_store(db_url, table_prefix="one_")
    two = cf.open_store(db_url, table_prefix="two_")
    try:
        assert one.migrate() == [str(LATEST_SCHEMA)]
        two.migrate()
        client = cf.Client(one)
        client.register(wf)
        ref = client.enqueue("apart", 1)
        assert one.get_run(ref.id) is not None
        assert two.get_run(ref.id) is None
    finally:
        one.close()
        two.close()


def test_a_newer_schema_is_refused(db_url: str) -> None:
    store = cf.open_store(db_url)
    try:
        store.migrate()
        path = db_url.removeprefix("litestore://")
        with sqlite3.connect(path) as db:
            db.execute("UPDATE lite_meta SET value = '99' WHERE name = 'schema'")
        with pytest.raises(cf.SchemaTooNew, match="schema 99"):
            store.check_schema()
    finally:
        store.close()
