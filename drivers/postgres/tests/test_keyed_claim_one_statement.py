"""A keyed claim of one queue in one statement admits exactly what the two-step claim does.

On Postgres a keyed claim of one queue is one statement (CLAIM_KEYED): the rules of
``Keys.admit`` written in SQL. The two-step claim (candidates and their keys read,
admitted in Python, then leased) is the reference: the same scenario is played on two
namespaces, one claiming in one statement, the other in two steps, and every claim,
every outcome batch's claim and every key's row (its count and its fifo turn) must come
out the same. The scenarios mix keys of limit 1 and 3, fifo keys whose runs have two
steps, steps without a key, a key row deleted by hand, and outcome batches whose
releases and claims share keys.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import cairnflow as cf
from cairnflow.store import ClaimedAttempt, ClaimRequest, QueueClaim, Succeeded
from cairnflow.testing import wait_until
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(240)

RUNS = 48
LEASE = 3600 * 10**9


def _workflows() -> list[cf.Workflow]:
    def step(ctx: Any, data: Any) -> None:
        return None

    one = cf.Workflow("one", concurrency=cf.Concurrency(key=lambda p: p["key"], limit=1))
    one.step(step, name="only")
    three = cf.Workflow("three", concurrency=cf.Concurrency(key=lambda p: p["key"], limit=3))
    three.step(step, name="only")
    fifo = cf.Workflow(
        "fifo", concurrency=cf.Concurrency(key=lambda p: p["key"], limit=2, fifo=True)
    )
    fifo.step(step, name="first")
    fifo.step(step, name="second", after=["first"])
    free = cf.Workflow("free")
    free.step(step, name="only")
    return [one, three, fifo, free]


def _play(store: PostgresStore, admin: psycopg.Connection[Any], seed: int) -> list[Any]:
    """Play scenario ``seed`` on ``store``; what every claim leased, and the keys at the end."""
    rng = random.Random(seed)
    workflows = _workflows()
    client = cf.Client(store)
    for wf in workflows:
        client.register(wf)
    names = frozenset(wf.name for wf in workflows)
    for n in range(RUNS):
        kind = rng.choice(["one", "one", "three", "fifo", "free"])
        key = {"one": f"a{rng.randrange(4)}", "three": f"b{rng.randrange(2)}"}.get(
            kind, f"f{rng.randrange(2)}"
        )
        client.enqueue(kind, {"n": n, "key": key})
    t = store.tables

    def order() -> None:
        # Claim order by the run's number: a run has one ready step at a time, so no two
        # ready steps tie (steps readied by one outcome batch would, broken by their ids).
        admin.execute(
            f"""UPDATE {t.steps} s SET priority = 0, due_at = (
                    SELECT (convert_from(r.payload, 'UTF8')::json->>'n')::bigint
                    FROM {t.runs} r WHERE r.id = s.run_id)
                WHERE s.status = 'ready'"""
        )

    def turns() -> dict[str, int | None]:
        """Each fifo key's recorded turn: the number of the run it names."""
        return dict(
            admin.execute(
                f"""SELECT l.name, (convert_from(r.payload, 'UTF8')::json->>'n')::int
                    FROM {t.limits} l LEFT JOIN {t.runs} r ON r.id = l.head
                    WHERE l.kind = 'key' AND l.fifo = 1"""
            ).fetchall()
        )

    def number(attempt: ClaimedAttempt) -> tuple[int, str]:
        return int(json.loads(attempt.payload)["n"]), attempt.step

    now = 10**9
    held: list[ClaimedAttempt] = []
    seen: list[Any] = []
    for turn in range(40):
        now += 10**9
        order()
        if turn == 10:  # a key's row deleted by hand: its candidates wait for the next claim
            admin.execute(f"DELETE FROM {t.limits} WHERE kind = 'key' AND name = 'a1'")
        request = ClaimRequest(
            names, rng.randint(1, 6), now, now + LEASE, "node", (QueueClaim("default"),), True
        )
        if held and rng.random() < 0.6:
            held.sort(key=number)
            done = rng.sample(held, rng.randint(1, min(5, len(held))))
            held = [h for h in held if h not in done]
            results, got = store.finish_and_claim(
                [(h.token, Succeeded(b"null")) for h in done], now, request
            )
            seen.append(("finished", sorted(number(h) for h in done), [r.state for r in results]))
        else:
            got = store.claim(request)
        held.extend(got)
        seen.append(("claimed", sorted(number(h) for h in got)))
        seen.append(("turns", turns()))
    keys = admin.execute(
        f"SELECT name, running, fifo FROM {t.limits} WHERE kind = 'key' ORDER BY name"
    ).fetchall()
    seen.append(("keys", keys))
    # Each key's count is what is running under it, counted from the steps themselves.
    counted = dict(
        admin.execute(
            f"""SELECT concurrency_key, count(*) FROM {t.steps}
                WHERE status = 'running' AND concurrency_key IS NOT NULL GROUP BY 1"""
        ).fetchall()
    )
    for name, running, _fifo in keys:
        if name != "a1":  # deleted while held: its new row counts from the next claim on
            assert running == counted.get(name, 0), (name, running, counted)
    return seen


@pytest.mark.parametrize("in_one", [True, False], ids=["one statement", "two steps"])
def test_a_claim_that_waited_for_a_key_counts_what_its_holder_committed(
    make_store: Callable[..., PostgresStore],
    admin_conn: psycopg.Connection[Any],
    postgres_url: str,
    in_one: bool,
) -> None:
    """The worst moment for a keyed claim: another transaction holds the key's row, having
    taken its last slot, and commits while the claim waits for the row. The claim must
    read the count as committed (its statement's snapshot predates the wait), and lease
    nothing."""
    store = make_store(notify=False)
    store.dialect.claims_keyed_in_one = in_one
    client = cf.Client(store)
    wf = cf.Workflow("one", concurrency=cf.Concurrency(key=lambda p: p["key"], limit=1))
    wf.step(lambda ctx, data: None, name="only")
    client.register(wf)
    ref = client.enqueue("one", {"key": "k"})
    t = store.tables
    now = 10**9
    request = ClaimRequest(
        frozenset({"one"}), 4, now, now + LEASE, "node", (QueueClaim("default"),), True
    )
    claimed: list[list[ClaimedAttempt]] = []
    with psycopg.connect(postgres_url) as holder:
        # Another claimer's transaction: it took the key's one slot and holds its row.
        holder.execute(f"UPDATE {t.limits} SET running = 1 WHERE kind = 'key' AND name = 'k'")
        (holder_pid,) = holder.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[misc]
        waiter = threading.Thread(target=lambda: claimed.append(store.claim(request)))
        waiter.start()
        # The claim is waiting for the key's row (the server says so; no sleep).
        wait_until(
            lambda: (
                admin_conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND %s = ANY(pg_blocking_pids(pid))",
                    (holder_pid,),
                ).fetchone()[0]  # type: ignore[index]
                == 1
            ),
            timeout=60,
        )
        holder.commit()
    waiter.join(60)
    assert claimed == [[]], claimed
    (running,) = admin_conn.execute(
        f"SELECT running FROM {t.limits} WHERE kind = 'key' AND name = 'k'"
    ).fetchone()  # type: ignore[misc]
    assert running == 1  # the holder's slot, not moved by the claim that admitted nothing
    assert client.info(ref).status is cf.Status.QUEUED


@pytest.mark.parametrize("seed", range(10))
def test_the_one_statement_claim_admits_what_the_two_step_claim_does(
    make_store: Callable[..., PostgresStore], admin_conn: psycopg.Connection[Any], seed: int
) -> None:
    one = make_store(notify=False)
    assert one.dialect.claims_keyed_in_one
    two = make_store(notify=False)
    two.dialect.claims_keyed_in_one = False  # this store only: the two-step claim
    assert one.dialect is not two.dialect
    played = _play(one, admin_conn, seed)
    reference = _play(two, admin_conn, seed)
    assert played == reference
    # The scenario did what it is for: runs were claimed, fifo runs took their second step,
    # and a fifo key's turn moved from one run to another.
    claimed = [step for entry in reference if entry[0] == "claimed" for step in entry[1]]
    assert len(claimed) > RUNS // 2, reference
    assert any(name == "second" for _, name in claimed), reference
    turns = [entry[1] for entry in reference if entry[0] == "turns"]
    moved = [
        name
        for before, after in itertools.pairwise(turns)
        for name, run in before.items()
        if run is not None and after.get(name) != run
    ]
    assert moved, turns
