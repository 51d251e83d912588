"""One chaos run: a workload on worker processes, disruptions beside it, then the verdict.

:class:`Chaos` migrates the test's database and installs the audit, starts
the fleet, and :meth:`Chaos.run` keeps a mixed workload flowing from the test
process (a bounded backlog: the machine's speed decides how many runs a
duration holds) while a disruptor thread breaks something every so often.
:meth:`Chaos.drain` then waits, with no new work and no new disruption, for
every run to finish (replacing workers that still die), and
:meth:`Chaos.verdict` stops the fleet cleanly and checks the history against
the store (:mod:`chaos_history`). :class:`Figures` is what a report quotes.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import chaos_history as h
import pytest
from chaos_engines import Engine
from chaos_fleet import Fleet
from chaos_workload import KEY_LABEL, Enqueuer, Recorder, nonce_of, workflows

import cairnflow as cf
from cairnflow.store import RunQuery

_UNFINISHED = frozenset(s for s in cf.Status if not s.finished)
"""Every active status: the runs not yet finished."""

__all__ = ["ENGINES", "FULL", "Chaos", "Figures", "on"]

FULL = pytest.mark.chaos_full
"""A test (or a parameter of one) the short profile leaves out."""

ENGINES = ("sqlite", "postgres", "mariadb")


def on(short: str, among: tuple[str, ...] = ENGINES) -> pytest.MarkDecorator:
    """Run on every engine of ``among``; the short profile keeps ``short`` only.

    The short profile (``nox -s tests``) runs each scenario once, the engines
    taking turns across scenarios; the full one (``nox -s chaos``) on every engine.
    """
    return pytest.mark.parametrize(
        "engine",
        [pytest.param(name, marks=() if name == short else FULL) for name in among],
        indirect=True,
    )


Disruption = Callable[["Chaos"], None]


@dataclass
class Figures:
    """What one chaos run did and found, per engine and scenario (the report's row)."""

    engine: str
    scenario: str
    seconds: float = 0.0
    runs: int = 0
    steps_committed: int = 0
    kills: int = 0
    """Worker processes SIGKILLed: by the test, by their own faults, by the poison step."""
    stalls: int = 0
    connection_kills: int = 0
    restarts: int = 0
    faults: int = 0
    """Fault points that fired (in the workers and the test process)."""
    re_executions: int = 0
    enqueues_unknown: int = 0
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    violations: int = 0

    def as_json(self) -> dict[str, Any]:
        """The row, as JSON."""
        return asdict(self)


class Chaos:
    """One chaos run on ``engine``'s database (see the module docstring)."""

    def __init__(self, engine: Engine, directory: Path, scenario: str, **fleet: Any) -> None:
        self.engine = engine
        self.directory = directory
        self.history_dir = directory / "history"
        self.figures = Figures(engine.name, scenario)
        store = engine.open_store()
        store.migrate()
        engine.install_audit()
        self.store = store
        self.recorder = Recorder(self.history_dir, "test")
        self.client = cf.Client(store, node_id="test-enqueuer")
        self.client.register(*workflows())
        self.enqueuer = Enqueuer(self.client, self.recorder)
        self.fleet = Fleet(engine.url, directory, options=dict(engine.store_options), **fleet)
        self.random = random.Random()
        self.errors: list[BaseException] = []
        self.kept = h.Stored()
        """What the store kept, as the verdict read it."""
        self._started = time.monotonic()

    # -- the workload and its disruptions ---------------------------------------------------------
    def start(self) -> None:
        """Start the fleet."""
        self.fleet.start()

    def active(self, limit: int) -> int:
        """How many runs are unfinished (counted up to ``limit``)."""
        page = self.store.list_runs(RunQuery(statuses=_UNFINISHED, limit=limit))
        return len(page.runs)

    def run(
        self,
        seconds: float,
        disrupt: Disruption | None = None,
        *,
        every: float = 1.0,
        until: Callable[[], bool] | None = None,
        backlog: int = 48,
        work: float = 0.01,
        mix: tuple[str, ...] = ("chaos-diamond", "chaos-diamond", "chaos-chain"),
    ) -> None:
        """Keep up to ``backlog`` runs of ``mix`` unfinished for ``seconds``; disrupt meanwhile.

        Each step works about ``work`` seconds (a longer step is likelier to be
        caught mid-flight).

        ``disrupt(chaos)`` runs every ``every`` seconds (give or take) in a thread of
        its own; after each one, dead workers are replaced. With ``until``, the run
        goes on past ``seconds`` until ``until()`` is true (what the test must see
        land, on a machine too busy to make it happen in time), four times as long
        at most.
        """
        started = time.monotonic()

        def going() -> bool:
            elapsed = time.monotonic() - started
            if elapsed < seconds:
                return True
            return until is not None and elapsed < 4 * seconds + 10 and not until()

        stop = threading.Event()
        thread = None
        if disrupt is not None:
            thread = threading.Thread(
                target=self._disrupt_loop, args=(disrupt, every, stop), name="chaos-disruptor"
            )
            thread.start()
        try:
            n = 0
            while going() and not self.errors:
                try:
                    room = backlog - self.active(backlog)
                except cf.Unavailable:
                    room = 0  # the database is being disrupted: try again shortly
                for _ in range(max(0, room)):
                    self.enqueuer.enqueue(mix[n % len(mix)], work)
                    n += 1
                if disrupt is None:
                    self.fleet.keep_up()
                time.sleep(0.1)
        finally:
            stop.set()
            if thread is not None:
                thread.join()
        if self.errors:
            raise self.errors[0]

    def _disrupt_loop(self, disrupt: Disruption, every: float, stop: threading.Event) -> None:
        try:
            while not stop.wait(self.random.uniform(0.5, 1.5) * every):
                disrupt(self)
                self.fleet.keep_up()
        except BaseException as error:  # the test thread raises it
            self.errors.append(error)

    # -- the end -------------------------------------------------------------------------------
    def drain(self, timeout: float = 180.0) -> None:
        """Wait for every run to finish (replacing dead workers), for ``timeout`` at most.

        A run still unfinished then is reported ``stuck`` by the verdict.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.fleet.keep_up()
            try:
                if self.active(1) == 0:
                    return
            except cf.Unavailable:
                pass
            time.sleep(0.2)

    def verdict(self, expected: Mapping[str, h.Expected] | None = None) -> h.Verdict:
        """Stop the fleet cleanly, read both accounts, check them; fill :attr:`figures`."""
        self.fleet.stop()
        history = h.read_history(self.history_dir)
        stored = self.stored()
        self.kept = stored
        verdict = h.check(history, stored, expected)
        counts = verdict.counts
        figures = self.figures
        figures.seconds = round(time.monotonic() - self._started, 1)
        figures.runs = counts["runs"]
        figures.steps_committed = counts["commits"]
        landed = self.fleet.landed
        figures.kills = landed.kills + landed.self_kills
        figures.stalls = landed.stalls
        figures.faults = counts["faults"]
        figures.re_executions = counts["re-executions"]
        figures.enqueues_unknown = counts["enqueues unknown"]
        figures.lost = counts[h.Kind.LOST.value]
        figures.duplicated = (
            counts[h.Kind.DUPLICATE_OUTCOME.value]
            + counts[h.Kind.FAN_IN_TWICE.value]
            + counts[h.Kind.LEASE_RAN_TWICE.value]
        )
        figures.stuck = counts[h.Kind.STUCK.value]
        figures.violations = len(verdict.violations)
        return verdict

    def stored(self) -> h.Stored:
        """Every run and step of the test's database, and the audit's commits."""
        stored = h.Stored(commits=self.engine.commits())
        cursor: str | None = None
        while True:
            page = self.store.list_runs(RunQuery(limit=500, cursor=cursor))
            for summary in page.runs:
                stored.runs.append(
                    h.StoredRun(
                        summary.id,
                        summary.workflow,
                        summary.labels.get(KEY_LABEL),
                        summary.state,
                        summary.error.type if summary.error is not None else None,
                    )
                )
                run = self.store.get_run(summary.id)
                assert run is not None, summary.id
                for step in run.steps:
                    nonce = nonce_of(step.output) if step.kind.value == "task" else None
                    stored.steps.append(
                        h.StoredStep(
                            run.id,
                            step.name,
                            step.status.value,
                            step.attempt,
                            step.parents,
                            nonce,
                        )
                    )
            cursor = page.cursor
            if cursor is None:
                return stored

    def history(self) -> h.History:
        """The history so far."""
        return h.read_history(self.history_dir)

    def close(self) -> None:
        """Kill what still runs, close the store."""
        self.fleet.close()
        self.recorder.close()
        self.store.close()
