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


POSTGRES_ONLY = {
    "step_history_trigger": "a PL/pgSQL trigger: the reference is portable SQL",
    "step_history_branches": "the same trigger, redefined",
    "lifecycle": "the outbox's PL/pgSQL triggers",
    "runs_overdue": "an index only (RUN_TIMEOUT reads run_at either way)",
    "forced_ready": "an index only (the claim's queue gate reads forced either way)",
    "lifecycle_run_probe": "the outbox's run trigger, redefined",
    "lifecycle_run_once": "the outbox's run trigger, redefined",
    "step_history_trim": "the step history's trigger, redefined",
    "byte_order": "every text column in the C collation: the renderer's choice of its text type",
}
"""The Postgres driver's migrations the reference schema leaves out, and why."""


def _name(label: str) -> str:
    """A migration's name without its number: the reference and a driver number apart."""
    return label.split("_", 1)[1]


def test_the_reference_schema_is_the_postgres_drivers() -> None:
    # Each reference migration is the Postgres driver's of the same name, statement for
    # statement, in the same order; what the driver adds beside them is named above.
    pytest.importorskip("cairnflow_postgres", reason="cairnflow-postgres is not installed")
    theirs = {_name(m.label): m for m in load_migrations("cairnflow_postgres")}
    ours = reference_migrations("postgres")
    assert [_name(m.label) for m in ours] == [n for n in theirs if n not in POSTGRES_ONLY]
    assert set(POSTGRES_ONLY) <= set(theirs)
    for reference in ours:
        postgres = theirs[_name(reference.label)]
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
