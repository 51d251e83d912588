"""Schedules on Postgres: racing fires and saves from separate store objects, each its own pool.

The kit proves one fire per tick at the SPI, one call after another. Here the
calls meet in the server: each round, two store objects fire the same tick at
the same instant (a barrier), so one waits on the schedule's row lock the other
holds and is refused after it (its plan is stale, or, for a trigger, its tick's
key is taken), with nothing written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cairnflow import StepKind
from cairnflow.store import NewRun, NewStep, ScheduleRecord, TickOutcome, TickRecord
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


def test_two_stores_firing_the_same_tick_at_once_fire_it_once(make_store: StoreFactory) -> None:
    first = make_store(notify=False)
    stores = [first, make_store(prefix=first.tables.prefix, migrate=False, notify=False)]
    first.save_schedule(_record())

    def fire(store: PostgresStore, round_: int, expected: bool) -> int | None:
        at = T0 + round_ * MINUTE if expected else T0 - 1 - round_
        tick = TickRecord("sch_race", at, TickOutcome.FIRED, "due", "n", at)
        run = NewRun("cron", "default", 0, b"{}", (STEP,), at, at)
        ids = store.fire_ticks(
            "sch_race",
            expected_next=at if expected else None,
            next_fire=at + MINUTE,
            ticks=[tick],
            runs=[run],
        )
        return None if ids is None else at

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
    first = make_store(notify=False)
    stores = [first] + [
        make_store(prefix=first.tables.prefix, migrate=False, notify=False) for _ in range(3)
    ]
    # Every round a new schedule: four stores insert it at once, and three lose the race.
    saved = _race(stores, lambda store, round_: store.save_schedule(_record(f"sch_{round_}")))
    for round_ in range(ROUNDS):
        assert {results[round_].id for results in saved} == {f"sch_{round_}"}
    assert len(first.list_schedules()) == ROUNDS
