"""Runs enqueued in SQLAlchemy transactions, on SQLite, Postgres and MariaDB.

Each test checks what the database holds after the commit or the rollback (the run, the
application's row), and when the wake-up was sent, by the count of the notifier the
clients were given: never before the commit, never after a rollback.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from cairnflow_sqlalchemy import begin, dbapi_connection, enqueue
from sqlalchemy.orm import Session, scoped_session, sessionmaker

import cairnflow as cf

from .conftest import Setup

TIMEOUT = 60.0


def test_a_session_commit_keeps_the_run_and_wakes_an_idle_worker(setup: Setup) -> None:
    worker = setup.make_worker()
    with Session(setup.engine) as session:
        session.execute(sa.insert(setup.orders).values(item="book"))
        ref = enqueue(setup.app, session, "sa-ship", {"item": "book"}, key="order-1")
        assert setup.store.get_run(ref.id) is None  # not committed: nobody sees it
        assert setup.notifier.sent == 0
        session.commit()
        assert setup.notifier.sent == 1
    info = worker.wait(ref, timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == {"shipped": {"item": "book"}}
    assert info.key == "order-1"
    assert setup.order_items() == ["book"]


def test_headers_are_kept_with_the_run_and_read_by_its_step(setup: Setup) -> None:
    seen = []

    def stamp(ctx: cf.StepContext, data: object) -> dict[str, str]:
        seen.append(dict(ctx.headers))
        return dict(ctx.headers)

    setup.app.register(cf.Workflow("sa-stamp", steps=[cf.Step("stamp", stamp)]))
    worker = setup.make_worker()
    worker.register(cf.Workflow("sa-stamp", steps=[cf.Step("stamp", stamp)]))
    headers = {"traceparent": "00-abc-def-01", "tenant": "acme"}
    with Session(setup.engine) as session:
        session.execute(sa.insert(setup.orders).values(item="stamp"))
        ref = enqueue(setup.app, session, "sa-stamp", None, headers=headers)
        session.commit()
    stored = setup.store.get_run(ref.id)
    assert stored is not None and dict(stored.headers) == headers
    info = worker.wait(ref, timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == headers and seen == [headers]
    assert dict(info.headers) == headers


def test_a_session_rollback_drops_the_run_and_the_row_and_wakes_nobody(setup: Setup) -> None:
    with Session(setup.engine) as session:
        session.execute(sa.insert(setup.orders).values(item="lamp"))
        ref = enqueue(setup.app, session, "sa-ship", {"item": "lamp"})
        session.rollback()
    assert setup.notifier.sent == 0
    assert setup.store.get_run(ref.id) is None
    assert setup.order_items() == []


def test_an_exception_in_session_begin_rolls_the_run_back(setup: Setup) -> None:
    session_factory = sessionmaker(setup.engine)
    refs = []

    def refused() -> None:
        with session_factory.begin() as session:
            session.execute(sa.insert(setup.orders).values(item="desk"))
            refs.append(enqueue(setup.app, session, "sa-ship", {"item": "desk"}))
            raise RuntimeError("payment refused")

    with pytest.raises(RuntimeError, match="payment refused"):
        refused()
    assert setup.notifier.sent == 0
    assert setup.store.get_run(refs[0].id) is None
    assert setup.order_items() == []


def test_a_held_key_raises_in_the_transaction_which_stays_usable(setup: Setup) -> None:
    held = setup.app.enqueue("sa-ship", {"item": "first"}, key="order-7")
    sent = setup.notifier.sent  # the plain enqueue's own wake-up
    with Session(setup.engine) as session:
        session.execute(sa.insert(setup.orders).values(item="second"))
        with pytest.raises(cf.DuplicateRun, match="order-7"):
            enqueue(setup.app, session, "sa-ship", {"item": "second"}, key="order-7")
        # The application's transaction still works (on Postgres: not left aborted)...
        session.execute(sa.insert(setup.orders).values(item="third"))
        assert sorted(session.scalars(sa.select(setup.orders.c.item))) == ["second", "third"]
        session.rollback()  # ...and rolls back cleanly.
    assert setup.order_items() == []
    assert setup.notifier.sent == sent
    assert setup.store.get_run(held.id) is not None


def test_a_held_key_then_a_commit_keeps_the_rows_and_no_second_run(setup: Setup) -> None:
    held = setup.app.enqueue("sa-ship", {"item": "first"}, key="order-8")
    with Session(setup.engine) as session:
        with pytest.raises(cf.DuplicateRun):
            enqueue(setup.app, session, "sa-ship", {"item": "again"}, key="order-8")
        session.execute(sa.insert(setup.orders).values(item="again"))
        other = enqueue(setup.app, session, "sa-ship", {"item": "other"}, key="order-9")
        session.commit()
    assert setup.order_items() == ["again"]
    assert setup.store.get_run(held.id) is not None
    stored = setup.store.get_run(other.id)
    assert stored is not None
    assert stored.key == "order-9"


def test_a_savepoint_release_does_not_wake_before_the_commit(setup: Setup) -> None:
    worker = setup.make_worker()
    with Session(setup.engine) as session:
        session.execute(sa.insert(setup.orders).values(item="chair"))
        with session.begin_nested():
            ref = enqueue(setup.app, session, "sa-ship", {"item": "chair"})
        assert setup.notifier.sent == 0  # the savepoint was released: nothing committed yet
        assert setup.store.get_run(ref.id) is None
        session.commit()
    assert setup.notifier.sent == 1
    assert worker.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
    assert setup.order_items() == ["chair"]


def test_one_wake_up_per_commit_however_many_runs(setup: Setup) -> None:
    factory = scoped_session(sessionmaker(setup.engine))
    try:
        first = enqueue(setup.app, factory, "sa-ship", 1)
        second = enqueue(setup.app, factory, "sa-ship", 2)
        factory.commit()
        assert setup.notifier.sent == 1
        third = enqueue(setup.app, factory, "sa-ship", 3)  # the same session, a new transaction
        factory.rollback()
        assert setup.notifier.sent == 1
    finally:
        factory.remove()
    assert setup.store.get_run(first.id) is not None
    assert setup.store.get_run(second.id) is not None
    assert setup.store.get_run(third.id) is None


def test_a_core_begin_block_commits_then_wakes(setup: Setup) -> None:
    worker = setup.make_worker()
    with begin(setup.engine) as conn:
        conn.execute(sa.insert(setup.orders).values(item="pen"))
        ref = enqueue(setup.app, conn, "sa-ship", {"item": "pen"})
        assert setup.store.get_run(ref.id) is None
        assert setup.notifier.sent == 0
    assert setup.notifier.sent == 1
    assert worker.wait(ref, timeout=TIMEOUT).result == {"shipped": {"item": "pen"}}
    assert setup.order_items() == ["pen"]


def test_a_core_begin_block_that_raises_rolls_back_and_wakes_nobody(setup: Setup) -> None:
    refs = []

    def refused(conn: sa.Connection) -> None:
        with begin(conn):
            conn.execute(sa.insert(setup.orders).values(item="cup"))
            refs.append(enqueue(setup.app, conn, "sa-ship", {"item": "cup"}))
            raise RuntimeError("out of stock")

    with setup.engine.connect() as conn:
        with pytest.raises(RuntimeError, match="out of stock"):
            refused(conn)
        assert not conn.in_transaction()
    assert setup.notifier.sent == 0
    assert setup.store.get_run(refs[0].id) is None
    assert setup.order_items() == []


def test_a_connection_committed_by_hand_keeps_the_run(setup: Setup) -> None:
    with setup.engine.connect() as conn:
        ref = enqueue(setup.app, conn, "sa-ship", {"item": "ink"})  # begins the transaction
        assert conn.in_transaction()
        conn.execute(sa.insert(setup.orders).values(item="ink"))
        conn.commit()
    assert setup.store.get_run(ref.id) is not None
    assert setup.order_items() == ["ink"]


def test_the_dbapi_connection_is_the_one_under_the_session(setup: Setup) -> None:
    with Session(setup.engine) as session:
        raw = dbapi_connection(session)
        assert raw is session.connection().connection.driver_connection
        ref = setup.app.enqueue_tx(raw, "sa-ship", 5)
        session.commit()
    assert setup.store.get_run(ref.id) is not None


def test_an_engine_is_refused_with_what_to_pass(setup: Setup) -> None:
    with pytest.raises(TypeError, match="not an Engine"):
        enqueue(setup.app, setup.engine, "sa-ship", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Session or Connection"):
        enqueue(setup.app, object(), "sa-ship", 1)  # type: ignore[arg-type]


def test_an_autocommit_engine_is_refused_and_nothing_is_written(setup: Setup) -> None:
    # With AUTOCOMMIT each INSERT would commit on its own, whatever became of the
    # application's work: the driver refuses the connection before writing anything.
    autocommit = setup.engine.execution_options(isolation_level="AUTOCOMMIT")
    with Session(autocommit) as session, pytest.raises(cf.CairnError, match="autocommit"):
        enqueue(setup.app, session, "sa-ship", {"item": "loose"})
    assert setup.app.runs(workflow="sa-ship").runs == ()
