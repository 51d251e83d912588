"""The schedule methods of :class:`~cairnflow.Client`, in a module of their own.

Every method works from any client, also one never started (an operator's
script, a web process): schedules are rows, and each call is one store
operation of the ``Schedules`` facet. A store without it refuses each call
with :class:`~cairnflow.Unsupported`, naming the capability.
"""

from __future__ import annotations

from .._caps import Cap
from .._checks import check_int
from .._errors import CairnError, UnknownWorkflow
from .._models import RunRef
from .._names import check_name
from ..schedule import Schedule, schedule_id
from ..store import ScheduleRecord, Schedules
from ..workflow import Workflow, schedule_capabilities
from ._scheduler import ScheduleInfo, Scheduler, TickEvent, schedule_from_spec
from ._state import EngineState

__all__ = ["ScheduleMethods", "ScheduleNotFound"]

WorkflowLike = Workflow | str


class ScheduleNotFound(CairnError, LookupError):
    """No schedule of that name is stored for that workflow."""

    def __init__(self, workflow: str, name: str) -> None:
        super().__init__(f"workflow {workflow!r} has no stored schedule named {name!r}")
        self.workflow = workflow
        self.name = name


class ScheduleMethods:
    """Adding, listing, pausing, triggering schedules, and reading their ticks."""

    _state: EngineState
    _scheduler: Scheduler | None

    def _schedules(self, cap: Cap, what: str) -> tuple[Schedules, Scheduler]:
        self._state.require(cap, what)
        facets = self._state.facets
        # Declared (required above), so check_store made sure the facet is there.
        assert facets.schedules is not None
        assert self._scheduler is not None
        return facets.schedules, self._scheduler

    def _record(self, workflow: WorkflowLike, name: str, cap: Cap, what: str) -> ScheduleRecord:
        store, _ = self._schedules(cap, what)
        workflow_name = _name_of(workflow)
        check_name("schedule", name)
        wanted = schedule_id(workflow_name, name)
        for record in store.list_schedules([workflow_name]):
            if record.id == wanted:
                return record
        raise ScheduleNotFound(workflow_name, name)

    def add_schedule(self, workflow: WorkflowLike, schedule: Schedule) -> ScheduleInfo:
        """Store ``schedule`` for ``workflow`` now, or update the one of that name.

        Any client that runs ``workflow`` fires it (its ``when``, being code,
        comes only with a declaration: ``Workflow.schedule``).
        """
        if not isinstance(schedule, Schedule):
            raise TypeError(f"add_schedule() takes a cairnflow.Schedule, got {schedule!r}")
        workflow_name = _name_of(workflow)
        for cap, why in schedule_capabilities(schedule, f"schedule {schedule.name!r}").items():
            self._state.require(cap, why)
        _, scheduler = self._schedules(Cap.CRON, "add_schedule()")
        stored = scheduler.record(workflow_name, schedule, self._state.now())
        return _info(stored, schedule)

    def remove_schedule(self, workflow: WorkflowLike, name: str) -> bool:
        """Delete the schedule ``name`` of ``workflow`` and its ticks; False if there was none.

        A schedule declared with a workflow is stored again by the next
        ``Client.start()`` that registers it: remove the declaration too.
        """
        store, _ = self._schedules(Cap.CRON, "remove_schedule()")
        check_name("schedule", name)
        return store.remove_schedule(schedule_id(_name_of(workflow), name))

    def schedules(self, workflow: WorkflowLike | None = None) -> list[ScheduleInfo]:
        """Every stored schedule (of ``workflow``), with its next fire, pause and last fire."""
        store, _ = self._schedules(Cap.SCHEDULE_LIST, "schedules()")
        names = None if workflow is None else [_name_of(workflow)]
        return [_info(r, schedule_from_spec(r.name, r.spec)) for r in store.list_schedules(names)]

    def pause_schedule(self, workflow: WorkflowLike, name: str) -> None:
        """Pause a schedule on every client: its ticks never fire, not even after resuming."""
        record = self._record(workflow, name, Cap.SCHEDULE_PAUSE, "pause_schedule()")
        store, _ = self._schedules(Cap.SCHEDULE_PAUSE, "pause_schedule()")
        store.set_schedule_paused(record.id, True, self._state.now())

    def resume_schedule(self, workflow: WorkflowLike, name: str) -> None:
        """Resume a paused schedule: it fires again from its next tick after now."""
        record = self._record(workflow, name, Cap.SCHEDULE_PAUSE, "resume_schedule()")
        store, _ = self._schedules(Cap.SCHEDULE_PAUSE, "resume_schedule()")
        store.set_schedule_paused(record.id, False, self._state.now())
        self._state.wake()

    def trigger_schedule(self, workflow: WorkflowLike, name: str) -> RunRef:
        """Fire a schedule now, outside its cron, once; return the run it started.

        The workflow must be registered on this client (the run is made here).
        """
        record = self._record(workflow, name, Cap.SCHEDULE_TRIGGER, "trigger_schedule()")
        if record.workflow not in self._state.registry:
            raise UnknownWorkflow(record.workflow, list(self._state.registry))
        _, scheduler = self._schedules(Cap.SCHEDULE_TRIGGER, "trigger_schedule()")
        return scheduler.trigger(record)

    def schedule_history(
        self, workflow: WorkflowLike, name: str, *, limit: int = 20
    ) -> list[TickEvent]:
        """The schedule's last ``limit`` ticks, newest first: fired, skipped and misfired."""
        check_int("limit", limit, minimum=1, maximum=1000)
        record = self._record(workflow, name, Cap.SCHEDULE_HISTORY, "schedule_history()")
        store, _ = self._schedules(Cap.SCHEDULE_HISTORY, "schedule_history()")
        return [
            TickEvent(
                record.workflow,
                record.name,
                tick.at,
                tick.outcome,
                tick.reason,
                None if tick.run_id is None else RunRef(tick.run_id, record.workflow),
                tick.node,
            )
            for tick in store.schedule_history(record.id, limit)
        ]


def _name_of(workflow: WorkflowLike) -> str:
    if isinstance(workflow, Workflow):
        return workflow.name
    return check_name("workflow", workflow)


def _info(record: ScheduleRecord, schedule: Schedule) -> ScheduleInfo:
    return ScheduleInfo(
        workflow=record.workflow,
        name=record.name,
        id=record.id,
        cron=schedule.cron,
        tz=schedule.tz,
        next_fire_ns=record.next_fire,
        paused=record.paused,
        last_fire_ns=record.last_fire,
        last_run=(
            None if record.last_run_id is None else RunRef(record.last_run_id, record.workflow)
        ),
        schedule=schedule,
    )
