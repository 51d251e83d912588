"""Values the server will not take: over ``max_allowed_packet``, or out of a column's range.

A statement over the server's ``max_allowed_packet`` makes it drop the connection, which
looks like an outage: the store reads the setting when it connects and refuses such a
statement before sending it, with ``cf.PayloadTooLarge`` naming the setting. Every test
here uses the server's real setting (16 MiB on the shared MariaDB) and real values.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import AttemptState, ClaimRequest
from cairnflow_mysql import MySQLStore

Server = Any  # conftest.Server: the server under test and raw connections to it

MiB = 1 << 20
OVERSIZED = 20 * MiB
"""Characters of a value over any default max_allowed_packet (16 MiB on MariaDB)."""
HELD_BACK = "store unavailable writing"
"""How the committer's log begins when it holds outcomes back for an outage
(``cairnflow._engine._commit``): what a refusal taken for a dropped connection would cause."""
_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)
_CLIENT = {"workers": 8, "poll_interval": 0.05, "lease": 10}


def max_allowed_packet(server: Server) -> int:
    return int(server.query("SELECT @@max_allowed_packet")[0][0])


def setting(server: Server) -> str:
    product = "MariaDB" if server.kind == "mariadb" else "MySQL"
    return f"{product}'s max_allowed_packet of {max_allowed_packet(server)} bytes"


def bytes_sent_per_byte(server: Server) -> int:
    """What PyMySQL sends for one byte of a BLOB value: 2 since PyMySQL 1.2 (hex), 1 before."""
    with server.connect().cursor() as cursor:
        empty = len(cursor.mogrify("%s", (b"",)))
        thousand = len(cursor.mogrify("%s", (b"x" * 1000,)))
    return (thousand - empty) // 1000


def count(server: Server, table: str) -> int:
    return int(server.query(f"SELECT COUNT(*) FROM `{table}`")[0][0])


def make(ctx: cf.StepContext, n: int) -> str:
    """A string of ``n`` characters (its output: ``n + 2`` bytes); a small one after some I/O."""
    if n < 100:
        time.sleep(0.02)
    return "x" * n


def sized() -> cf.Workflow:
    """One step, :func:`make`, retried on failure (a refused output must not be)."""
    retry = cf.RetryPolicy(max_attempts=3, backoff=_QUICK)
    return cf.Workflow("sized", steps=[cf.Step("make", make, retry=retry)])


def gate() -> cf.Workflow:
    wf = cf.Workflow("gate")
    wf.wait("w", signal="go")
    return wf


def alongside(store: MySQLStore, big: int, **options: Any) -> tuple[cf.RunInfo, list[cf.RunInfo]]:
    """A run making a ``big`` output enqueued with 7 small ones, on a client of its own (8
    workers: every run gets one at once)."""
    with cf.Client(store, **_CLIENT, **options) as client:
        client.register(sized())
        jobs = [cf.Job("sized", big), *[cf.Job("sized", 10) for _ in range(7)]]
        infos = [client.wait(ref, timeout=60) for ref in client.enqueue_many(jobs)]
    return infos[0], infos[1:]


def once(info: cf.RunInfo) -> tuple[int, int, int]:
    """``(attempts, failures, reclaims)`` of a run's one step, as the store recorded them."""
    step = info.steps["make"]
    return step.attempts, step.failures, step.reclaims


# -- the packet limit ---------------------------------------------------------------------------
def test_the_store_reads_max_allowed_packet_when_it_connects(
    server: Server, store: MySQLStore
) -> None:
    limit = store.dialect.statement_limit
    assert limit is not None
    assert f"{limit.setting} of {limit.size} bytes" == setting(server)


def test_an_output_just_under_the_packet_is_written_and_read_back(
    server: Server, store: MySQLStore
) -> None:
    # 1 MiB to spare as sent: PyMySQL sends a BLOB as hex (twice its bytes) since 1.2.
    just_under = (max_allowed_packet(server) - MiB) // bytes_sent_per_byte(server) - 2
    kept, others = alongside(store, just_under)
    assert kept.status is cf.Status.SUCCEEDED, kept.error
    assert kept.result == "x" * just_under
    assert all(info.status is cf.Status.SUCCEEDED for info in others)


def test_an_output_over_the_packet_fails_its_step_at_once_while_the_runs_beside_it_flow(
    server: Server, store: MySQLStore, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # First the same output refused by the client itself (payload_limit), before it reaches
    # the store, beside the same small runs.
    limit = max_allowed_packet(server)
    checked, baseline = alongside(store, OVERSIZED, payload_limit=limit)
    assert checked.steps["make"].error is not None
    assert checked.steps["make"].error.message.endswith(f"over the limit of {limit} bytes")
    assert all(info.status is cf.Status.SUCCEEDED for info in baseline)

    refused, others = alongside(store, OVERSIZED)
    assert refused.status is cf.Status.FAILED
    step = refused.steps["make"]
    # Failed by the attempt that made it, once: not retried (no retry can help), never
    # retaken after its lease, its lease released with the failure.
    assert once(refused) == (1, 1, 0)
    assert step.error is not None and step.error.type == "PayloadTooLarge"
    assert step.error.message == (
        f"a value sent in one statement is {OVERSIZED + 2} bytes encoded, over {setting(server)}"
    )
    lease = server.query(
        f"SELECT status, lease_token, lease_until FROM `{prefix}steps` WHERE run_id = %s",
        refused.id,
    )
    assert lease == [("failed", None, None)]
    # The runs beside it ran while it was refused and were written as they ended: each
    # succeeded on its first attempt with no reclaim, and no outcome was held back as if the
    # store were unavailable (what a refusal taken for a dropped connection costs: seconds).
    assert refused.finished_at_ns is not None
    assert any(info.steps["make"].started_at_ns < refused.finished_at_ns for info in others)
    assert all(info.status is cf.Status.SUCCEEDED for info in others)
    assert [once(info) for info in others] == [(1, 0, 0)] * len(others)
    held_back = [r.getMessage() for r in caplog.records if r.getMessage().startswith(HELD_BACK)]
    assert held_back == []


def test_the_largest_statement_the_store_lets_through_is_one_the_server_takes(
    server: Server, store: MySQLStore, prefix: str
) -> None:
    client = cf.Client(store)
    client.register(sized())
    client.enqueue("sized", 1)
    now = time.time_ns()
    request = ClaimRequest(frozenset({"sized"}), 1, now, now + 60 * 10**9, "test-node")
    [attempt] = store.claim(request)
    limit, per_byte = max_allowed_packet(server), bytes_sent_per_byte(server)
    # Over by the statement's other parts: refused, and the error says by how much.
    probe = limit // per_byte - 16
    with pytest.raises(cf.PayloadTooLarge) as over:
        store.record_progress(attempt.token, b"x" * probe, now)
    assert over.value.size > limit
    largest = probe - -(-(over.value.size - limit) // per_byte)  # the fewest bytes fewer
    assert store.record_progress(attempt.token, b"x" * largest, now) is AttemptState.HELD
    stored = server.query(f"SELECT LENGTH(progress) FROM `{prefix}steps`")
    assert stored == [(largest,)]  # the server took it: the measure is not too lax
    with pytest.raises(cf.PayloadTooLarge):  # one byte more is refused: nor too strict
        store.record_progress(attempt.token, b"x" * (largest + 1), now)
    assert server.query(f"SELECT LENGTH(progress) FROM `{prefix}steps`") == stored


def test_an_enqueue_over_the_packet_is_refused_whole_before_anything_is_sent(
    server: Server, store: MySQLStore, prefix: str
) -> None:
    client = cf.Client(store)  # never started: only these calls reach the server
    client.register(sized())
    big = "x" * OVERSIZED
    before = store.stats.snapshot()
    for enqueue in (
        lambda: client.enqueue("sized", big),
        lambda: client.enqueue_many([cf.Job("sized", 1), cf.Job("sized", big)]),
    ):
        with pytest.raises(cf.PayloadTooLarge) as caught:
            enqueue()
        assert str(caught.value) == (
            f"a value sent in one statement is {OVERSIZED + 2} bytes encoded, over "
            f"{setting(server)}"
        )
    after = store.stats.snapshot()
    # Refused at once: no statement sent, no transaction run again.
    assert (after["statements"], after["retries"]) == (before["statements"], before["retries"])
    assert (count(server, f"{prefix}runs"), count(server, f"{prefix}steps")) == (0, 0)
    with cf.Client(store, poll_interval=0.05) as running:  # the store goes on as before
        running.register(sized())
        info = running.wait(running.enqueue("sized", 3), timeout=20)
    assert (info.status, info.result) == (cf.Status.SUCCEEDED, "xxx")


def test_an_enqueue_tx_over_the_packet_leaves_the_application_transaction_and_its_writes(
    server: Server, store: MySQLStore, prefix: str
) -> None:
    table = f"{prefix}app"
    server.query(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, note VARCHAR(64)) ENGINE = InnoDB")
    client = cf.Client(store)
    client.register(sized())
    conn = server.connect(autocommit=False)
    with conn.cursor() as cursor:
        cursor.execute(f"INSERT INTO `{table}` VALUES (1, 'kept')")
    with pytest.raises(cf.PayloadTooLarge, match="max_allowed_packet"):
        client.enqueue_tx(conn, "sized", "x" * OVERSIZED)
    ok = client.enqueue_tx(conn, "sized", 1)
    conn.commit()
    assert server.query(f"SELECT id, note FROM `{table}`") == [(1, "kept")]
    assert [run.id for run in client.runs().runs] == [ok.id]


def test_a_signal_over_the_packet_is_refused_and_stores_nothing(
    server: Server, store: MySQLStore, prefix: str
) -> None:
    client = cf.Client(store)
    client.register(gate())
    ref = client.enqueue("gate")
    with pytest.raises(cf.PayloadTooLarge) as caught:
        client.signal(ref, "go", "x" * OVERSIZED)
    assert str(caught.value).endswith(f"over {setting(server)}")
    assert count(server, f"{prefix}signals") == 0
    assert client.signal(ref, "go", "small") is cf.SignalResult.STORED


def test_progress_over_the_packet_is_refused_in_the_step_and_stores_nothing(
    server: Server, store: MySQLStore
) -> None:
    wf = cf.Workflow("reporting")

    @wf.step
    def report(ctx: cf.StepContext, n: int) -> str:
        try:
            ctx.progress("x" * n)
        except cf.PayloadTooLarge as error:
            ctx.progress("halfway")
            return str(error)
        return "stored"

    with cf.Client(store, poll_interval=0.05) as client:
        client.register(wf)
        info = client.wait(client.enqueue("reporting", OVERSIZED), timeout=30)
    assert info.status is cf.Status.SUCCEEDED, info.error
    assert info.result == (
        f"a value sent in one statement is {OVERSIZED + 2} bytes encoded, over {setting(server)}"
    )
    assert info.steps["report"].progress == "halfway"


# -- values the server refuses for what they are ------------------------------------------------
def test_an_outcome_the_server_refuses_fails_its_attempt_at_once_with_the_servers_reason(
    store: MySQLStore,
) -> None:
    wf = cf.Workflow("far")

    @wf.step(retry=cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
    def later(ctx: cf.StepContext, data: Any) -> None:
        raise cf.Snooze(1e12)  # 31,700 years from now: past a BIGINT of nanoseconds (2262)

    with cf.Client(store, poll_interval=0.05) as client:
        client.register(wf)
        info = client.wait(client.enqueue("far"), timeout=30)
    assert info.status is cf.Status.FAILED
    step = info.steps["later"]
    assert (step.attempts, step.failures, step.reclaims) == (1, 1, 0)
    assert step.error is not None and step.error.type == "ValueRefused"
    assert step.error.message.startswith("mysql store refused a value: ")
    assert "Out of range value for column 'due_at'" in step.error.message
