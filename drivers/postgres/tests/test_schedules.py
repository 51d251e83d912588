"""Schedules on Postgres: racing fires, saves and leader claims from separate store objects.

The kit proves one fire per tick at the SPI, one call after another. Here the
calls meet in the server: each round, two store objects fire the same tick at
the same instant (a barrier), so one waits on the schedule's row lock the other
holds and is refused after it (its plan is stale, or, for a trigger, its tick's
key is taken), with nothing written. Leader claims race the same way: on a
role's row lock once it exists, on its primary key while it does not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cairnflow import StepKind, ids
from cairnflow.store import Leader, NewRun, NewStep, ScheduleRecord, TickOutcome, TickRecord
from cairnflow_postgres import PostgresStore

StoreFactory = Callable[..., PostgresStore]

T0 = 1_800_000_000 * 10**9
MINUTE = 60 * 10**9
ROUNDS = 30
STEP = NewStep("tick", StepKind.TASK, (), ())


def _record(schedule_id: str = "sch_race") -> ScheduleRecord:
    return ScheduleRecord(
        id=schedule_id,
        workflow="cron",
        name=schedule_id,
        spec="{}",
        fingerprint="f",
        next_fire=T0,
        created_at=T0,
        updated_at=T0,
    )


def _race(
    stores: list[PostgresStore], call: Callable[[PostgresStore, int], Any]
) -> list[list[Any]]:
    """``call(store, round)`` from one thread per store, all starting each round together."""
    barrier = threading.Barrier(len(stores))
    results: list[list[Any]] = [[] for _ in stores]
    errors: list[BaseException] = []

    def racer(n: int) -> None:
        try:
            for round_ in range(ROUNDS):
                barrier.wait(timeout=60)
                results[n].append(call(stores[n], round_))
        except BaseException as error:  # reported by the test, not lost in the thread
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    return results


def _stores(make_store: StoreFactory, count: int) -> list[PostgresStore]:
    """``count`` store objects on one namespace, each with its own pool."""
    first = make_store(notify=False)
    return [first] + [
        make_store(prefix=first.tables.prefix, migrate=False, notify=False)
        for _ in range(count - 1)
    ]


def test_two_stores_firing_the_same_tick_at_once_fire_it_once(make_store: StoreFactory) -> None:
    stores = _stores(make_store, 2)
    first = stores[0]
    first.save_schedule(_record())

    def fire(store: PostgresStore, round_: int, expected: bool) -> int | None:
        at = T0 + round_ * MINUTE if expected else T0 - 1 - round_
        tick = TickRecord("sch_race", at, TickOutcome.FIRED, "due", "n", at)
        run = NewRun(
            id=ids.default_id_generator("run"),
            workflow="cron",
            queue="default",
            priority=0,
            payload=b"{}",
            steps=(STEP,),
            step_ids=(ids.default_id_generator("step"),),
            created_at=at,
            run_at=at,
        )
        fired = store.fire_ticks(
            "sch_race",
            expected_next=at if expected else None,
            next_fire=at + MINUTE,
            ticks=[tick],
            runs=[run],
        )
        return None if fired is None else at

    due = _race(stores, lambda store, round_: fire(store, round_, True))
    triggered = _race(stores, lambda store, round_: fire(store, round_, False))
    for results in (due, triggered):
        per_round = list(zip(*results, strict=True))
        assert all(sum(at is not None for at in both) == 1 for both in per_round), per_round
    history = first.schedule_history("sch_race", 10 * ROUNDS)
    assert len(history) == 2 * ROUNDS
    assert len({t.run_id for t in history}) == 2 * ROUNDS
    ((runs,),) = first._context.tx.fetch(f"SELECT count(*) FROM {first.tables.runs}")
    assert runs == 2 * ROUNDS, "a refused fire wrote a run"
    (stored,) = first.list_schedules(["cron"])
    last = T0 + (ROUNDS - 1) * MINUTE
    assert (stored.next_fire, stored.last_fire) == (last + MINUTE, last)


def test_concurrent_first_saves_of_one_schedule_all_succeed(make_store: StoreFactory) -> None:
    stores = _stores(make_store, 4)
    first = stores[0]
    # Every round a new schedule: four stores insert it at once, and three lose the race.
    saved = _race(stores, lambda store, round_: store.save_schedule(_record(f"sch_{round_}")))
    for round_ in range(ROUNDS):
        assert {results[round_].id for results in saved} == {f"sch_{round_}"}
    assert len(first.list_schedules()) == ROUNDS


def test_racing_claims_give_one_node_the_lease_and_a_new_term_per_handover(
    make_store: StoreFactory,
) -> None:
    stores = _stores(make_store, 4)
    lease = 10 * 10**9

    # Each round every store claims the role at the same instant, as its own node; the lease
    # of the round before expired a nanosecond earlier, so every round is a handover.
    def claim(store: PostgresStore, round_: int) -> Leader:
        now = T0 + round_ * lease
        node = f"node-{stores.index(store)}"
        return store.claim_leadership("scheduler", node, lease_now=now, lease_until=now + lease - 1)

    results = _race(stores, claim)
    for round_, seen in enumerate(zip(*results, strict=True)):
        winners = [n for n, leader in enumerate(seen) if leader.node == f"node-{n}"]
        assert len(winners) == 1, f"round {round_}: {seen}"
        assert set(seen) == {seen[winners[0]]}, f"round {round_}: the racers saw other holders"
        assert seen[0].term == round_ + 1, f"round {round_}: {seen[0]}"  # one term per handover


def test_racing_first_claims_of_a_role_all_return_its_one_holder(
    make_store: StoreFactory,
) -> None:
    stores = _stores(make_store, 4)

    # Every round a new role: four stores find no row and insert it at once; the primary key
    # refuses three, whose claims run again and return the winner.
    def claim(store: PostgresStore, round_: int) -> Leader:
        node = f"node-{stores.index(store)}"
        return store.claim_leadership(f"role-{round_}", node, lease_now=T0, lease_until=T0 + 1)

    before = sum(store.stats.snapshot()["transactions"] for store in stores)
    results = _race(stores, claim)
    for round_, seen in enumerate(zip(*results, strict=True)):
        assert len(set(seen)) == 1, f"round {round_}: {seen}"
        assert seen[0].term == 1
        assert sum(leader.node == f"node-{n}" for n, leader in enumerate(seen)) == 1
    # The race was run: some claims lost the insert and ran again (a claim is one transaction).
    transactions = sum(store.stats.snapshot()["transactions"] for store in stores) - before
    assert transactions > len(stores) * ROUNDS
