"""Chaos with worker processes: faults, kills, stalls, lost connections, poison, restarts.

Each scenario runs a mixed workload (diamonds with a fan-in, chains with a
failing-once step and a durable sleep) on ``chaos_worker`` processes while it
breaks something, for ``--duration`` seconds (longer, if what it breaks has not
landed yet), then lets the work drain and checks the history against the
store (:mod:`chaos_history`): nothing lost, no outcome written twice, nothing
stuck. Each one also asserts that its faults landed (kills of live processes,
connections terminated, faults fired), so none can pass having broken nothing.

The short profile (``nox -s tests``) runs each scenario on one engine, the
engines taking turns; ``--chaos-profile full`` (``nox -s chaos``) on all three.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import chaos_history as h
import chaos_workload as w
import pytest
from chaos_engines import RESTARTS_ENV, Engine, PostgresEngine
from chaos_run import FULL, Chaos, on

import cairnflow as cf
from cairnflow.testing import faults, wait_until

pytestmark = pytest.mark.skipif(
    os.name != "posix", reason="worker processes are killed with signals"
)


def check(chaos: Chaos, expected: dict[str, h.Expected] | None = None) -> h.Verdict:
    """Drain, stop the fleet, and return the verdict (asserted clean by the caller)."""
    chaos.drain()
    return chaos.verdict(expected)


def clean(verdict: h.Verdict, chaos: Chaos) -> str:
    return f"{verdict.summary()}\nlanded: {chaos.fleet.landed}\n{chaos.fleet.logs()}"


# -- the named fault points, in worker processes --------------------------------------------------
WORKER_FAULTS = (
    "claim.before_commit=kill@0.02,sql.after_commit=raise@0.02",
    "outcome.before_commit=kill@0.03,claim.before_commit=stall:1@0.02",
    "sql.after_commit=raise@0.02,outcome.before_commit=stall:1@0.03",
)
"""What the workers are armed with, in turn: every point kills, raises or stalls somewhere."""


@on("sqlite")
def test_faults_at_every_point_in_worker_processes(
    engine: Engine, tmp_path: Path, duration: float, report_figures: Any
) -> None:
    chaos = Chaos(engine, tmp_path, "fault points", size=3, faults=WORKER_FAULTS)
    try:
        chaos.start()

        def landed() -> bool:
            fired = {(f.point, f.action) for f in chaos.history().faults}
            wanted = {(point, "kill") for point in ("claim.before_commit", "outcome.before_commit")}
            wanted |= {("sql.after_commit", "raise")}
            return wanted <= fired and chaos.fleet.landed.self_kills > 0

        # The test process loses the replies of some enqueues' COMMITs too.
        with faults("sql.after_commit=raise@0.05", observe=chaos.recorder.fault):
            chaos.run(duration, until=landed)
        verdict = check(chaos)
    finally:
        chaos.close()
    report_figures(chaos.figures)
    fired = {(f.point, f.action) for f in h.read_history(chaos.history_dir).faults}
    assert {point for point, _ in fired} == set(w.workload_points()), fired
    assert ("outcome.before_commit", "kill") in fired
    assert ("claim.before_commit", "kill") in fired
    assert chaos.fleet.landed.self_kills > 0, chaos.fleet.landed
    assert verdict.violations == [], clean(verdict, chaos)


# -- SIGKILL and SIGSTOP of worker processes ------------------------------------------------------
@on("postgres")
def test_killed_and_stalled_workers(
    engine: Engine, tmp_path: Path, duration: float, report_figures: Any
) -> None:
    lease = 3.0
    chaos = Chaos(engine, tmp_path, "SIGKILL and SIGSTOP", size=3, lease=lease)
    pick = random.Random()
    stalls: list[threading.Thread] = []

    def disrupt(chaos: Chaos) -> None:
        running = [worker for worker in chaos.fleet.alive() if not worker.paused]
        if len(running) > 1 and not any(thread.is_alive() for thread in stalls):
            # Longer than the lease: its attempts are taken over, and when it resumes its
            # late outcomes must be fenced out. In a thread: kills go on meanwhile.
            victim = pick.choice(running)
            running.remove(victim)
            stall = threading.Thread(target=chaos.fleet.stall, args=(victim, lease * 1.5))
            stall.start()
            stalls.append(stall)
        if running:
            chaos.fleet.kill(pick.choice(running))

    def landed() -> bool:
        return chaos.fleet.landed.kills > 0 and chaos.fleet.landed.stalls > 0

    try:
        chaos.start()
        # Steps of 50 ms keep both threads of a worker busy: a stall catches them mid-step.
        chaos.run(duration, disrupt, every=2.0, until=landed, work=0.05)
        for stall in stalls:
            stall.join()
        verdict = check(chaos)
    finally:
        chaos.close()
    report_figures(chaos.figures)
    assert chaos.fleet.landed.kills > 0 and chaos.fleet.landed.stalls > 0, chaos.fleet.landed
    assert verdict.violations == [], clean(verdict, chaos)


# -- connections terminated by the server ---------------------------------------------------------
@on("mariadb", among=("postgres", "mariadb"))
def test_connections_killed_under_a_mixed_workload(
    engine: Engine, tmp_path: Path, duration: float, report_figures: Any
) -> None:
    chaos = Chaos(engine, tmp_path, "connections killed", size=3)

    def disrupt(chaos: Chaos) -> None:
        # Every connection of this test's own database: the workers' pools and listeners,
        # the enqueuer's; nothing of the other suites on the server.
        chaos.figures.connection_kills += chaos.engine.kill_connections()

    try:
        chaos.start()
        chaos.run(duration, disrupt, every=0.7, until=lambda: chaos.figures.connection_kills > 0)
        verdict = check(chaos)
    finally:
        chaos.close()
    report_figures(chaos.figures)
    assert chaos.figures.connection_kills > 0
    assert chaos.fleet.landed.deaths == [], chaos.fleet.logs()  # the workers outlive it
    assert verdict.violations == [], clean(verdict, chaos)


# -- a poison step --------------------------------------------------------------------------------
@on("sqlite")
def test_a_poison_step_is_abandoned_and_the_rest_flows(
    engine: Engine, tmp_path: Path, duration: float, full_profile: bool, report_figures: Any
) -> None:
    reclaims = 3 if full_profile else 1
    chaos = Chaos(engine, tmp_path, "poison step", size=3, lease=2.0, max_reclaims=reclaims)
    try:
        chaos.start()
        poison = chaos.enqueuer.enqueue(w.POISON)
        assert poison is not None

        def abandoned() -> bool:
            run = chaos.store.get_run(poison)
            return run is not None and run.state != "active"

        chaos.run(duration, until=abandoned)
        verdict = check(chaos, {w.POISON: h.Expected("failed", "Abandoned")})
    finally:
        chaos.close()
    report_figures(chaos.figures)
    history = h.read_history(chaos.history_dir)
    starts = [s for s in history.starts if s.run_id == poison]
    # The store took it back max_reclaims times, then abandoned it (the verdict checked the
    # run ended Abandoned). Each claim starts it once at most, and every start killed its
    # worker: max_reclaims + 1 of them, unless a worker too stalled to renew lost a claim
    # before it began (the one shortfall a busy machine may cause).
    poisoned = next(s for s in chaos.kept.steps if s.run_id == poison)
    assert poisoned.attempt == reclaims + 1, poisoned
    assert 1 <= len(starts) <= reclaims + 1, starts
    assert chaos.fleet.landed.self_kills == len({s.pid for s in starts}), chaos.fleet.landed
    assert verdict.violations == [], clean(verdict, chaos)
    others = [r for r in chaos.kept.runs if r.run_id != poison]
    assert others and all(r.state == "succeeded" for r in others)


# -- the Postgres notifier's listener -------------------------------------------------------------
@on("postgres", among=("postgres",))
def test_wake_ups_come_back_within_two_polls_after_the_listener_is_killed(
    engine: Engine, tmp_path: Path, duration: float, report_figures: Any
) -> None:
    assert isinstance(engine, PostgresEngine)
    poll = 8.0  # long: a run that starts within a fraction of it was woken by a notification
    chaos = Chaos(engine, tmp_path, "listener killed", size=2, poll=poll)
    rounds = max(3, int(duration / 2))
    sent: list[tuple[str, int, bool]] = []  # run id, enqueued at (ns), listeners back by then
    killed = 0
    try:
        chaos.start()
        wait_until(lambda: len(engine.listeners()) >= 2, timeout=30, what="both workers to listen")
        for _ in range(rounds):
            gone = engine.kill_listeners()
            killed += len(gone)
            at = time.time_ns()
            run = chaos.enqueuer.enqueue(w.STAMP)
            assert run is not None
            sent.append((run, at, False))
            wait_until(
                lambda gone=gone: len(engine.listeners() - gone) >= 2,
                timeout=2 * poll,
                what="both listeners back within two polls",
            )
            at = time.time_ns()
            run = chaos.enqueuer.enqueue(w.STAMP)
            assert run is not None
            sent.append((run, at, True))
            for run, _, _ in sent[-2:]:
                chaos.client.wait(cf.RunRef(run, w.STAMP), timeout=3 * poll)
        chaos.figures.connection_kills = killed
        verdict = check(chaos)
    finally:
        chaos.close()
    report_figures(chaos.figures)
    assert killed >= 2, "the listeners were not killed"
    starts = {s.run_id: s.at for s in h.read_history(chaos.history_dir).starts}
    late = {run: (starts[run] - at) / 1e9 for run, at, _ in sent}
    back = {run: late[run] for run, _, after in sent if after}
    # Never lost: even a run enqueued while the listeners were down started within two polls.
    assert max(late.values()) <= 2 * poll, late
    # And once the listeners were back, woken by notifications: far sooner than a poll.
    assert max(back.values()) < poll / 4, back
    assert chaos.fleet.log_count("listener reconnected") >= rounds, chaos.fleet.logs()
    assert verdict.violations == [], clean(verdict, chaos)


# -- server restarts (nox -s chaos only) ----------------------------------------------------------
@pytest.mark.chaos_restarts
@pytest.mark.parametrize(
    "engine",
    [pytest.param("postgres", marks=FULL), pytest.param("mariadb", marks=FULL)],
    indirect=True,
)
def test_server_restarts_under_load(
    engine: Engine, tmp_path: Path, duration: float, restarts: bool, report_figures: Any
) -> None:
    if not restarts:
        pytest.skip(f"server restarts are off ({RESTARTS_ENV}=1 turns them on; nox -s chaos does)")
    problem = engine.restart_problem()
    if problem is not None:
        pytest.skip(f"cannot restart the server here: {problem}")
    seconds = max(duration, 20.0)
    chaos = Chaos(engine, tmp_path, "server restarts", size=3, lease=5.0)

    def restart(chaos: Chaos) -> None:
        chaos.engine.restart()
        chaos.figures.restarts += 1

    try:
        chaos.start()
        chaos.run(seconds, restart, every=seconds / 3, until=lambda: chaos.figures.restarts >= 2)
        verdict = check(chaos)
    finally:
        chaos.close()
    report_figures(chaos.figures)
    assert chaos.figures.restarts >= 2
    assert verdict.violations == [], clean(verdict, chaos)
