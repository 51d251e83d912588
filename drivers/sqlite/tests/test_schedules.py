"""Schedules on one SQLite file: processes racing through the same ticks and leases.

The kit proves one fire per tick and one leader per role at the SPI, one call
after another; here real processes race on the file's write lock. Each plans
every tick from the same stored next fire (a housekeeping pass), then each
triggers the same instants (the tick's primary key alone decides those). Then
three processes claim the same leadership, round after round, each round
after the last round's lease ran out, and a new role every round.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cairnflow.store import ScheduleRecord
from cairnflow_sqlite import SQLiteStore

T0 = 1_800_000_000 * 10**9
MINUTE = 60 * 10**9
ROUNDS = 40

RACER = """
import json, random, sys, time
from cairnflow import StepKind, ids
from cairnflow.store import NewRun, NewStep, TickOutcome, TickRecord
from cairnflow_sqlite import SQLiteStore

db, node, start_at, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
t0, minute = int(sys.argv[5]), 60 * 10**9
store = SQLiteStore(db)
step = NewStep("tick", StepKind.TASK, (), ())

def fire(at, expected, reason):
    time.sleep(random.uniform(0, 0.002))  # neither process is always first at the lock
    tick = TickRecord("sch_race", at, TickOutcome.FIRED, reason, node, at)
    run = NewRun(
        id=ids.default_id_generator("run"),
        workflow="cron",
        queue="default",
        priority=0,
        payload=b"{}",
        steps=(step,),
        step_ids=(ids.default_id_generator("step"),),
        created_at=at,
        run_at=at,
        labels={"node": node},
    )
    fired = store.fire_ticks(
        "sch_race", expected_next=expected, next_fire=at + minute, ticks=[tick], runs=[run]
    )
    return None if fired is None else [at, fired[0]]

time.sleep(max(0.0, start_at - time.time()))  # both processes start at the same instant
due = [fire(t0 + i * minute, t0 + i * minute, "due") for i in range(rounds)]
triggered = [fire(t0 - 1 - i, None, "triggered") for i in range(rounds)]
print(json.dumps([w for w in due + triggered if w is not None]))
store.close()
"""

CLAIMER = """
import json, sys, time
from cairnflow_sqlite import SQLiteStore

db, node, start_at, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
t0, lease = int(sys.argv[5]), 10 * 10**9
store = SQLiteStore(db)
seen = []
for r in range(rounds):
    time.sleep(max(0.0, start_at + r * 0.02 - time.time()))  # every process's round r at once
    now = t0 + r * lease  # the lease of round r - 1 ran out a nanosecond ago
    for role in ("scheduler", f"first-{r}"):
        leader = store.claim_leadership(role, node, lease_now=now, lease_until=now + lease - 1)
        seen.append([role, r, leader.node, leader.term, leader.lease_until])
print(json.dumps(seen))
store.close()
"""


def _race(db: Path, script: str, count: int) -> list[Any]:
    """Run ``script`` in ``count`` processes starting together; what each printed (JSON)."""
    start_at = str(time.time() + 2.0)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(db), f"node-{n}", start_at, str(ROUNDS), str(T0)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(count)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [p.returncode for p in processes] == [0] * count, [e.decode() for _, e in outputs]
    return [json.loads(out) for out, _ in outputs]


def test_two_processes_firing_the_same_ticks_fire_each_once(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    store.save_schedule(
        ScheduleRecord(
            id="sch_race",
            workflow="cron",
            name="race",
            spec="{}",
            fingerprint="f",
            next_fire=T0,
            created_at=T0,
            updated_at=T0,
        )
    )
    won = [[tuple(w) for w in out] for out in _race(db, RACER, 2)]
    fired = sorted(w for wins in won for w in wins)
    due = [T0 + i * MINUTE for i in range(ROUNDS)]
    triggered = [T0 - 1 - i for i in range(ROUNDS)]
    assert [at for at, _ in fired] == sorted(triggered + due), "a tick fired twice, or never"
    history = store.schedule_history("sch_race", 10 * ROUNDS)
    assert sorted((t.at, t.run_id) for t in history) == fired  # each tick's row names its run
    with store._connections.connection() as conn:
        ((runs,),) = conn.execute(f"SELECT count(*) FROM {store.tables.runs}").fetchall()
    assert runs == 2 * ROUNDS, "a refused fire wrote a run"
    (stored,) = store.list_schedules(["cron"])
    assert (stored.next_fire, stored.last_fire) == (due[-1] + MINUTE, due[-1])


def test_processes_claiming_one_role_give_each_round_one_leader_and_a_new_term(db: Path) -> None:
    store = SQLiteStore(db)
    store.migrate()
    lease = 10 * 10**9
    claims = [[tuple(claim) for claim in out] for out in _race(db, CLAIMER, 3)]
    for r in range(ROUNDS):
        now = T0 + r * lease
        for role in ("scheduler", f"first-{r}"):
            seen = {n: c for n, out in enumerate(claims) for c in out if c[:2] == (role, r)}
            winners = [n for n, (_, _, node, _, _) in seen.items() if node == f"node-{n}"]
            assert len(winners) == 1, f"{role} in round {r}: {seen}"
            # A handover every round: round r's leader has term r + 1 (a new role's: 1).
            assert seen[winners[0]][3] == (r + 1 if role == "scheduler" else 1), seen
            # The others were told of another node's lease, unexpired at their lease_now.
            assert all(until >= now for (_, _, _, _, until) in seen.values()), seen
    with store._connections.connection() as conn:
        rows = conn.execute(f"SELECT role, term FROM {store.tables.leaders}").fetchall()
    assert sorted(rows) == sorted(
        [("scheduler", ROUNDS)] + [(f"first-{r}", 1) for r in range(ROUNDS)]
    )
