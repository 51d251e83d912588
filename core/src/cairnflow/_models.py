"""The values the client hands back: statuses, run references, run and step info."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from ._errors import ErrorInfo
from .clock import from_ns

__all__ = [
    "LIFECYCLE_ALL",
    "LIFECYCLE_EVENTS",
    "LIFECYCLE_FAILURES",
    "LIFECYCLE_KINDS",
    "STEP_HISTORY_KEEP",
    "ErrorInfo",
    "Job",
    "LifecycleEvent",
    "LifecycleSubscription",
    "RunError",
    "RunFailure",
    "RunInfo",
    "RunRef",
    "Status",
    "StepEvent",
    "StepInfo",
    "StepKind",
    "StepStatus",
]


class Status(StrEnum):
    """The status of a run.

    ``pending``: its start is delayed into the future. ``queued``: a step is
    ready and none runs. ``running``: a step attempt runs. ``waiting``: every
    unfinished step sleeps or waits for a signal (no worker is held).
    The rest are final.

    The one run vocabulary applications see. A store keeps less: a run's stored
    state is :data:`cairnflow.store.ACTIVE` or one of the final values here, and
    the four active statuses are derived from its steps' :class:`StepStatus`
    (:func:`cairnflow.store.derive_status`), so no write ever has to keep a
    run's status in step with its steps.
    """

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DISCARDED = "discarded"

    @property
    def finished(self) -> bool:
        """True for a final status."""
        return self in _FINAL


_FINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.DISCARDED})


class StepStatus(StrEnum):
    """The status of one step of a run.

    ``blocked``: a parent has not succeeded yet. ``scheduled``: due later (a
    delayed start, a retry's backoff, a snooze); it becomes ``ready`` when due.
    ``ready``: claimable now. ``running``: an attempt holds its lease.
    ``sleeping``/``waiting``: a sleep or wait step, holding no worker.
    The rest are final: ``succeeded``, ``failed``, ``cancelled``, and
    ``timed_out`` (a wait whose timeout passed and whose run went on down its
    ``on_timeout`` branch, ``Cap.WAIT_BRANCH``) and ``skipped`` (a step that
    will not run: a branch not taken, a step downstream of a wait that timed
    out onto its branch, or a compensation step, ``Cap.COMPENSATION``, while
    its run has not failed: the one final status a step leaves again, when its
    run fails and the step it compensates had succeeded).

    Stored as it is by every store: the one step vocabulary. (How one *attempt*
    of a running step ends is the engine's :class:`~cairnflow._engine._attempt.End`;
    whether its lease still holds is :class:`~cairnflow.store.AttemptState`.)
    """

    BLOCKED = "blocked"
    SCHEDULED = "scheduled"
    READY = "ready"
    RUNNING = "running"
    SLEEPING = "sleeping"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"

    @property
    def finished(self) -> bool:
        """True once the step will not change again (see ``skipped`` for its one exception)."""
        return self in _STEP_FINAL


_STEP_FINAL = frozenset(
    {
        StepStatus.SUCCEEDED,
        StepStatus.FAILED,
        StepStatus.CANCELLED,
        StepStatus.TIMED_OUT,
        StepStatus.SKIPPED,
    }
)


class StepKind(StrEnum):
    """What a step is: user code, a durable sleep or a wait for a signal.

    Two kinds of user code run only on a failure path: ``branch``, run when the
    wait naming it in ``on_timeout`` timed out (``Cap.WAIT_BRANCH``), and
    ``compensation``, run when its run failed after the step it compensates had
    succeeded (``Cap.COMPENSATION``).
    """

    TASK = "task"
    SLEEP = "sleep"
    WAIT = "wait"
    BRANCH = "branch"
    COMPENSATION = "compensation"

    @property
    def runs_code(self) -> bool:
        """True for the kinds whose steps run a function ``fn(ctx, data)``."""
        return self not in (StepKind.SLEEP, StepKind.WAIT)


@dataclass(frozen=True, slots=True)
class RunRef:
    """A reference to one run: what ``enqueue`` returns and other calls take."""

    id: str
    workflow: str

    def __str__(self) -> str:
        return self.id


@dataclass(frozen=True, slots=True)
class Job:
    """One run to enqueue, as an application says it (:meth:`Client.enqueue_many`).

    The workflow's name, the payload as a Python value, a delay relative to
    now, and a ``queue`` that overrides the workflow's (``Cap.QUEUE_OVERRIDE``).
    The client *prepares* it for the store as a :class:`cairnflow.store.NewRun`:
    payload encoded, steps, queue and priority resolved from the workflow, times
    made absolute. Two stages of one request,
    as ``requests`` has a ``Request`` and its ``PreparedRequest``; the store never
    sees a ``Job``, and an application never builds a ``NewRun``.
    """

    workflow: str
    payload: Any = None
    key: str | None = None
    delay: float | None = None
    labels: Mapping[str, str] | None = None
    queue: str | None = None
    headers: Mapping[str, str] | None = None
    """Headers kept with the run and read by its steps as ``ctx.headers`` (``Cap.HEADERS``)."""
    tenant: str | None = None
    """The tenant the run belongs to (``Cap.TENANT``): filtered on, read by its steps as
    ``ctx.tenant``, and the owner of its per-tenant concurrency keys and rate buckets."""


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What the store knows of one step of a run."""

    name: str
    kind: StepKind
    status: StepStatus
    attempts: int
    failures: int
    reclaims: int
    output: Any = None
    error: ErrorInfo | None = None
    node: str | None = None
    progress: Any = None
    due_at_ns: int | None = None
    started_at_ns: int | None = None
    finished_at_ns: int | None = None
    heartbeat_at_ns: int | None = None

    @property
    def started_at(self) -> datetime | None:
        """When the latest attempt was claimed (UTC)."""
        return None if self.started_at_ns is None else from_ns(self.started_at_ns)

    @property
    def finished_at(self) -> datetime | None:
        """When the step reached a final status (UTC)."""
        return None if self.finished_at_ns is None else from_ns(self.finished_at_ns)

    @property
    def heartbeat_at(self) -> datetime | None:
        """When the step last heartbeat (UTC)."""
        return None if self.heartbeat_at_ns is None else from_ns(self.heartbeat_at_ns)


LIFECYCLE_EVENTS = "events"
"""The lifecycle channel the ``Client.on_event`` subscribers of a fleet share (Cap.LIFECYCLE)."""
LIFECYCLE_FAILURES = "on_failure"
"""The lifecycle channel of ``on_failure`` handlers: one ``run.failed`` row per failed run."""
LIFECYCLE_ALL = ""
"""The workflow of a subscription to every workflow (no workflow name is empty)."""
LIFECYCLE_KINDS = frozenset(
    {
        "run.started",
        "run.succeeded",
        "run.failed",
        "run.cancelled",
        "run.discarded",
        "step.started",
        "step.succeeded",
        "step.failed",
        "step.retried",
        "step.reclaimed",
        "step.cancelled",
    }
)
"""Every kind of :class:`LifecycleEvent`."""


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    """A run or step event, read from the store's lifecycle outbox (``Cap.LIFECYCLE``).

    ``kind`` is one of :data:`LIFECYCLE_KINDS`: ``run.started`` (the first attempt of
    the run's first step began), ``run.succeeded``, ``run.failed``, ``run.cancelled``,
    ``run.discarded``; ``step.started`` (an attempt was claimed), ``step.succeeded``,
    ``step.failed`` (out of retries), ``step.retried`` (failed, to run again),
    ``step.reclaimed`` (its lease ran out and it went back to be claimed again),
    ``step.cancelled``. ``step`` is None for a run's events; ``error`` is the error of a
    failure (a step's failure, or the one that failed the run). ``id`` orders the events
    of one store as their transactions wrote them (not strictly: see docs/lifecycle.md);
    ``deliveries`` counts the times it was handed to a client (more than 1: a client
    that had it died or stalled before it acknowledged it).
    """

    id: int
    kind: str
    run_id: str
    workflow: str
    step: str | None
    attempt: int
    node: str | None
    at_ns: int
    """When it was recorded (Unix nanoseconds; SQL stores: the database's clock)."""
    error: ErrorInfo | None = None
    deliveries: int = 1

    @property
    def at(self) -> datetime:
        """When it was recorded (UTC)."""
        return from_ns(self.at_ns)


@dataclass(frozen=True, slots=True)
class LifecycleSubscription:
    """A durable subscription to the lifecycle outbox, as the store records it (``Cap.LIFECYCLE``).

    ``channel`` is :data:`LIFECYCLE_EVENTS` (``Client.on_event``) or
    :data:`LIFECYCLE_FAILURES` (``on_failure`` handlers); ``workflow`` the workflow it
    covers, :data:`LIFECYCLE_ALL` (``""``) for every one. ``since_ns``: when it was
    first recorded. ``backlog``: the rows of its channel it covers not yet acknowledged
    (those of its workflow, or every row of the channel for ``""``; a row under a lease
    counts until its client acknowledges it), and ``oldest_ns`` when the oldest of them
    was recorded (None: no backlog). A backlog that only grows is a subscription no
    running client serves: ``Client.drop_lifecycle_subscription`` ends it.
    """

    channel: str
    workflow: str
    since_ns: int
    backlog: int
    oldest_ns: int | None

    @property
    def since(self) -> datetime:
        """When the subscription was first recorded (UTC)."""
        return from_ns(self.since_ns)

    @property
    def oldest(self) -> datetime | None:
        """When the oldest row of the backlog was recorded (UTC; None: no backlog)."""
        return None if self.oldest_ns is None else from_ns(self.oldest_ns)


@dataclass(frozen=True, slots=True)
class RunFailure:
    """What a workflow's ``on_failure`` handler is given: one failed run (``Cap.LIFECYCLE``).

    ``payload`` is the run's, decoded; ``step`` and ``error`` name the step whose
    failure failed the run and its error (None for a run failed by its deadline
    without a step's error); ``attempt`` counts the times this failure was handed
    to a handler (more than 1: an earlier handler raised, died or stalled).
    """

    run_id: str
    workflow: str
    payload: Any
    step: str | None
    error: ErrorInfo | None
    attempt: int
    event: LifecycleEvent


STEP_HISTORY_KEEP = 100
"""The transitions a run keeps (``Cap.STEP_HISTORY``): every transition but a claim drops
the run's older ones, so a run holds at most this many plus its attempts running now."""


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One transition of a step, as a run's step history keeps it (``Cap.STEP_HISTORY``).

    ``event`` is one of ``claimed``, ``succeeded``, ``failed``, ``retried``
    (failed, to run again), ``reclaimed`` (its lease ran out and another
    client took it back), ``snoozed`` (asked to run later, or handed back by a
    stopping client), ``sleeping``, ``waiting``, ``cancelled`` and ``reopened``
    (an operator retried it). ``seq`` orders a run's transitions as recorded;
    ``attempt`` is the step's attempt then, ``node`` the node of its claim.
    """

    seq: int
    step: str
    attempt: int
    event: str
    node: str | None
    at_ns: int
    """When it was recorded (Unix nanoseconds; SQL stores: the database's clock)."""

    @property
    def at(self) -> datetime:
        """When it was recorded (UTC)."""
        return from_ns(self.at_ns)


@dataclass(frozen=True, slots=True)
class RunError:
    """One failed attempt of a run, as its error history keeps it (``Cap.ERROR_HISTORY``).

    A run keeps the errors of its last N failed attempts (``error_history``,
    default 20), newest first when read (:meth:`cairnflow.Client.errors`).
    ``seq`` numbers a run's recorded errors from 1, in the order they were
    recorded. A step that failed and later succeeded keeps its errors here,
    as history; its output is still its result.
    """

    seq: int
    step: str
    attempt: int
    node: str | None
    at_ns: int
    """When the failure was recorded (Unix nanoseconds, the recording client's clock)."""
    error: ErrorInfo

    @property
    def type(self) -> str:
        """The exception's type name."""
        return self.error.type

    @property
    def message(self) -> str:
        """The exception's message."""
        return self.error.message

    @property
    def traceback(self) -> str | None:
        """The formatted traceback, when there was one."""
        return self.error.traceback

    @property
    def at(self) -> datetime:
        """When the failure was recorded (UTC)."""
        return from_ns(self.at_ns)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A snapshot of one run: its status, result, error and every step."""

    id: str
    workflow: str
    queue: str
    status: Status
    payload: Any
    key: str | None
    labels: Mapping[str, str]
    created_at_ns: int
    run_at_ns: int
    finished_at_ns: int | None
    steps: Mapping[str, StepInfo] = field(default_factory=dict)
    result: Any = None
    error: ErrorInfo | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The headers given at enqueue and added by the client's enqueue hooks (``Cap.HEADERS``)."""
    tenant: str | None = None
    """The run's tenant (``Cap.TENANT``), None for a run without one."""

    @property
    def ref(self) -> RunRef:
        """A :class:`RunRef` to this run."""
        return RunRef(self.id, self.workflow)

    @property
    def finished(self) -> bool:
        """True once the run has a final status."""
        return self.status.finished

    @property
    def created_at(self) -> datetime:
        """When the run was enqueued (UTC)."""
        return from_ns(self.created_at_ns)

    @property
    def run_at(self) -> datetime:
        """When the run may start (UTC); later than ``created_at`` for a delayed start."""
        return from_ns(self.run_at_ns)

    @property
    def finished_at(self) -> datetime | None:
        """When the run reached its final status (UTC)."""
        return None if self.finished_at_ns is None else from_ns(self.finished_at_ns)
