"""Schedules on one SQLite file: processes firing the same ticks at once fire each tick once.

The kit proves one fire per tick at the SPI, one call after another; here two
real processes race through the same ticks on the file's write lock. Each plans
every tick from the same stored next fire (a housekeeping pass), then each
triggers the same instants (the tick's primary key alone decides those).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cairnflow.store import ScheduleRecord
from cairnflow_sqlite import SQLiteStore

T0 = 1_800_000_000 * 10**9
MINUTE = 60 * 10**9
ROUNDS = 40

RACER = """
import json, random, sys, time
from cairnflow import StepKind
from cairnflow.store import NewRun, NewStep, TickOutcome, TickRecord
from cairnflow_sqlite import SQLiteStore

db, node, start_at, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
t0, minute = int(sys.argv[5]), 60 * 10**9
store = SQLiteStore(db)
step = NewStep("tick", StepKind.TASK, (), ())

def fire(at, expected, reason):
    time.sleep(random.uniform(0, 0.002))  # neither process is always first at the lock
    tick = TickRecord("sch_race", at, TickOutcome.FIRED, reason, node, at)
    run = NewRun("cron", "default", 0, b"{}", (step,), at, at, labels={"node": node})
    ids = store.fire_ticks(
        "sch_race", expected_next=expected, next_fire=at + minute, ticks=[tick], runs=[run]
    )
    return None if ids is None else [at, ids[0]]

time.sleep(max(0.0, start_at - time.time()))  # both processes start at the same instant
due = [fire(t0 + i * minute, t0 + i * minute, "due") for i in range(rounds)]
triggered = [fire(t0 - 1 - i, None, "triggered") for i in range(rounds)]
print(json.dumps([w for w in due + triggered if w is not None]))
store.close()
"""


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
    start_at = str(time.time() + 2.0)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(db), f"node-{n}", start_at, str(ROUNDS), str(T0)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [p.returncode for p in processes] == [0, 0], [err.decode() for _, err in outputs]
    won = [[tuple(w) for w in json.loads(out)] for out, _ in outputs]
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
