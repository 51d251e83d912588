"""How many round trips an enqueue and a claim take, read from libpq's trace of the protocol.

An enqueue sends BEGIN, the run rows, their steps, their labels and COMMIT
together in pipeline mode, and waits once, at the pipeline's closing sync: one
round trip for one run or a batch (PostgresDialect.transaction, whose first
pipeline carries the BEGIN; three through psycopg's own transaction, which
syncs after its BEGIN and again after its COMMIT). A claim of one queue is
sent the same way: one round trip, which an idle worker waits out between a
run's NOTIFY and its start. Counted, never timed: a change that adds a round
trip fails here instead of showing up as noise in a benchmark.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import Trace, TransactionStatus
from psycopg_pool import ConnectionPool

import cairnflow as cf
from cairnflow.sql import StatementLimit
from cairnflow.store import ClaimedAttempt, ClaimRequest, QueueClaim, Succeeded
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)

ROUND_TRIPS = 1
"""BEGIN, the inserts and the COMMIT, then the pipeline's closing sync (see the docstring)."""


def _round_trips(store: PostgresStore, trace: Path, action: Callable[[], object]) -> int:
    """Run ``action`` on ``store`` (a pool of one connection) and count its round trips.

    A round trip is a run of messages the client sent (``F`` lines of the trace)
    followed by the server's answer (``B`` lines): in pipeline mode many
    statements travel in one run, and their answers come back in one.
    """
    with trace.open("w") as out:
        for conn in _every_connection(store):
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        try:
            action()
        finally:
            for conn in _every_connection(store):
                conn.pgconn.untrace()
    directions = [line[:1] for line in trace.read_text().splitlines() if line[:1] in "FB"]
    return sum(1 for turn in itertools.pairwise(directions) if turn == ("F", "B"))


def _every_connection(store: PostgresStore) -> list[psycopg.Connection[Any]]:
    """Every connection ``store`` may lend (its pools opened to their largest), lent back:
    the store's pool (a test's: one connection) and the claims pool."""
    pools = [store.pool] + ([store.claims_pool] if store.claims_pool is not None else [])
    lent = [(pool, pool.getconn()) for pool in pools for _ in range(pool.max_size)]
    for pool, conn in lent:
        pool.putconn(conn)
    return [conn for _, conn in lent]


def _noop_chain() -> cf.Workflow:
    wf = cf.Workflow("chain")
    first = wf.step(lambda ctx, data: None, name="first")
    wf.step(lambda ctx, data: None, name="second", after=[first])
    return wf


def _statements(store: PostgresStore, action: Callable[[], object]) -> int:
    """The statements ``action`` sent, as the store counts them."""
    before = store.stats.snapshot()["statements"]
    action()
    return int(store.stats.snapshot()["statements"] - before)


@pytest.mark.skipif(not hasattr(Trace, "SUPPRESS_TIMESTAMPS"), reason="needs libpq 14 traces")
def test_an_enqueue_is_one_round_trip(
    make_store: Callable[..., PostgresStore], tmp_path: Path
) -> None:
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.enqueue("chain", 1)  # the pool's connection is open and checked
    trace = tmp_path / "trace"
    assert _round_trips(store, trace, lambda: client.enqueue("chain", 2)) == ROUND_TRIPS, (
        trace.read_text()
    )
    jobs = [cf.Job("chain", i) for i in range(50)]
    assert _round_trips(store, trace, lambda: client.enqueue_many(jobs)) == ROUND_TRIPS, (
        trace.read_text()
    )
    labelled = [cf.Job("chain", i, labels={"n": str(i)}, key=f"k{i}") for i in range(50)]
    assert _round_trips(store, trace, lambda: client.enqueue_many(labelled)) == ROUND_TRIPS, (
        trace.read_text()
    )
    # One statement per table for the whole batch.
    assert _statements(store, lambda: client.enqueue_many(jobs)) == 2
    # Above Dialect.batch_chunk runs: a statement per table per chunk, still one trip.
    assert store.dialect.batch_chunk == 100
    chunked = [cf.Job("chain", i) for i in range(250)]
    assert _round_trips(store, trace, lambda: client.enqueue_many(chunked)) == ROUND_TRIPS, (
        trace.read_text()
    )
    assert _statements(store, lambda: client.enqueue_many(chunked)) == 6


def test_a_chunked_batch_keeps_every_run_with_its_own_steps(
    make_store: Callable[..., PostgresStore],
) -> None:
    # Runs of one step and of two, mixed, across chunk boundaries (Dialect.batch_chunk).
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.register(cf.Workflow("single", steps=[cf.Step("only", lambda ctx, data: None)]))
    names = ["chain" if i % 3 == 0 else "single" for i in range(333)]
    refs = client.enqueue_many([cf.Job(name, i) for i, name in enumerate(names)])
    assert [ref.workflow for ref in refs] == names
    tables = store.tables
    with store.pool.connection() as conn:
        rows = conn.execute(
            f"SELECT r.id, r.workflow, string_agg(s.name, ',' ORDER BY s.position)"
            f" FROM {tables.runs} r JOIN {tables.steps} s ON s.run_id = r.id"
            f" AND s.workflow = r.workflow GROUP BY r.id, r.workflow"
        ).fetchall()
        (steps,) = conn.execute(f"SELECT COUNT(*) FROM {tables.steps}").fetchone()  # type: ignore[misc]
        conn.rollback()
    found = {run_id: (workflow, step_names) for run_id, workflow, step_names in rows}
    expected_steps = {"chain": "first,second", "single": "only"}
    assert found == {ref.id: (ref.workflow, expected_steps[ref.workflow]) for ref in refs}
    assert steps == sum(len(expected_steps[name].split(",")) for name in names)


def test_a_one_run_enqueue_is_one_statement_committed_alone(
    make_store: Callable[..., PostgresStore],
) -> None:
    # The run and its steps in one WITH statement, in autocommit: no BEGIN, no COMMIT
    # (PostgresDialect.commit_alone). With labels or keys, or a batch, the transaction.
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.enqueue("chain", 0)

    ref = client.enqueue("chain", 1)
    assert _statements(store, lambda: client.enqueue("chain", 2)) == 1
    assert _statements(store, lambda: client.enqueue("chain", 3, labels={"n": "3"})) == 3
    assert (
        _statements(store, lambda: client.enqueue_many([cf.Job("chain", 4), cf.Job("chain", 5)]))
        == 2
    )
    stored = store.get_run(ref.id)
    assert stored is not None and [s.name for s in stored.steps] == ["first", "second"]
    with store.pool.connection() as conn:
        assert conn.autocommit is False  # handed back to the pool as it was lent
        assert conn.info.transaction_status == TransactionStatus.IDLE
    # A key held by an unfinished run refuses the one statement: nothing of it is written.
    client.enqueue("chain", 6, key="held")
    with pytest.raises(cf.DuplicateRun):
        client.enqueue("chain", 7, key="held")
    with store.pool.connection() as conn:
        counts = conn.execute(
            f"SELECT (SELECT COUNT(*) FROM {store.tables.runs}),"
            f" (SELECT COUNT(*) FROM {store.tables.steps})"
        ).fetchall()
        conn.rollback()
    assert counts == [(7, 14)]  # runs 0 to 6, two steps each: nothing of run 7


def test_a_one_run_enqueue_too_large_as_one_statement_goes_as_its_parts(
    make_store: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A payload of 100,000 characters: the run's INSERT carries about 100,350 bytes, the one
    # statement with the steps' about 100,750. Under a limit between the two, the enqueue
    # goes as the transaction of its parts; under one below the run's INSERT, it is
    # refused and nothing is written; above both, it is the one statement.
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    payload = "x" * 100_000

    def statements_of_enqueue(size: int) -> int:
        limit = StatementLimit(size, "the test's limit", expansion=1)
        monkeypatch.setattr(store.dialect, "statement_limit", limit)
        return _statements(store, lambda: client.enqueue("chain", payload))

    assert statements_of_enqueue(200_000) == 1
    assert statements_of_enqueue(100_500) == 2
    with pytest.raises(cf.PayloadTooLarge, match="the test's limit"):
        statements_of_enqueue(60_000)
    with store.pool.connection() as conn:
        (runs,) = conn.execute(f"SELECT COUNT(*) FROM {store.tables.runs}").fetchone()  # type: ignore[misc]
        conn.rollback()
    assert runs == 2


def test_a_refused_pipelined_enqueue_writes_nothing_and_leaves_the_connection_as_it_was(
    make_store: Callable[..., PostgresStore],
) -> None:
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    held = client.enqueue("chain", 0, key="taken")
    batch = [cf.Job("chain", i, key=f"free{i}", labels={"n": str(i)}) for i in range(300)]
    for jobs in ([*batch, cf.Job("chain", 300, key="taken")], [cf.Job("chain", 1, key="taken")]):
        with pytest.raises(cf.DuplicateRun) as caught:
            client.enqueue_many(jobs)
        assert caught.value.run_id == held.id
        # The transaction was rolled back, and the store's one connection left autocommit.
        with store.pool.connection() as conn:
            assert conn.autocommit is False
            assert conn.info.transaction_status == TransactionStatus.IDLE
            tables = store.tables
            rows = conn.execute(
                f"SELECT (SELECT COUNT(*) FROM {tables.runs}), (SELECT COUNT(*) FROM"
                f" {tables.steps}), (SELECT COUNT(*) FROM {tables.run_labels})"
            ).fetchall()
            conn.rollback()
        assert rows == [(1, 2, 0)]
    # Nothing of the refused batches holds a key.
    assert len(client.enqueue_many(batch)) == 300


def test_a_globally_limited_claim_costs_no_round_trip_more_than_a_plain_one(
    make_store: Callable[..., PostgresStore], tmp_path: Path
) -> None:
    # The limiter's lock is sent, not read, before the claim, whose LIMIT counts the queue's
    # running attempts itself (ROOM_LIMIT): the lock, the claim and the COMMIT of an outcome
    # batch travel together, as the plain claim's do (docs/claim.md, 3).
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.enqueue_many([cf.Job("chain", i) for i in range(40)])
    trace = tmp_path / "trace"
    plain, limited = QueueClaim("default"), QueueClaim("default", None, 50)

    def request(queue: QueueClaim) -> ClaimRequest:
        now = time.time_ns()
        return ClaimRequest(frozenset({"chain"}), 2, now, now + 600 * 10**9, "n", (queue,))

    held = store.claim(request(limited))  # the limiter row is made, once, outside the trace
    trips: dict[str, int] = {}

    def claim(queue: QueueClaim) -> None:
        store.claim(request(queue))

    def finish_one_and_claim(queue: QueueClaim) -> None:
        done = [(held.pop().token, Succeeded(b"null"))]
        held.extend(store.finish_and_claim(done, time.time_ns(), request(queue))[1])

    for name, queue in (("plain", plain), ("limited", limited)):
        trips[f"claim, {name}"] = _round_trips(store, trace, functools.partial(claim, queue))
        trips[f"finish_and_claim, {name}"] = _round_trips(
            store, trace, functools.partial(finish_one_and_claim, queue)
        )
    # A claim alone: BEGIN, the claim (the lock before it) and COMMIT in one trip, as an
    # enqueue (three through psycopg's own transaction: its BEGIN, the claim, its COMMIT).
    assert trips["claim, plain"] == ROUND_TRIPS, trips
    assert trips["claim, limited"] == trips["claim, plain"], trips
    assert trips["finish_and_claim, limited"] == trips["finish_and_claim, plain"], trips
    # And it took no more than the limit's room: 50 minus those running.
    with store.pool.connection() as conn:
        (running,) = conn.execute(
            f"SELECT count(*) FROM {store.tables.steps} WHERE status = 'running'"
        ).fetchone()  # type: ignore[misc]
    assert running <= 50


@pytest.mark.skipif(not hasattr(Trace, "SUPPRESS_TIMESTAMPS"), reason="needs libpq 14 traces")
def test_a_keyed_claim_of_one_queue_costs_no_round_trip_more_than_a_plain_one(
    make_store: Callable[..., PostgresStore], tmp_path: Path
) -> None:
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    keyed = cf.Workflow("keyed", concurrency=cf.Concurrency(key=lambda n: f"k{n % 20}", limit=2))
    keyed.step(lambda ctx, data: None, name="only")
    client.register(keyed)
    client.enqueue_many([cf.Job("keyed", i) for i in range(80)])
    trace = tmp_path / "trace"
    held: list[cf.store.ClaimedAttempt] = []

    def request(keys: bool) -> ClaimRequest:
        now = time.time_ns()
        return ClaimRequest(
            frozenset({"keyed"}), 4, now, now + 600 * 10**9, "n", (QueueClaim("default"),), keys
        )

    def claim(keys: bool) -> None:
        held.extend(store.claim(request(keys)))

    def finish_one_and_claim(keys: bool) -> None:
        done = [(held.pop().token, Succeeded(b"null"))]
        held.extend(store.finish_and_claim(done, time.time_ns(), request(keys))[1])

    trips: dict[str, int] = {}
    for keys in (False, True):
        trips[f"claim, keys={keys}"] = _round_trips(store, trace, functools.partial(claim, keys))
        trips[f"finish_and_claim, keys={keys}"] = _round_trips(
            store, trace, functools.partial(finish_one_and_claim, keys)
        )
    # The keyed claim of one queue is one statement (CLAIM_KEYED, docs/claim.md, 4): its
    # candidates, their keys' locks and counts and the lease are sent, not read, as the
    # plain claim's UPDATE is: with the COMMIT, after an outcome batch.
    assert trips["claim, keys=True"] == trips["claim, keys=False"] == ROUND_TRIPS, trips
    assert trips["finish_and_claim, keys=True"] == trips["finish_and_claim, keys=False"], trips
    # The keyed claims leased what they read: every attempt held is a running step.
    assert len(held) == 4 * 4 - 2  # four claims of 4, two of them after finishing one
    with store.pool.connection() as conn:
        (running,) = conn.execute(
            f"SELECT count(*) FROM {store.tables.steps} WHERE status = 'running'"
        ).fetchone()  # type: ignore[misc]
    assert running == len(held)


@pytest.mark.skipif(not hasattr(Trace, "SUPPRESS_TIMESTAMPS"), reason="needs libpq 14 traces")
def test_claims_and_an_outcome_batch_take_the_fewest_round_trips(
    make_store: Callable[..., PostgresStore], tmp_path: Path
) -> None:
    # A claim: BEGIN (carried by the transaction's first pipeline), the claim and COMMIT in
    # one trip; a claimed step with parents reads their outputs after the COMMIT, outside
    # any transaction: one more. An outcome batch that claims: its BEGIN, locking read and
    # successes in one trip; the run writes, the claim and COMMIT in another; and where the
    # successes have children, their release in one more, for the whole batch. psycopg's
    # own transaction took 3, 5, and 5 plus 2 a success with children (docs/claim.md, 7).
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.register(cf.Workflow("single", steps=[cf.Step("only", lambda ctx, data: None)]))
    client.enqueue_many([cf.Job("single", i) for i in range(6)])
    trace = tmp_path / "trace"

    def request(limit: int, workflow: str = "chain") -> ClaimRequest:
        now = time.time_ns()
        return ClaimRequest(frozenset({workflow}), limit, now, now + 600 * 10**9, "n")

    singles = store.claim(request(3, "single"))
    done_singles = [(a.token, Succeeded(b"null")) for a in singles]
    assert (
        _round_trips(
            store,
            trace,
            lambda: store.finish_and_claim(done_singles, time.time_ns(), request(3, "single")),
        )
        == 2
    ), trace.read_text()
    client.enqueue_many([cf.Job("chain", i) for i in range(6)])

    firsts: list[ClaimedAttempt] = []
    assert _round_trips(store, trace, lambda: firsts.extend(store.claim(request(3)))) == 1
    assert {a.step for a in firsts} == {"first"}
    done = [(a.token, Succeeded(b'"out"')) for a in firsts]
    taken: list[ClaimedAttempt] = []

    def finish_and_claim() -> None:
        taken.extend(store.finish_and_claim(done, time.time_ns(), request(3))[1])

    assert _round_trips(store, trace, finish_and_claim) == 3, trace.read_text()
    # It claimed the other three runs' first steps, or some of the seconds its outcomes made
    # ready; either way their inputs were read after the COMMIT.
    assert len(taken) == 3
    seconds: list[ClaimedAttempt] = []
    while not seconds:
        got = store.claim(request(8))
        seconds = [a for a in [*taken, *got] if a.step == "second"]
        taken = [a for a in got if a.step != "second"]
        store.finish_many([(a.token, Succeeded(b'"out"')) for a in taken], time.time_ns())
    assert all(a.inputs == {"first": b'"out"'} for a in seconds)
    # Now a claim of a step with a parent alone: its claim, then its inputs.
    ref = client.enqueue("chain", 99)
    (first,) = store.claim(request(1))
    assert first.run_id == ref.id
    store.finish_many([(first.token, Succeeded(b'"in"'))], time.time_ns())
    second: list[ClaimedAttempt] = []
    assert _round_trips(store, trace, lambda: second.extend(store.claim(request(8)))) == 2
    assert [(a.step, a.inputs) for a in second if a.run_id == ref.id] == [
        ("second", {"first": b'"in"'})
    ]


def _executes(trace: Path) -> list[str]:
    """The statements a traced action sent, one per ``Execute`` message (prepared or not),
    each named by the ``Parse`` or ``Bind`` before it."""
    named: list[str] = []
    last = ""
    for line in trace.read_text().splitlines():
        if line.startswith("F") and ("\tParse\t" in line or "\tBind\t" in line):
            last = line
        elif line.startswith("F") and "\tExecute\t" in line:
            named.append(last)
    return named


@pytest.mark.skipif(not hasattr(Trace, "SUPPRESS_TIMESTAMPS"), reason="needs libpq 14 traces")
def test_a_claim_of_one_statement_goes_alone_on_the_stores_own_connections(
    make_store: Callable[..., PostgresStore], postgres_url: str, tmp_path: Path
) -> None:
    # On the store's claims pool (its sessions plan as a claim must, plan_for_claims) the
    # common claim is its UPDATE alone, in autocommit: one statement, no BEGIN, no
    # settings, no COMMIT (PostgresDialect.claim_alone). On the application's pool the
    # claim keeps its transaction and sets the claim's settings for it.
    store = make_store(max_size=1, notify=False)
    client = cf.Client(store)
    client.register(_noop_chain())
    client.enqueue_many([cf.Job("chain", i) for i in range(2)])
    trace = tmp_path / "trace"

    def request() -> ClaimRequest:
        now = time.time_ns()
        return ClaimRequest(frozenset({"chain"}), 2, now, now + 600 * 10**9, "n")

    held: list[ClaimedAttempt] = []
    assert _round_trips(store, trace, lambda: held.extend(store.claim(request()))) == 1
    sent = _executes(trace)
    assert len(sent) == 1, sent
    assert "UPDATE" in sent[0] or "Bind" in sent[0], sent
    assert not any(word in trace.read_text() for word in ("BEGIN", "COMMIT", "set_config"))
    assert len(held) == 2
    assert store.claims_pool is not None
    for conn in _every_connection(store):
        assert conn.autocommit is False  # handed back as it was lent
        assert conn.info.transaction_status == TransactionStatus.IDLE
    with store.claims_pool.connection() as conn:
        assert conn.execute("SHOW enable_sort").fetchone() == ("off",)  # the claims' sessions
        conn.rollback()
    with store.pool.connection() as conn:
        assert conn.execute("SHOW enable_sort").fetchone() == ("on",)  # the rest's: untouched
        (running,) = conn.execute(
            f"SELECT count(*) FROM {store.tables.steps} WHERE status = 'running'"
        ).fetchone()  # type: ignore[misc]
        conn.rollback()
    assert running == 2  # committed: another connection sees the leases

    # Steps with parents: the claim alone, then their inputs read outside any transaction.
    done = [(attempt.token, Succeeded(b"1")) for attempt in held]
    store.finish_many(done, time.time_ns())
    children: list[ClaimedAttempt] = []
    assert _round_trips(store, trace, lambda: children.extend(store.claim(request()))) == 2
    assert "BEGIN" not in trace.read_text() and "COMMIT" not in trace.read_text()
    assert sorted(a.step for a in children) == ["second", "second"]
    assert all(a.inputs == {"first": b"1"} for a in children)
    client.enqueue_many([cf.Job("chain", i) for i in range(2, 4)])  # for the pool below

    # The application's pool: the claim's transaction, its settings for that transaction.
    with ConnectionPool(postgres_url, min_size=1, max_size=1, open=True) as pool:
        theirs = PostgresStore(pool=pool, table_prefix=store.tables.prefix)
        try:
            with trace.open("w") as out:
                with pool.connection() as conn:
                    conn.pgconn.trace(out.fileno())
                    conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
                try:
                    got = theirs.claim(request())
                finally:
                    with pool.connection() as conn:
                        conn.pgconn.untrace()
                        assert conn.execute("SHOW enable_sort").fetchone() == ("on",)
                        conn.rollback()
        finally:
            theirs.close()
    text = trace.read_text()
    assert "BEGIN" in text and "set_config" in text and "COMMIT" in text, text
    assert len(got) == 2
