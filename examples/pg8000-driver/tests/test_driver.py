"""The driver's own checks: its URL, its errors, and its migration against the reference."""

from __future__ import annotations

import re

import pg8000.dbapi
import pytest

from cairnflow import CairnError, Unavailable
from cairnflow.sql import load_migrations, split_statements
from cairnflow.sql.reference import reference_migrations
from cairnflow_pg8000 import Pg8000Store, classify, connect_arguments


def _statements(sql: str) -> list[str]:
    """The statements of ``sql`` without comments, whitespace collapsed."""
    return [
        re.sub(r"\s+", " ", re.sub(r"--[^\n]*", "", statement)).strip()
        for statement in split_statements(sql)
    ]


def test_the_migrations_are_the_reference_schema() -> None:
    shipped = load_migrations("cairnflow_pg8000")
    assert [(m.label, m.text) for m in shipped] == [
        (m.label, m.text) for m in reference_migrations("postgres")
    ]


def test_the_reference_schema_is_the_postgres_drivers() -> None:
    pytest.importorskip("cairnflow_postgres", reason="cairnflow-postgres is not installed")
    theirs = load_migrations("cairnflow_postgres")
    ours = reference_migrations("postgres")
    assert [m.label for m in ours] == [m.label for m in theirs][: len(ours)]
    for reference, postgres in zip(ours, theirs, strict=False):
        assert _statements(reference.text) == _statements(postgres.text), reference.label


def test_a_url_becomes_connect_arguments() -> None:
    assert connect_arguments("pg8000://app:s%40cret@db.internal:6543/jobs?timeout=5") == {
        "user": "app",
        "password": "s@cret",
        "host": "db.internal",
        "port": 6543,
        "database": "jobs",
        "timeout": 5.0,
    }
    with pytest.raises(CairnError, match="not a pg8000:// URL"):
        connect_arguments("postgresql://app@db/jobs")


def test_a_server_that_does_not_answer_is_unavailable() -> None:
    # Port 9 on 127.0.0.1: nothing listens, the connection is refused at once.
    store = Pg8000Store("pg8000://nobody@127.0.0.1:9/none?timeout=2", max_size=1)
    try:
        with pytest.raises(Unavailable):
            store.check_schema()
    finally:
        store.close()


def test_errors_are_sorted_by_sqlstate_and_network_errors_are_unavailable() -> None:
    unique = pg8000.dbapi.DatabaseError({"C": "23505", "M": "duplicate key"})
    deadlock = pg8000.dbapi.DatabaseError({"C": "40P01", "M": "deadlock detected"})
    assert classify(unique).unique_violation
    assert classify(deadlock).retryable
    assert classify(pg8000.dbapi.InterfaceError("network error")).unavailable
