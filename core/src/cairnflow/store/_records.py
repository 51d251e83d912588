"""The records that cross the Store SPI.

Everything here is plain data: bytes for payloads and outputs (the client's
codec made them), integer Unix nanoseconds for every time, and
:class:`~cairnflow.ErrorInfo` for failures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .._checks import check_int
from .._errors import InvalidQuery
from .._models import ErrorInfo, Status, StepKind, StepStatus
from .._names import check_labels, check_name, check_tenant
from .._queues import DEFAULT_QUEUE
from .._rates import Rate

__all__ = [
    "ACTIVE",
    "MAX_PAGE",
    "RETRYABLE",
    "AdvanceResult",
    "AttemptState",
    "ClaimRequest",
    "ClaimedAttempt",
    "ConcurrencyKey",
    "ExpiredAttempt",
    "Failed",
    "FinishResult",
    "HeldLock",
    "Leader",
    "NewRun",
    "NewStep",
    "Outcome",
    "Pause",
    "PauseKind",
    "QueueClaim",
    "ReclaimResult",
    "RenewResult",
    "Reopened",
    "RunPage",
    "RunQuery",
    "RunSummary",
    "ScheduleRecord",
    "SignalResult",
    "SleepUntil",
    "Snoozed",
    "StoreInfo",
    "StoredRun",
    "StoredStep",
    "Succeeded",
    "TickOutcome",
    "TickRecord",
    "WaitFor",
    "cancelled_step_error",
    "cursor_position",
    "derive_status",
    "label_prefix_bounds",
    "run_cursor",
]

ACTIVE = "active"
"""The stored state of a run that has not finished; the rest are final :class:`Status` values.

A store keeps only ``active`` and the final statuses: the finer active statuses
applications see (pending, queued, running, waiting) are derived from the steps
by :func:`derive_status` when a run is read."""


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What a store says about itself (``cairn drivers``, conformance reports)."""

    driver: str
    distribution: str
    version: str
    url: str
    durable: bool
    server: str | None = None


@dataclass(frozen=True, slots=True)
class NewStep:
    """One step row to create with its run; the DAG is captured at enqueue."""

    name: str
    kind: StepKind
    parents: tuple[str, ...]
    children: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConcurrencyKey:
    """A step's concurrency key (``Cap.CONCURRENCY_KEY``), computed at enqueue.

    At most ``limit`` attempts of steps carrying ``name`` run at once across every
    client; with ``fifo`` (``Cap.KEY_FIFO``) the runs sharing the key run one after
    the other, in enqueue order. Keys are one namespace across workflows: two
    workflows giving the same name share its count (docs/claim.md, 4).
    """

    name: str
    limit: int
    fifo: bool = False


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to create, as the client prepared it from a :class:`cairnflow.Job` (or a
    schedule's tick): named, the payload encoded, the workflow's steps, queue and
    priority resolved, times absolute. Root steps start ready and due at ``run_at``.

    The client names the run (``id``) and its step rows (``step_ids``) before
    anything is written, so a write whose commit outcome is unknown can be sent
    again under the same names and recognised if it landed
    (:meth:`cairnflow.store.Store.create_runs`).
    """

    id: str
    """The run's id, made by the client's id generator."""
    workflow: str
    queue: str
    priority: int
    payload: bytes
    steps: tuple[NewStep, ...]
    step_ids: tuple[str, ...]
    """An id for each step's row, in the order of ``steps`` (a store that keys its steps
    by run and name has no use for them)."""
    created_at: int
    run_at: int
    key: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    closure: Callable[..., Any] | None = None
    """A Python callable to run as the one step (``Cap.CLOSURE``; in-process stores only)."""
    keys: tuple[ConcurrencyKey | None, ...] = ()
    """The concurrency key of each step, in the order of ``steps`` (``Cap.CONCURRENCY_KEY``);
    empty: no step has one. A fifo key (``Cap.KEY_FIFO``) is the same on every step."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers kept with the run (``Cap.HEADERS``), empty for most runs; a store that does
    not declare the capability never receives any."""
    tenant: str | None = None
    """The run's tenant (``Cap.TENANT``), checked; a store that does not declare the
    capability never receives one."""

    def __post_init__(self) -> None:
        if len(self.step_ids) != len(self.steps):
            raise ValueError(
                f"run {self.id!r} has {len(self.steps)} step(s) and {len(self.step_ids)} step id(s)"
            )
        if self.keys and len(self.keys) != len(self.steps):
            raise ValueError(
                f"run {self.id!r} has {len(self.steps)} step(s) and {len(self.keys)} key(s)"
            )

    @property
    def fifo_key(self) -> str | None:
        """The run's fifo key (``Cap.KEY_FIFO``): the name of its steps' fifo key, if any."""
        for key in self.keys:
            if key is not None and key.fifo:
                return key.name
        return None


@dataclass(frozen=True, slots=True)
class QueueClaim:
    """One queue of a claim: at most ``limit`` of its ready steps (None: up to the request's).

    ``global_limit`` (``Cap.QUEUE_LIMIT_GLOBAL``): the claim takes at most
    ``global_limit`` minus the queue's attempts running on every client; None: no
    such limit. ``rate`` (``Cap.RATE_LIMIT``): the claim takes at most the tokens
    the queue's bucket holds at ``now`` and charges the bucket for what it took,
    in the claim's transaction (:mod:`cairnflow._rates`); None: no such limit.
    """

    name: str
    limit: int | None = None
    global_limit: int | None = None
    rate: Rate | None = None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Claim up to ``limit`` ready attempts that are due at ``now``, from ``queues``.

    ``queues`` are claimed in their order (highest priority first), each for at
    most its own limit and together for at most ``limit``: a queue earlier in
    the order is drained first, a later one gets what the earlier could not
    fill. There is no claim of "every queue": a client always names the queues
    it serves (the default: the default queue). ``lease_until`` is on the lease
    clock.
    """

    workflows: frozenset[str]
    limit: int
    now: int
    lease_until: int
    node_id: str
    queues: tuple[QueueClaim, ...] = (QueueClaim(DEFAULT_QUEUE),)
    keys: bool = False
    """Honour the steps' concurrency keys (``Cap.CONCURRENCY_KEY``, ``Cap.KEY_FIFO``): set
    by a client one of whose workflows declares one. False keeps the plain claim; steps
    carrying a key are then claimed as if they carried none."""


@dataclass(frozen=True, slots=True)
class ClaimedAttempt:
    """A claimed step attempt and everything needed to run it."""

    token: str
    run_id: str
    workflow: str
    queue: str
    step: str
    kind: StepKind
    attempt: int
    """This claim's number for the step, 1-based (claims, not failures)."""
    failures: int
    reclaims: int
    payload: bytes
    inputs: Mapping[str, bytes]
    """The outputs of the step's parents, by parent name."""
    labels: Mapping[str, str]
    closure: Callable[..., Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The run's headers (``Cap.HEADERS``)."""
    tenant: str | None = None
    """The run's tenant (``Cap.TENANT``)."""


@dataclass(frozen=True, slots=True)
class Succeeded:
    """The attempt returned ``output``: dependents whose parents all succeeded become ready."""

    output: bytes


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed. ``retry_at`` makes the step ready again then; None fails the run.

    The rest is the failure policy the store judges in the transaction that
    records the failure, the run row locked (so it holds across clients):

    - ``max_errors`` (``Cap.RETRY_MAX_ERRORS``): the retry is not made when the
      run's failed attempts, this one included (the sum of its steps'
      ``failures``), reach it.
    - ``retry_deadline`` (``Cap.RETRY_UNTIL``): the retry is not made when
      ``retry_at`` falls after it (Unix ns); ``retry_window``: nor after the
      run's ``run_at`` plus that many nanoseconds.
    - ``discard`` (``Cap.DISCARD``): a step that ran out of retries (by count,
      or by one of the rules above) ends its run ``discarded``, not ``failed``.

    ``keep_errors`` (``Cap.ERROR_HISTORY``, 0: none): the store records the
    failure in the run's error history (:class:`~cairnflow.RunError`: step and
    attempt from ``error``, ``node``, the time ``now``) in the same
    transaction, and keeps the newest ``keep_errors`` of the run's errors.

    A store that does not declare those capabilities never receives them: the
    client refuses the workflows that ask for them.
    """

    error: ErrorInfo
    retry_at: int | None = None
    discard: bool = False
    max_errors: int | None = None
    retry_deadline: int | None = None
    retry_window: int | None = None
    keep_errors: int = 0
    node: str | None = None

    @property
    def judged(self) -> bool:
        """True when the retry stands only if :meth:`retry_stands` says so (read the run)."""
        return self.retry_at is not None and (
            self.max_errors is not None
            or self.retry_deadline is not None
            or self.retry_window is not None
        )

    def retry_stands(self, run_at: int, failures: int) -> bool:
        """True when the retry is made, for a run due at ``run_at`` whose steps had
        ``failures`` failed attempts before this one."""
        retry_at = self.retry_at
        if retry_at is None:
            return False
        if self.max_errors is not None and failures + 1 >= self.max_errors:
            return False
        if self.retry_deadline is not None and retry_at > self.retry_deadline:
            return False
        return self.retry_window is None or retry_at <= run_at + self.retry_window

    @property
    def final_status(self) -> Status:
        """What the run becomes when this failure is final."""
        return Status.DISCARDED if self.discard else Status.FAILED


@dataclass(frozen=True, slots=True)
class Snoozed:
    """The step asked to run again at ``until``; not a failure."""

    until: int


@dataclass(frozen=True, slots=True)
class SleepUntil:
    """A sleep step registers: it succeeds with ``output`` once ``until`` is due."""

    until: int
    output: bytes


@dataclass(frozen=True, slots=True)
class WaitFor:
    """A wait step registers for ``signal``; a stored signal resolves it in this transaction.

    ``deadline`` (None: no deadline) fails the step with StepTimeout once due.
    """

    signal: str
    deadline: int | None


Outcome = Succeeded | Failed | Snoozed | SleepUntil | WaitFor


class AttemptState(StrEnum):
    """The verdict of a fenced write: does the lease token still hold its attempt?

    Not a step status: ``HELD`` means the step is ``running`` under this token
    and the write applied; ``LOST`` that another client took the step over (or
    it finished), so nothing was written; ``CANCELLED`` that the run or step was
    cancelled under this holder. The engine turns a verdict into an
    :class:`~cairnflow._engine._attempt.End` of its running attempt.
    """

    HELD = "held"
    LOST = "lost"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class FinishResult:
    """What a fenced ``finish`` did.

    ``state`` is HELD when the outcome was written; LOST or CANCELLED when the
    token no longer held the attempt and nothing was written. ``ready`` counts
    steps made ready at once (wake a dispatcher); ``run_status`` is the run's
    final status when this transaction finished it (a SQL store says SUCCEEDED for
    a run that ends cancelled because an operator cancelled one of its steps,
    ``Cap.CANCEL_STEP``: what the engine reads is that it finished).
    """

    state: AttemptState
    ready: int = 0
    run_status: Status | None = None

    @property
    def applied(self) -> bool:
        """True when the outcome was written."""
        return self.state is AttemptState.HELD


@dataclass(frozen=True, slots=True)
class RenewResult:
    """Tokens whose renewal did not land, split by why."""

    lost: frozenset[str] = frozenset()
    cancelled: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ExpiredAttempt:
    """A running attempt whose lease expired once too often (see ``max_reclaims``)."""

    token: str
    run_id: str
    workflow: str
    step: str
    attempt: int
    failures: int
    reclaims: int


@dataclass(frozen=True, slots=True)
class ReclaimResult:
    """``requeued`` attempts were made ready again; ``abandoned`` are for the engine to fail."""

    requeued: int = 0
    abandoned: tuple[ExpiredAttempt, ...] = ()


class SignalResult(StrEnum):
    """What became of a signal."""

    DELIVERED = "delivered"
    """It resolved a waiting step at once."""
    STORED = "stored"
    """It is kept until a wait step for it becomes ready."""
    RUN_FINISHED = "run_finished"
    """The run had finished; nothing was stored."""


@dataclass(frozen=True, slots=True)
class AdvanceResult:
    """What one ``advance_due`` pass did: scheduled steps made ready, sleeps ended, waits failed."""

    woken: int = 0
    timed_out: int = 0
    promoted: int = 0


@dataclass(frozen=True, slots=True)
class StoredStep:
    """One step row as stored."""

    name: str
    kind: StepKind
    status: StepStatus
    parents: tuple[str, ...]
    attempt: int
    failures: int
    reclaims: int
    output: bytes | None = None
    error: ErrorInfo | None = None
    node: str | None = None
    progress: bytes | None = None
    signal: str | None = None
    due_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    heartbeat_at: int | None = None


@dataclass(frozen=True, slots=True)
class StoredRun:
    """One run row with its steps (in definition order)."""

    id: str
    workflow: str
    queue: str
    state: str
    """:data:`ACTIVE` or a final :class:`Status` value."""
    payload: bytes
    key: str | None
    labels: Mapping[str, str]
    created_at: int
    run_at: int
    finished_at: int | None
    error: ErrorInfo | None
    steps: tuple[StoredStep, ...]
    headers: Mapping[str, str] = field(default_factory=dict)
    """The run's headers (``Cap.HEADERS``)."""
    tenant: str | None = None
    """The run's tenant (``Cap.TENANT``)."""


MAX_PAGE = 1000
"""The most runs one page of ``list_runs`` returns."""


@dataclass(frozen=True, slots=True)
class RunQuery:
    """A filter for ``list_runs`` (and for every operation on runs by filter): newest first.

    Every condition given must hold. ``statuses`` are public :class:`Status`
    values, the derived active ones (pending, queued, running, waiting) as
    exactly as the final ones: a store derives them from the steps as
    :func:`derive_status` does, at ``now`` (a delayed run is ``pending`` until
    its ``run_at``). ``tenant`` keeps one tenant's runs (``Cap.TENANT``).
    ``labels`` are matched exactly; ``label_prefix`` is a
    ``(name, prefix)`` pair that keeps runs whose label ``name`` starts with
    ``prefix`` (``Cap.LABEL_PREFIX``). Ranges are of Unix nanoseconds, the
    lower end included and the upper end excluded; a range on ``finished_at``
    keeps finished runs only. ``cursor`` is the opaque ``RunPage.cursor`` of the
    page before: pages never repeat or skip a run, whatever is created between
    them. ``count`` asks for ``RunPage.total``, every run the filter matches.

    Built checked: a malformed filter raises :class:`~cairnflow.InvalidQuery`
    (or :class:`~cairnflow.InvalidName` for a bad name) naming the field, here,
    before any store sees it (:meth:`check`).
    """

    workflow: str | None = None
    queue: str | None = None
    statuses: frozenset[Status] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    label_prefix: tuple[str, str] | None = None
    tenant: str | None = None
    """Only the runs of this tenant (``Cap.TENANT``)."""
    created_since: int | None = None
    created_until: int | None = None
    finished_since: int | None = None
    finished_until: int | None = None
    now: int = 0
    """The scheduling clock's now, which tells a pending run from a queued one."""
    limit: int = 50
    cursor: str | None = None
    count: bool = False

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Validate every field (normalising ``statuses`` to :class:`Status`): the one place."""
        if self.workflow is not None:
            check_name("workflow", self.workflow)
        if self.queue is not None:
            check_name("queue", self.queue)
        if self.tenant is not None:
            check_tenant(self.tenant)
        if self.statuses is not None:
            given: object = self.statuses
            if isinstance(given, str) or not isinstance(given, Iterable):
                raise InvalidQuery(f"statuses must be a set of statuses, got {self.statuses!r}")
            known = ", ".join(s.value for s in Status)
            chosen: set[Status] = set()
            for status in self.statuses:
                try:
                    chosen.add(Status(status))
                except ValueError:
                    raise InvalidQuery(
                        f"unknown run status {status!r}: a status is one of {known}"
                    ) from None
            object.__setattr__(self, "statuses", frozenset(chosen))
        object.__setattr__(self, "labels", check_labels(self.labels))
        if self.label_prefix is not None:
            if not isinstance(self.label_prefix, tuple) or len(self.label_prefix) != 2:
                raise InvalidQuery(
                    f"label_prefix must be a (label name, prefix) pair, got {self.label_prefix!r}"
                )
            check_labels({self.label_prefix[0]: self.label_prefix[1]})
        for low, high in (("created_since", "created_until"), ("finished_since", "finished_until")):
            for name in (low, high):
                value = getattr(self, name)
                if value is not None:
                    _check(name, value, minimum=0)
            since, until = getattr(self, low), getattr(self, high)
            if since is not None and until is not None and since > until:
                raise InvalidQuery(f"{low} ({since}) is after {high} ({until})")
        _check("now", self.now, minimum=0)
        _check("limit", self.limit, minimum=1, maximum=MAX_PAGE)
        if self.cursor is not None:
            cursor_position(self.cursor)
        if not isinstance(self.count, bool):
            raise InvalidQuery(f"count must be a bool, got {self.count!r}")


def _check(name: str, value: object, *, minimum: int, maximum: int | None = None) -> None:
    try:
        check_int(name, value, minimum=minimum, maximum=maximum)
    except ValueError as error:
        raise InvalidQuery(str(error)) from None


def run_cursor(position: int) -> str:
    """The opaque cursor after the run at ``position`` (a store's insertion sequence)."""
    return f"r{position}"


def cursor_position(cursor: str) -> int:
    """The position a :func:`run_cursor` holds; :class:`~cairnflow.InvalidQuery` otherwise."""
    if (
        not isinstance(cursor, str)
        or not cursor.startswith("r")
        or not cursor[1:].isdigit()
        or len(cursor) > 21
    ):
        raise InvalidQuery(f"invalid run cursor {cursor!r}: pass a RunPage.cursor back as it is")
    return int(cursor[1:])


def label_prefix_bounds(prefix: str) -> tuple[str, str | None]:
    """``(low, high)``: the strings starting with ``prefix`` are those ``>= low`` and ``< high``.

    ``high`` is ``prefix`` with its last character incremented (None: no upper
    bound, for an empty prefix or one of only the highest code point). Under a
    binary collation (code point order: SQLite's BINARY, MariaDB's
    ``utf8mb4_bin``, Postgres' ``"C"``) this range is exactly the prefix, and a
    B-tree serves it on every engine with no LIKE and so no escaping.
    """
    stem = prefix
    while stem and ord(stem[-1]) == 0x10FFFF:
        stem = stem[:-1]
    if not stem:
        return prefix, None
    nxt = ord(stem[-1]) + 1
    if 0xD800 <= nxt <= 0xDFFF:  # surrogates are not characters: skip them
        nxt = 0xE000
    return prefix, stem[:-1] + chr(nxt)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run in a listing, with a count of its steps by status.

    ``error`` is the run's error: its ``step`` names the step that failed it.
    """

    id: str
    workflow: str
    queue: str
    state: str
    key: str | None
    labels: Mapping[str, str]
    created_at: int
    run_at: int
    finished_at: int | None
    error: ErrorInfo | None
    step_counts: Mapping[StepStatus, int]
    tenant: str | None = None
    """The run's tenant (``Cap.TENANT``)."""


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of runs and the cursor of the next page (None on the last).

    ``total``: how many runs the whole filter matches (``RunQuery.count``), else None.
    """

    runs: tuple[RunSummary, ...]
    cursor: str | None
    total: int | None = None


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A schedule as a store keeps it (the ``Schedules`` facet).

    ``spec`` is the declaration as JSON (cron, zone, windows, policies, payload,
    labels), so any node that runs the workflow can fire it; ``fingerprint``
    says what decides its ticks (:attr:`cairnflow.Schedule.fingerprint`).
    ``next_fire`` is the stored next fire every pass is judged against.
    """

    id: str
    workflow: str
    name: str
    spec: str
    fingerprint: str
    next_fire: int
    paused: bool = False
    resumed_at: int | None = None
    """When the schedule was last resumed (ticks due before it never fire)."""
    last_fire: int | None = None
    """The tick time of the schedule's last fired tick."""
    last_run_id: str | None = None
    last_run_finished: bool = True
    """False while the run of the last fired tick is unfinished (read with the schedule)."""
    created_at: int = 0
    updated_at: int = 0


class PauseKind(StrEnum):
    """What a pause holds (the ``QueueControl`` facet)."""

    QUEUE = "queue"
    """Every run of the queue, of any workflow (``Cap.PAUSE_QUEUE``)."""
    WORKFLOW = "workflow"
    """Every run of the workflow, on any queue (``Cap.PAUSE_WORKFLOW``)."""


@dataclass(frozen=True, slots=True)
class Pause:
    """A paused queue or workflow: no claim starts an attempt of it until it is resumed."""

    kind: PauseKind
    name: str
    paused_at: int
    """When it was paused (Unix nanoseconds, the scheduling clock of who paused it)."""


@dataclass(frozen=True, slots=True)
class HeldLock:
    """A named lock as stored (the ``Locking`` facet): its holder's token, and until when.

    Held while ``expires_at`` is after now; an expired row is free for the next
    taker, whoever it is. Times on the clock of the caller that took it (the
    database's, where the store has one).
    """

    name: str
    token: str
    taken_at: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class Leader:
    """Who holds a role's leadership lease (the ``Leadership`` facet), and until when.

    ``term`` grows by one on every handover: a fencing token that tells a new
    leader's acts from a deposed one's.
    """

    role: str
    node: str
    term: int
    lease_until: int
    """On the lease clock (Unix nanoseconds)."""


class TickOutcome(StrEnum):
    """What became of one tick of a schedule."""

    FIRED = "fired"
    SKIPPED = "skipped"
    """Not fired: paused, outside every window, an unfinished run, or the ``when`` predicate."""
    MISFIRED = "misfired"
    """Missed while no client ran, and the misfire policy did not fire it."""


@dataclass(frozen=True, slots=True)
class TickRecord:
    """One tick of a schedule as recorded: at most one row per (schedule, tick time)."""

    schedule_id: str
    at: int
    """The tick's instant (for a trigger: when it was triggered)."""
    outcome: TickOutcome
    reason: str
    """A :class:`cairnflow.schedule.TickReason` value, ``"when"`` or ``"triggered"``."""
    node: str
    recorded_at: int
    run_id: str | None = None
    """The run the tick started (fired ticks only)."""


def derive_status(
    state: str, run_at: int, now: int, step_statuses: Mapping[StepStatus, int]
) -> Status:
    """The public :class:`Status` of a run from its stored state and step counts.

    Stores keep only "active" or the final status on the run row, so that the
    hot path never rewrites the run; the finer status is derived on read.
    """
    if state != ACTIVE:
        return Status(state)
    present = {status for status, count in step_statuses.items() if count > 0}
    if StepStatus.RUNNING in present:
        return Status.RUNNING
    if run_at > now and present <= {StepStatus.BLOCKED, StepStatus.SCHEDULED, StepStatus.READY}:
        return Status.PENDING
    if present & {StepStatus.READY, StepStatus.SCHEDULED}:
        return Status.QUEUED
    if present & {StepStatus.SLEEPING, StepStatus.WAITING}:
        return Status.WAITING
    return Status.QUEUED


RETRYABLE: frozenset[str] = frozenset(
    {Status.FAILED.value, Status.CANCELLED.value, Status.DISCARDED.value}
)
"""The final states a run can be retried from (``Cap.RETRY_RUN``, ``Cap.JOB_RETRY``): the one
list every store and the client read. A succeeded run has nothing to retry."""


def cancelled_step_error(step: str) -> ErrorInfo:
    """The error a run keeps once one of its steps was cancelled (``Cap.CANCEL_STEP``).

    One wording for every store: the memory store and the SQL layer both write it.
    """
    return ErrorInfo(type="Cancelled", message=f"step {step!r} was cancelled", step=step)


class Reopened(StrEnum):
    """What ``reopen_run`` (the ``RunAdmin`` facet) did with a run."""

    REOPENED = "reopened"
    """The run is active again: its steps that had not succeeded run again."""
    UNFINISHED = "unfinished"
    """The run has not finished: nothing to retry, nothing changed."""
    NOT_RETRYABLE = "not_retryable"
    """The run finished in a state that is not retried (succeeded): nothing changed."""
    STEP_NOT_FAILED = "step_not_failed"
    """The step named (``Cap.JOB_RETRY``) did not fail: nothing changed."""
