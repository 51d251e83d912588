"""Schedules on the engine's side: recording declarations, firing ticks, reporting them.

Which ticks fire is decided by :func:`cairnflow.schedule.plan_ticks` from the
schedule's declaration, its *stored* next fire and "now", so every client that
looks reaches the same decision. The store makes it happen once: a pass hands
its plan to :meth:`~cairnflow.store.Schedules.fire_ticks`, which records the
ticks, creates the runs and moves the stored next fire in one transaction, but
only if the next fire is still the one the plan started from and no tick of
it was recorded yet. Of several clients firing the same tick, one writes and
the others are told nothing applied, so every tick fires once however many
clients run, with no leader to elect.

A declaration travels with its schedule as JSON (:func:`spec_of`), so a
schedule added at run time fires on any client that runs its workflow. The
``when`` predicate is code, not data: it is applied by the clients that
declared it (a schedule added at run time has none).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._models import Job, RunRef
from ..clock import from_ns
from ..schedule import (
    Misfire,
    MisfireKind,
    Overlap,
    Schedule,
    Tick,
    TickPlan,
    TickPredicate,
    TickReason,
    Window,
    plan_ticks,
    schedule_id,
)
from ..store import NewRun, ScheduleRecord, Schedules, TickOutcome, TickRecord
from ._state import EngineState

__all__ = [
    "SCHEDULE_LABEL",
    "ScheduleInfo",
    "Scheduler",
    "TickEvent",
    "schedule_from_spec",
    "spec_of",
]

SCHEDULE_LABEL = "cairnflow.schedule"
"""The label every run a schedule starts carries: the schedule's name."""

_PASSES = 8
"""Passes over due schedules one housekeeping round makes at most (each fires up to
:data:`cairnflow.schedule.MAX_TICKS_PER_PASS` ticks of a schedule)."""


@dataclass(frozen=True, slots=True)
class TickEvent:
    """One tick as the client that handled it reports it (``Client(on_tick=...)``)."""

    workflow: str
    schedule: str
    at_ns: int
    """The tick's instant (for a trigger: when it was triggered)."""
    outcome: TickOutcome
    """fired, skipped or misfired."""
    reason: str
    """Why: due, late, triggered; paused, window, overlap, when; missed, coalesced."""
    run: RunRef | None
    """The run a fired tick started."""
    node: str


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as stored, with what its declaration says (``Client.schedules()``)."""

    workflow: str
    name: str
    id: str
    cron: str
    tz: str
    next_fire_ns: int
    paused: bool
    last_fire_ns: int | None
    last_run: RunRef | None
    schedule: Schedule


def spec_of(schedule: Schedule) -> str:
    """The declaration of ``schedule`` as JSON, for the store (``ScheduleRecord.spec``); a
    tenant only when it has one, so a schedule without stores the spec it always did."""
    tenant = {} if schedule.tenant is None else {"tenant": schedule.tenant}
    return json.dumps(
        {
            **tenant,
            "cron": schedule.cron,
            "tz": schedule.tz,
            "payload": schedule.payload,
            "misfire": {
                "kind": schedule.misfire.kind.value,
                "window_seconds": schedule.misfire.window_seconds,
            },
            "overlap": schedule.overlap.value,
            "windows": [{"days": w.days, "start": w.start, "end": w.end} for w in schedule.windows],
            "labels": dict(schedule.labels),
        },
        sort_keys=True,
        ensure_ascii=False,
    )


def schedule_from_spec(name: str, spec: str) -> Schedule:
    """The :class:`~cairnflow.Schedule` a stored spec describes (checked again)."""
    data: dict[str, Any] = json.loads(spec)
    misfire = data.get("misfire", {})
    return Schedule(
        name,
        data["cron"],
        tz=data.get("tz", "UTC"),
        payload=data.get("payload"),
        misfire=Misfire(
            MisfireKind(misfire.get("kind", "fire_once")),
            misfire.get("window_seconds", Misfire.FIRE_ONCE.window_seconds),
        ),
        overlap=Overlap(data.get("overlap", "allow")),
        windows=tuple(Window(**w) for w in data.get("windows", ())),
        labels=data.get("labels", {}),
        tenant=data.get("tenant"),
    )


class Scheduler:
    """Fires the due schedules of one client's workflows (see the module docstring).

    ``make_run`` turns a :class:`~cairnflow.Job` into the run to create (the
    client's own rule, with its checks); ``on_tick`` hears of every tick this
    client handled, once it is written.
    """

    def __init__(
        self,
        state: EngineState,
        schedules: Schedules,
        make_run: Callable[[Job, int], NewRun],
        on_tick: Callable[[TickEvent], None] | None,
    ) -> None:
        self._state = state
        self._store = schedules
        self._make_run = make_run
        self._on_tick = on_tick

    # -- declarations -----------------------------------------------------------------------
    def record(self, workflow: str, schedule: Schedule, now: int) -> ScheduleRecord:
        """Store ``schedule`` of ``workflow``: new, or the same id updated (never a second row)."""
        stored = self._store.save_schedule(
            ScheduleRecord(
                id=schedule_id(workflow, schedule.name),
                workflow=workflow,
                name=schedule.name,
                spec=spec_of(schedule),
                fingerprint=schedule.fingerprint,
                next_fire=schedule.next_fire(now),
                paused=schedule.paused,
                created_at=now,
                updated_at=now,
            )
        )
        self._state.add_timer(stored.next_fire)
        return stored

    def record_declared(self) -> None:
        """Store every schedule the registered workflows declare (``Client.start()``)."""
        now = self._state.now()
        for workflow in list(self._state.registry.values()):
            for schedule in workflow.schedules.values():
                self.record(workflow.name, schedule, now)

    def declared(self, record: ScheduleRecord) -> tuple[Schedule, TickPredicate | None]:
        """The schedule a record describes, and its ``when`` where this client declared it."""
        workflow = self._state.registry.get(record.workflow)
        if workflow is not None:
            own = workflow.schedules.get(record.name)
            if own is not None and spec_of(own) == record.spec:
                return own, workflow.when_of(record.name)
        return schedule_from_spec(record.name, record.spec), None

    # -- firing -------------------------------------------------------------------------------
    def run_due(self, now: int) -> bool:
        """Fire what is due at ``now``; True when runs were started."""
        state = self._state
        started = False
        for _ in range(_PASSES):
            due = self._store.due_schedules(
                now=now, workflows=state.workflow_names, limit=state.settings.fetch_batch
            )
            again = False
            for record in due:
                fired, complete = self._fire(record, now)
                started = started or fired
                again = again or not complete
            if not again:
                break
        return started

    def prune(self, now: int) -> int:
        """Forget ticks recorded longer ago than the retention (each schedule keeps its newest)."""
        state = self._state
        before = now - int(state.settings.tick_retention * 1_000_000_000)
        return self._store.prune_ticks(before=before, limit=state.settings.fetch_batch * 10)

    def trigger(self, record: ScheduleRecord) -> RunRef:
        """Fire ``record`` now, outside its cron, once (its stored next fire stays)."""
        state = self._state
        now = state.now()
        schedule, _ = self.declared(record)
        tick = TickRecord(
            record.id, now, TickOutcome.FIRED, TickReason.TRIGGERED, state.settings.node_id, now
        )
        ids = self._store.fire_ticks(
            record.id,
            expected_next=None,
            next_fire=record.next_fire,
            ticks=[tick],
            runs=[self._run_of(record, schedule, now)],
        )
        if ids is None:
            raise RuntimeError(
                f"schedule {record.name!r} of workflow {record.workflow!r} was triggered twice "
                f"in the same nanosecond, or removed; try again"
            )
        self._report(record, [tick], ids)
        state.work_made_ready(others=True)
        return RunRef(ids[0], record.workflow)

    def _fire(self, record: ScheduleRecord, now: int) -> tuple[bool, bool]:
        """One pass over one schedule: (started runs, the plan was complete)."""
        state = self._state
        try:
            schedule, when = self.declared(record)
        except Exception:  # a spec this release cannot read: leave it to the others
            state.log.exception("schedule %r of %r cannot be read", record.name, record.workflow)
            return False, True
        plan = plan_ticks(
            schedule,
            record.next_fire,
            now,
            previous_unfinished=not record.last_run_finished,
            paused=record.paused,
            resumed_at_ns=record.resumed_at,
        )
        fire, held = self._apply_when(plan, schedule, when)
        node, recorded_at = state.settings.node_id, now
        ticks = [
            TickRecord(record.id, t.at_ns, TickOutcome.FIRED, t.reason, node, recorded_at)
            for t in fire
        ]
        ticks += [
            TickRecord(record.id, t.at_ns, TickOutcome.SKIPPED, t.reason, node, recorded_at)
            for t in (*plan.skipped, *held)
        ]
        ticks += [
            TickRecord(record.id, t.at_ns, TickOutcome.MISFIRED, t.reason, node, recorded_at)
            for t in plan.misfired
        ]
        runs = [self._run_of(record, schedule, now) for _ in fire]
        ids = self._store.fire_ticks(
            record.id,
            expected_next=record.next_fire,
            next_fire=plan.next_fire_ns,
            ticks=ticks,
            runs=runs,
        )
        if ids is None:
            return False, True  # another client handled this tick
        state.add_timer(plan.next_fire_ns)
        self._report(record, ticks, ids)
        if ids:
            state.work_made_ready(others=True)
        return bool(ids), plan.complete

    def _apply_when(
        self, plan: TickPlan, schedule: Schedule, when: TickPredicate | None
    ) -> tuple[list[Tick], list[Tick]]:
        """The ticks of ``plan.fire`` that ``when`` lets fire, and those it holds back."""
        if when is None:
            return list(plan.fire), []
        fire: list[Tick] = []
        held: list[Tick] = []
        for tick in plan.fire:
            try:
                go = bool(when(from_ns(tick.at_ns).astimezone(schedule.zone)))
            except Exception:  # a failing predicate holds its tick back (logged)
                self._state.log.exception("the when predicate of %r failed", schedule.name)
                go = False
            if go:
                fire.append(tick)
            else:
                held.append(Tick(tick.at_ns, TickReason.WHEN))
        return fire, held

    def _run_of(self, record: ScheduleRecord, schedule: Schedule, now: int) -> NewRun:
        labels = {**schedule.labels, SCHEDULE_LABEL: record.name}
        job = Job(record.workflow, schedule.payload, labels=labels, tenant=schedule.tenant)
        return self._make_run(job, now)

    def _report(self, record: ScheduleRecord, ticks: list[TickRecord], run_ids: list[str]) -> None:
        """Tell ``on_tick`` of every tick written (fired ones with their runs, in order)."""
        if self._on_tick is None:
            return
        runs = iter(run_ids)
        for tick in ticks:
            run = None
            if tick.outcome is TickOutcome.FIRED:
                run = RunRef(next(runs), record.workflow)
            event = TickEvent(
                record.workflow, record.name, tick.at, tick.outcome, tick.reason, run, tick.node
            )
            try:
                self._on_tick(event)
            except Exception:  # the listener's bug must not stop the schedules
                self._state.log.exception("on_tick failed for %r", event)
