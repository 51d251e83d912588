"""A claim and an outcome batch cut at their worst moments: nothing lost, nothing written twice.

On Postgres a claim is one round trip: ``BEGIN``, the claim and ``COMMIT`` go out
together, sent as statements on a connection put in autocommit for the
transaction (``PostgresDialect.transaction``). An outcome batch is two: its first
pipeline (the locking read and the successes) carries an explicit ``BEGIN``, its
last the ``COMMIT`` (``PostgresDialect.transaction``, ``commit_in_pipeline``).
The moments that can hurt them:

* the server has begun the transaction and not committed it when the connection
  dies: it must roll back whole (no attempt counted, no outcome, nothing
  recorded), the pool must lend no connection left in autocommit or in a
  transaction, and the work is sent again at once on a new connection. A claim
  is sent again though its ``COMMIT`` was already on its way (a claim may be
  repeated either way); an outcome batch whose ``COMMIT`` was not sent yet too;
* a claim's ``COMMIT`` went through and its answer never came back: the client
  cannot tell, so it runs nothing; the step is held by a lease no worker renews,
  and is taken back after it, run, and finished once.

The first is made real: the transaction is held inside the server by a lock
(the namespace's pauses table, which every claim reads; the run's row, which an
outcome batch locks), found waiting there, and its backend terminated. The
second is the fault point ``sql.after_commit``, armed for that one claim only:
the store raises ``Unavailable`` after a landed ``COMMIT``, as a connection lost
during it would.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

import cairnflow as cf
from cairnflow.store import ClaimRequest, Succeeded
from cairnflow.testing import faults, wait_until
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]


def _one_step() -> cf.Workflow:
    return cf.Workflow("claimed", steps=[cf.Step("only", lambda ctx, data: ctx.attempt)])


def _request(lease_until: int | None = None) -> ClaimRequest:
    now = time.time_ns()
    return ClaimRequest(
        workflows=frozenset({"claimed"}),
        limit=4,
        now=now,
        lease_until=now + 60_000_000_000 if lease_until is None else lease_until,
        node_id="cut-node",
    )


def _the_step(store: PostgresStore, run: cf.RunRef) -> Any:
    stored = store.get_run(run.id)
    assert stored is not None
    (step,) = stored.steps
    return step


def _pool_is_clean(store: PostgresStore) -> None:
    """The connections the pools lend next (the store's, the claims'): not in autocommit,
    no transaction open."""
    pools = [store.pool] + ([store.claims_pool] if store.claims_pool is not None else [])
    for pool in pools:
        with pool.connection() as conn:
            assert not conn.autocommit
            assert conn.info.transaction_status == TransactionStatus.IDLE


def _events(store: PostgresStore, run: cf.RunRef) -> list[tuple[str, int]]:
    return [(e.event, e.attempt) for e in store.step_history(run.id)]


Named = tuple[str, PostgresStore, cf.Client]


@pytest.fixture
def named(postgres_url: str, make_store: StoreFactory, make_client: ClientFactory) -> Named:
    """A store of one connection whose backends are found by an application_name of their
    own (never another test's), and a client on it that enqueues."""
    name = f"cf_cut_{secrets.token_hex(4)}"
    store = make_store(dsn=f"{postgres_url}?application_name={name}", max_size=1)
    return name, store, make_client(store, _one_step(), start=False, notifier=False)


def _cut_inside_the_server(
    postgres_url: str,
    admin: psycopg.Connection[Any],
    name: str,
    lock: tuple[str, tuple[Any, ...]],
    action: Callable[[], object],
) -> object:
    """Run ``action`` (on the store whose connections are named ``name``) while ``lock`` holds
    it inside the server; terminate its backend there, wait until it waits again (the work
    sent again on a new connection), let it through. What ``action`` returned, or raised."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(action())
        except Exception as error:
            outcome.append(error)

    def waiting() -> list[int]:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock'",
            (name,),
        ).fetchall()
        return [int(pid) for (pid,) in rows]

    with psycopg.connect(postgres_url) as locker:
        locker.execute(*lock)
        worker = threading.Thread(target=run)
        worker.start()
        wait_until(lambda: bool(waiting()), timeout=30, what="the transaction to wait")
        (killed,) = waiting()
        admin.execute("SELECT pg_terminate_backend(%s)", (killed,))
        wait_until(
            lambda: bool(waiting()) and killed not in waiting(),
            timeout=30,
            what="the transaction to be sent again",
        )
        locker.rollback()
    worker.join(30)
    assert not worker.is_alive()
    (result,) = outcome
    return result


def test_a_claim_killed_inside_the_server_rolls_back_whole_and_is_sent_again(
    postgres_url: str, admin_conn: psycopg.Connection[Any], named: Named
) -> None:
    name, store, enqueuer = named
    run = enqueuer.enqueue("claimed", None)
    retries = store.stats.snapshot()["retries"]
    # Every claim reads the pauses table: locked, it holds the claim inside the server.
    # BEGIN ran and the claim is under way, its COMMIT already sent behind it: the worst
    # moment. The backend ends without committing; the client cannot tell, and sends the
    # claim again at once on a new connection (a claim is repeatable).
    lock = (f"LOCK TABLE {store.tables.pauses} IN ACCESS EXCLUSIVE MODE", ())
    claimed = _cut_inside_the_server(
        postgres_url, admin_conn, name, lock, lambda: store.claim(_request())
    )
    assert isinstance(claimed, list), claimed
    (attempt,) = claimed
    # The killed claim counted nothing: the one that landed is attempt 1, recorded once.
    assert attempt.attempt == 1
    assert store.stats.snapshot()["retries"] > retries
    step = _the_step(store, run)
    assert (step.status, step.attempt) == (cf.StepStatus.RUNNING, 1)
    assert _events(store, run) == [("claimed", 1)]
    _pool_is_clean(store)
    assert store.finish(attempt.token, Succeeded(b"1"), time.time_ns()).applied
    assert _events(store, run) == [("claimed", 1), ("succeeded", 1)]


def test_a_claim_whose_commit_landed_unanswered_is_taken_back_after_its_lease(
    make_store: StoreFactory, make_client: ClientFactory
) -> None:
    store = make_store(max_size=1)
    enqueuer = make_client(store, _one_step(), start=False, notifier=False)
    run = enqueuer.enqueue("claimed", None)
    # A lease already over by the time anyone looks: no waiting on the clock for it.
    with faults("sql.after_commit=raise#1") as armed:
        with pytest.raises(cf.Unavailable):
            store.claim(_request(lease_until=time.time_ns()))
        assert armed.fired("sql.after_commit") == 1
    step = _the_step(store, run)
    assert (step.status, step.attempt, step.node) == (cf.StepStatus.RUNNING, 1, "cut-node")
    _pool_is_clean(store)
    worker = make_client(store, _one_step(), notifier=False, workers=1)
    info = worker.wait(run, timeout=60)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == 2  # the second attempt ran; the first claim's never did
    assert _events(store, run) == [
        ("claimed", 1),
        ("reclaimed", 1),
        ("claimed", 2),
        ("succeeded", 2),
    ]


def test_a_claim_alone_failing_before_it_is_sent_leases_nothing(
    make_store: StoreFactory, make_client: ClientFactory
) -> None:
    # The common claim goes alone (one statement in autocommit, on the claims pool): its
    # fault point claim.before_commit is before the statement is sent. A failure there
    # leases nothing and leaves no connection in autocommit; the next claim takes the step.
    store = make_store(max_size=1)
    enqueuer = make_client(store, _one_step(), start=False, notifier=False)
    run = enqueuer.enqueue("claimed", None)
    with faults("claim.before_commit=raise#1") as armed:
        with pytest.raises(cf.Unavailable):
            store.claim(_request())
        assert armed.fired("claim.before_commit") == 1
    step = _the_step(store, run)
    assert (step.status, step.attempt) == (cf.StepStatus.READY, 0)
    _pool_is_clean(store)
    (attempt,) = store.claim(_request())
    assert attempt.attempt == 1
    assert _events(store, run) == [("claimed", 1)]


def test_an_outcome_batch_killed_inside_the_server_rolls_back_whole_and_is_sent_again(
    postgres_url: str, admin_conn: psycopg.Connection[Any], named: Named
) -> None:
    name, store, enqueuer = named
    runs = [enqueuer.enqueue("claimed", None) for _ in range(3)]
    held = store.claim(_request())
    assert len(held) == 3
    retries = store.stats.snapshot()["retries"]
    done = [(attempt.token, Succeeded(b"1")) for attempt in held]
    # The batch's first pipeline (its BEGIN, the read that locks the runs, the successes)
    # waits for this run's row; its COMMIT is not sent yet.
    lock = (f"SELECT 1 FROM {store.tables.runs} WHERE id = %s FOR UPDATE", (runs[1].id,))
    results = _cut_inside_the_server(
        postgres_url, admin_conn, name, lock, lambda: store.finish_many(done, time.time_ns())
    )
    assert isinstance(results, list), results
    assert [result.applied for result in results] == [True, True, True]
    assert store.stats.snapshot()["retries"] > retries
    for run in runs:
        # Written once: the killed batch left nothing, the one sent again everything.
        assert _events(store, run) == [("claimed", 1), ("succeeded", 1)]
        assert enqueuer.info(run).status is cf.Status.SUCCEEDED
    _pool_is_clean(store)
