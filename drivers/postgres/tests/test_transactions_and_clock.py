"""Enqueueing inside the application's transaction, and the server's clock as the one "now"."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import cairnflow as cf
from cairnflow import clock as clock_module
from cairnflow.store import ClaimRequest
from cairnflow.testing import wait_until
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]
HOUR_NS = 3600 * 10**9


def stamp() -> cf.Workflow:
    wf = cf.Workflow("stamp")
    wf.step(lambda ctx, d: time.time_ns(), name="now")
    return wf


@pytest.fixture
def app(
    postgres_url: str, admin_conn: psycopg.Connection[Any]
) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """The application: its own connection (autocommit off) and a table of its own."""
    table = f"app_orders_{time.monotonic_ns()}"
    admin_conn.execute(f'CREATE TABLE "{table}" (id TEXT PRIMARY KEY)')
    conn = psycopg.connect(postgres_url)
    try:
        yield conn, table
    finally:
        conn.close()
        admin_conn.execute(f'DROP TABLE "{table}"')


def orders(admin_conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [r[0] for r in admin_conn.execute(f'SELECT id FROM "{table}" ORDER BY id')]


# -- transactional enqueue ------------------------------------------------------------------------
def test_a_run_commits_with_the_applications_writes(
    store: PostgresStore,
    make_client: ClientFactory,
    app: tuple[psycopg.Connection[Any], str],
    admin_conn: psycopg.Connection[Any],
) -> None:
    conn, table = app
    # No notifier and a 30 s poll: only wake() can start the run in time.
    client = make_client(store, stamp(), poll_interval=30, notifier=False)
    conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("A-1",))
    ref = client.enqueue_tx(conn, "stamp", {"order": "A-1"})
    # Before the commit nobody else sees the run, and nothing claims it.
    assert store.get_run(ref.id) is None
    client.wake()
    time.sleep(0.3)
    assert store.get_run(ref.id) is None
    conn.commit()
    committed = time.time_ns()
    client.wake()
    started = client.result(ref, timeout=5)
    assert (started - committed) / 1e9 < 1.0
    assert orders(admin_conn, table) == ["A-1"]


def test_a_rollback_takes_the_run_with_it(
    store: PostgresStore,
    make_client: ClientFactory,
    app: tuple[psycopg.Connection[Any], str],
    admin_conn: psycopg.Connection[Any],
) -> None:
    conn, table = app
    client = make_client(store, stamp())
    conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("A-2",))
    ref = client.enqueue_tx(conn, "stamp", key="A-2")
    conn.rollback()
    client.wake()
    time.sleep(0.3)
    assert store.get_run(ref.id) is None
    assert client.runs().runs == ()
    assert orders(admin_conn, table) == []
    # The key was never held: it can be used at once.
    assert client.result(client.enqueue("stamp", key="A-2"), timeout=5)


def test_a_duplicate_key_leaves_the_applications_transaction_usable(
    store: PostgresStore,
    make_client: ClientFactory,
    app: tuple[psycopg.Connection[Any], str],
    admin_conn: psycopg.Connection[Any],
) -> None:
    conn, table = app
    client = make_client(store, stamp(), start=False)
    held = client.enqueue("stamp", key="B-1")
    conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("B-1",))
    with pytest.raises(cf.DuplicateRun) as caught:
        client.enqueue_tx(conn, "stamp", key="B-1")
    assert caught.value.run_id == held.id
    # The savepoint rolled back only the enqueue: the application's write still commits.
    conn.execute(f'INSERT INTO "{table}" VALUES (%s)', ("B-2",))
    ref = client.enqueue_tx(conn, "stamp", key="B-2")
    conn.commit()
    assert orders(admin_conn, table) == ["B-1", "B-2"]
    assert store.get_run(ref.id) is not None


def test_autocommit_connections_need_a_transaction_block(
    store: PostgresStore,
    make_client: ClientFactory,
    postgres_url: str,
) -> None:
    client = make_client(store, stamp(), start=False)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(cf.CairnError, match=r"conn\.transaction\(\)"):
            client.enqueue_tx(conn, "stamp")
        with conn.transaction() as tx:
            by_tx = client.enqueue_tx(tx, "stamp")
            with conn.cursor() as cursor:
                by_cursor = client.enqueue_tx(cursor, "stamp")
        assert store.get_run(by_tx.id) is not None
        assert store.get_run(by_cursor.id) is not None
        # A transaction block that fails takes its runs with it.
        enqueued: list[cf.RunRef] = []

        def fail_after_enqueueing() -> None:
            with conn.transaction():
                enqueued.append(client.enqueue_tx(conn, "stamp"))
                raise ZeroDivisionError

        with pytest.raises(ZeroDivisionError):
            fail_after_enqueueing()
        assert store.get_run(enqueued[0].id) is None


def test_an_aborted_transaction_and_foreign_objects_are_refused(
    store: PostgresStore, make_client: ClientFactory, app: tuple[psycopg.Connection[Any], str]
) -> None:
    conn, _table = app
    client = make_client(store, stamp(), start=False)
    with pytest.raises(psycopg.errors.DivisionByZero):
        conn.execute("SELECT 1/0")
    with pytest.raises(cf.CairnError, match="aborted"):
        client.enqueue_tx(conn, "stamp")
    conn.rollback()
    with pytest.raises(TypeError, match=r"psycopg\.Connection"):
        client.enqueue_tx(object(), "stamp")


def test_the_notify_of_an_enqueue_tx_is_sent_at_commit_only(
    store: PostgresStore,
    make_client: ClientFactory,
    app: tuple[psycopg.Connection[Any], str],
    postgres_url: str,
) -> None:
    conn, _table = app
    client = make_client(store, stamp(), start=False)
    with psycopg.connect(postgres_url, autocommit=True) as listener:
        listener.execute(f'LISTEN "{store.channel}"')
        client.enqueue_tx(conn, "stamp")
        client.enqueue_tx(conn, "stamp")
        assert list(listener.notifies(timeout=0.3)) == []  # not before the commit
        conn.commit()
        # Postgres folds the transaction's identical NOTIFYs into one.
        assert len(list(listener.notifies(timeout=0.5))) == 1
        client.enqueue_tx(conn, "stamp")
        conn.rollback()
        assert list(listener.notifies(timeout=0.3)) == []  # never after a rollback


# -- the database clock ------------------------------------------------------------------------
class _SkewedTime:
    """The ``time`` module of a machine whose wall clock is an hour behind."""

    def __init__(self, skew_ns: int) -> None:
        self._skew = skew_ns

    def time_ns(self) -> int:
        return time.time_ns() + self._skew

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_the_servers_clock_is_the_one_now(
    store: PostgresStore,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
    admin_conn: psycopg.Connection[Any],
) -> None:
    server = store.database_now()
    row = admin_conn.execute(
        "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint * 1000"
    ).fetchone()
    assert row is not None and abs(row[0] - server) < 5 * 10**9
    assert server % 1000 == 0  # microseconds, as nanoseconds
    # This machine's wall clock is now an hour behind the server's.
    monkeypatch.setattr(clock_module, "time", _SkewedTime(-HOUR_NS))
    skewed = make_client(store, stamp(), start=False)
    aligned = make_client(store, stamp(), database_clock=True, start=False)
    first = skewed.enqueue("stamp")
    second = aligned.enqueue("stamp")
    server = store.database_now()
    created = {ref.id: skewed.info(ref).created_at_ns for ref in (first, second)}
    assert abs(created[first.id] - (server - HOUR_NS)) < 5 * 10**9  # the local clock's "now"
    assert abs(created[second.id] - server) < 5 * 10**9  # the server's "now"
    clock = aligned._state.clock
    assert isinstance(clock, clock_module.DatabaseClock)
    assert abs(clock.offset_ns - HOUR_NS) < 5 * 10**9


class _LaggingClock:
    """A clock an hour behind this machine's."""

    def now_ns(self) -> int:
        return time.time_ns() - HOUR_NS


@pytest.mark.parametrize("database_clock", [True, False], ids=["database-clock", "local-clocks"])
def test_a_node_whose_clock_lags_keeps_its_leases_only_on_the_database_clock(
    database_clock: bool,
    store: PostgresStore,
    make_client: ClientFactory,
    make_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def slow() -> cf.Workflow:
        wf = cf.Workflow("slow")
        wf.step(lambda ctx, d: time.sleep(1.5) or ctx.node_id, name="work")
        return wf

    # Node "late" runs an hour behind. On its own clock every lease it writes has ended an
    # hour ago for the others; on the database's clock nothing is off.
    if database_clock:
        monkeypatch.setattr(clock_module, "time", _SkewedTime(-HOUR_NS))  # for the whole test
        late_clocks: dict[str, Any] = {"database_clock": True}
        watcher_clocks: dict[str, Any] = {"database_clock": True}
    else:
        late_clocks = {"clock": _LaggingClock(), "lease_clock": _LaggingClock()}
        watcher_clocks = {}
    late = make_client(
        store, slow(), node_id="late", workers=2, lease=1.0, poll_interval=0.1, **late_clocks
    )
    refs = [late.enqueue("slow") for _ in range(2)]
    wait_until(
        lambda: all(late.info(r).steps["work"].status == cf.StepStatus.RUNNING for r in refs),
        timeout=5,
        what="node late to run both steps",
    )
    # A node on the right time, looking for expired leases every 50 ms.
    make_client(
        make_store(prefix=store.tables.prefix, migrate=False),
        slow(),
        node_id="watcher",
        workers=2,
        lease=1.0,
        poll_interval=0.05,
        **watcher_clocks,
    )
    infos = [late.wait(r, timeout=15) for r in refs]
    reclaims = [i.steps["work"].reclaims for i in infos]
    if database_clock:
        assert [i.result for i in infos] == ["late", "late"]
        assert reclaims == [0, 0]
    else:
        assert sum(reclaims) >= 1  # what the database clock prevents


def test_lease_skew_makes_other_nodes_wait_past_the_leases_end(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    # A worker that died holding a step: claimed with a one-second lease, never renewed.
    make_client(store, stamp(), start=False).enqueue("stamp")
    now = store.database_now()
    [held] = store.claim(
        ClaimRequest(
            workflows=frozenset({"stamp"}),
            limit=1,
            now=now,
            lease_until=now + 10**9,
            node_id="dead",
        )
    )
    lease_ends = now + 10**9
    patient = make_client(
        store, stamp(), database_clock=True, lease_skew=2.0, poll_interval=0.05, node_id="patient"
    )
    wait_until(
        lambda: store.get_run(held.run_id).steps[0].reclaims == 1,  # type: ignore[union-attr]
        timeout=10,
        what="the step to be taken over",
    )
    taken = store.database_now()
    waited = (taken - lease_ends) / 1e9
    assert 2.0 <= waited < 3.5, waited  # the lease, plus the skew, on the server's clock
    assert patient.wait(held.run_id, timeout=5).status is cf.Status.SUCCEEDED


def test_the_database_clock_needs_no_local_clock(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    with pytest.raises(ValueError, match="database_clock replaces clock"):
        cf.Client(store, database_clock=True, clock=clock_module.Real())
    client = make_client(store, stamp(), database_clock=5.0)
    assert client.result(client.enqueue("stamp"), timeout=5)
