"""The driver's own checks: its URL, its errors, and its migration against the reference."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pg8000.dbapi
import pytest

import cairnflow as cf
from cairnflow import CairnError, Unavailable
from cairnflow.sql import load_migrations, split_statements
from cairnflow.sql.reference import TYPES, reference_migrations
from cairnflow.store import RunQuery
from cairnflow_pg8000 import Pg8000Store, classify, connect_arguments
from cairnflow_pg8000.testing import drop_namespace


def _statements(sql: str) -> list[str]:
    """The statements of ``sql`` without comments, whitespace collapsed."""
    return [
        re.sub(r"\s+", " ", re.sub(r"--[^\n]*", "", statement)).strip()
        for statement in split_statements(sql)
    ]


def _name(label: str) -> str:
    """A migration's name without its number: the reference and a driver number apart."""
    return label.split("_", 1)[1]


PG8000_ONLY = {
    "byte_order": "every text column in the C collation, as the kit's README asks of a driver "
    "whose engine gives text a collation (cairnflow-postgres's 027)",
}
"""This driver's own migrations, beside those rendered from the reference schema."""


def test_the_migrations_are_the_reference_schema_and_the_drivers_own() -> None:
    # By name, not number: a driver numbers its own migrations among the reference's, so the
    # next reference version is rendered after the last file shipped.
    shipped = load_migrations("cairnflow_pg8000")
    assert [(_name(m.label), m.text) for m in shipped if _name(m.label) not in PG8000_ONLY] == [
        (_name(m.label), m.text) for m in reference_migrations("postgres")
    ]
    assert {_name(m.label) for m in shipped} >= set(PG8000_ONLY)


POSTGRES_ONLY = {
    "step_history_trigger": "a PL/pgSQL trigger: the reference is portable SQL",
    "step_history_branches": "the same trigger, redefined",
    "lifecycle": "the outbox's PL/pgSQL triggers",
    "runs_overdue": "an index only (RUN_TIMEOUT reads run_at either way)",
    "forced_ready": "an index only (the claim's queue gate reads forced either way)",
    "lifecycle_run_probe": "the outbox's run trigger, redefined",
    "lifecycle_run_once": "the outbox's run trigger, redefined",
    "step_history_trim": "the step history's trigger, redefined",
    "byte_order": "every text column in the C collation: a driver's own migration (this one's 019)",
}
"""The Postgres driver's migrations the reference schema leaves out, and why."""


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


@pytest.fixture
def namespace(pg8000_url: str) -> Iterator[str]:
    """A table prefix of its own on the test server, dropped after the test."""
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    yield prefix
    drop_namespace(prefix, url=pg8000_url)


def _collations(url: str, prefix: str) -> dict[tuple[str, str], str]:
    """Each text column of ``prefix``'s tables, by (table without prefix, column): its collation."""
    conn = pg8000.dbapi.connect(**connect_arguments(url))
    try:
        cursor = conn.cursor()
        cursor.execute(
            "SELECT t.relname, a.attname, coalesce(c.collname, '') "
            "FROM pg_class t JOIN pg_attribute a ON a.attrelid = t.oid "
            "LEFT JOIN pg_collation c ON c.oid = a.attcollation "
            "WHERE t.relnamespace = current_schema()::regnamespace AND t.relkind = 'r' "
            "AND left(t.relname, length(%s)) = %s AND a.attnum > 0 AND NOT a.attisdropped "
            "AND a.atttypid IN ('text'::regtype, 'varchar'::regtype)",
            (prefix, prefix),
        )
        rows = cursor.fetchall()
    finally:
        conn.close()
    return {(table.removeprefix(prefix), column): collation for table, column, collation in rows}


def test_every_text_column_compares_byte_for_byte(pg8000_url: str, namespace: str) -> None:
    """Every text column but the migrations ledger's is ``COLLATE "C"`` (019): the SQL layer
    locks rows in Python's ``sorted()`` order, which is code point order, and under a locale's
    collation the database's own order (a keyed claim's) could differ from it."""
    store = Pg8000Store(pg8000_url, table_prefix=namespace, max_size=1)
    try:
        store.migrate()
    finally:
        store.close()
    columns = _collations(pg8000_url, namespace)
    assert columns.pop(("migrations", "name")) == "default"
    assert {("runs", "id"), ("steps", "status"), ("pauses", "name"), ("ticks", "node")} <= set(
        columns
    )
    assert {where: c for where, c in columns.items() if c != "C"} == {}


def test_a_driver_rendered_with_a_binary_text_type_needs_no_migration_of_its_own(
    pg8000_url: str, namespace: str
) -> None:
    """The kit's README's other way: the reference rendered with ``TEXT COLLATE "C"`` as its
    text type gives the same columns from the first migration."""
    store = Pg8000Store(pg8000_url, table_prefix=namespace, max_size=1)
    try:
        store.migrations = reference_migrations({**TYPES["postgres"], "text": 'TEXT COLLATE "C"'})
        store.migrate()
    finally:
        store.close()
    columns = _collations(pg8000_url, namespace)
    assert columns.pop(("migrations", "name")) == "default"
    assert {where: c for where, c in columns.items() if c != "C"} == {}


def test_runs_made_before_019_are_kept_and_run_after_it(pg8000_url: str, namespace: str) -> None:
    """019 rebuilds the indexes of the key columns: what was enqueued before it keeps its
    key, labels and tenant, and runs."""
    simple = cf.Workflow("simple")

    @simple.step()
    def only(ctx: cf.StepContext, n: int) -> int:
        return n

    old = Pg8000Store(pg8000_url, table_prefix=namespace, max_size=2)
    new = Pg8000Store(pg8000_url, table_prefix=namespace, max_size=4)
    try:
        old.migrations = old.migrations[:18]
        old.migrate()
        before = cf.Client(old)
        before.register(simple)
        keyed = before.enqueue("simple", 1, key="k1", labels={"team": "Zeta"}, tenant="acme")
        plain = before.enqueue_many([cf.Job("simple", n) for n in range(2, 5)])
        assert new.migrate() == ["019_byte_order"]
        after = cf.Client(new, workers=2, poll_interval=0.1)
        after.register(simple)
        # Before the client starts, while the keyed run is unfinished: the key's unique
        # index, rebuilt, still holds it (a finished run gives its key up).
        with pytest.raises(cf.DuplicateRun):
            after.enqueue("simple", 9, key="k1")
        with after:
            for ref in (keyed, *plain):
                assert after.wait(ref, timeout=30).status == "succeeded"
        found = new.list_runs(RunQuery(tenant="acme", labels={"team": "Zeta"}))
        assert [run.id for run in found.runs] == [keyed.id]
    finally:
        old.close()
        new.close()


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
