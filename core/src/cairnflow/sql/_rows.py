"""The rows the SQL store reads, named: one type per multi-column SELECT.

Each row type's fields are its SELECT's columns, in order (a unit test holds
the column lists of :mod:`._statements` to them), and ``from_row`` turns what
a DB-API driver returned into Python values once, where the row is read. Code
elsewhere in the SQL layer reads ``row.run_id``, never ``row[1]``.

Over 600 lines because every row type of the layer is here, one short class
each: the one place a column list and its reader are checked against each other.

They are ``NamedTuple``\\ s, not dataclasses: a claim and a batch of outcomes
read one per step on the hot path, and a named tuple costs a tuple, when it is
built with ``tuple.__new__`` (:data:`_new`): the ``__new__`` a named tuple is
given takes keywords too, and doubles what building one costs. For the same
reason the converters below are cheap on what drivers usually return:
:func:`to_text` returns a ``str`` as it is, and :func:`to_json` answers the
empty list and object (most parents, children and labels) without the parser.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._models import ErrorInfo, StepKind, StepStatus
from ..store import (
    HeldLock,
    Leader,
    Pause,
    PauseKind,
    RunSummary,
    ScheduleRecord,
    StoredRun,
    StoredStep,
    TickOutcome,
    TickRecord,
)

__all__ = [
    "ClaimedRun",
    "ClaimedStep",
    "DueStep",
    "ExistingRun",
    "ExpiredStep",
    "FinishingStep",
    "KeyCandidate",
    "KeyRow",
    "LeaderRow",
    "LeaseState",
    "LockRow",
    "LockedRun",
    "LockedSchedule",
    "PauseRow",
    "RunRow",
    "ScheduleRow",
    "StepLease",
    "StepRow",
    "TickKey",
    "TickRow",
    "split_keyed",
    "to_bytes",
    "to_error",
    "to_json",
    "to_text",
]

_KINDS = {kind.value: kind for kind in StepKind}
_new = tuple.__new__
"""Builds a row type from a tuple of its values (what ``cls(...)`` does, at half the cost)."""


# -- converters ----------------------------------------------------------------------------
def to_bytes(value: Any) -> bytes | None:
    """A binary column's value (drivers return bytes, memoryview, bytearray or even str)."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"expected bytes from the database, got {type(value).__name__}")


def to_text(value: Any) -> str:
    """A text column's value."""
    if type(value) is str:  # what most drivers return: the hot path
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode()
    return str(value)


def to_json(value: Any) -> Any:
    """A JSON column's value; the empty list and object (most parents, children, labels)
    without the parser."""
    text = to_text(value)
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def to_error(value: Any) -> ErrorInfo | None:
    """An ``error`` column's value."""
    return None if value is None else ErrorInfo.from_json(to_text(value))


def to_headers(value: Any) -> dict[str, str]:
    """A ``headers`` column's value (``Cap.HEADERS``): NULL for a run without any."""
    return {} if value is None else to_json(value)


def _optional_text(value: Any) -> str | None:
    return None if value is None else to_text(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


# -- claims ----------------------------------------------------------------------------------
class ClaimedRun(NamedTuple):
    """What an attempt needs of its run: ``claim_runs``, or the tail of a claimed row."""

    id: str
    workflow: str
    queue: str
    payload: bytes
    labels: dict[str, str]
    headers: dict[str, str]
    tenant: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ClaimedRun:
        """Convert a row of ``CLAIM_RUN_COLUMNS``; ``headers`` and ``tenant`` are absent in a
        schema before them (a test's older release)."""
        run_id, workflow, queue, payload, labels, *rest = row
        headers = rest[0] if rest else None
        tenant = rest[1] if len(rest) > 1 else None
        return _new(cls, (
            to_text(run_id), to_text(workflow), to_text(queue), to_bytes(payload) or b"",
            to_json(labels), to_headers(headers), _optional_text(tenant),
        ))  # fmt: skip


class ClaimedStep(NamedTuple):
    """A step a claim leased (``CLAIMED_COLUMNS``), with its run when the claim returned it.

    A dialect's claim returns raw rows (:data:`~cairnflow.sql.ClaimedRow`): the
    step's eight columns, then the run's seven where the statement could join
    them (Postgres's ``UPDATE ... FROM ... RETURNING``).
    """

    id: str
    run_id: str
    name: str
    kind: StepKind
    attempt: int
    failures: int
    reclaims: int
    parents: list[str]
    run: ClaimedRun | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ClaimedStep:
        """Convert one row a dialect's claim returned."""
        run: ClaimedRun | None = None
        if len(row) == 8:
            step_id, run_id, name, kind, attempt, failures, reclaims, parents = row
        else:
            step_id, run_id, name, kind, attempt, failures, reclaims, parents, *columns = row
            run = ClaimedRun.from_row(columns)
        kind = to_text(kind)
        return _new(cls, (
            to_text(step_id), to_text(run_id), to_text(name), _KINDS.get(kind) or StepKind(kind),
            int(attempt), int(failures), int(reclaims), to_json(parents), run,
        ))  # fmt: skip


# -- outcomes and leases ------------------------------------------------------------------
class FinishingStep(NamedTuple):
    """A step an outcome ends: ``steps_of``, or ``steps_with_runs`` (its run's steps left)."""

    id: str
    run_id: str
    children: list[str]
    kind: str
    """The step's kind: a compensation's success starts the next one (``Cap.COMPENSATION``)."""
    steps_left: int | None
    key: str | None
    """The step's concurrency key: the lease this outcome ends releases it."""

    @classmethod
    def from_row(cls, row: Sequence[Any], *, joined: bool) -> FinishingStep:
        """Convert a row of ``steps_of``, or of ``steps_with_runs`` (``joined``: its run's
        steps left before the key). The key is the last column, absent in a schema before
        concurrency keys (a test's older release)."""
        step_id, run_id, children, kind = row[:4]
        steps_left = int(row[4]) if joined else None
        at = 5 if joined else 4
        key = row[at] if len(row) > at else None
        return _new(cls, (
            to_text(step_id), to_text(run_id), to_json(children), to_text(kind), steps_left,
            _optional_text(key),
        ))  # fmt: skip


class ExistingRun(NamedTuple):
    """``runs_named``: a run id that exists, and its workflow."""

    id: str
    workflow: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ExistingRun:
        """Convert a ``runs_named`` row."""
        run_id, workflow = row
        return _new(cls, (to_text(run_id), to_text(workflow)))


class GraphStep(NamedTuple):
    """``run_graph``: one step of a run as a failure path reads it (``Cap.WAIT_BRANCH``,
    ``Cap.COMPENSATION``): its place in the DAG, its kind and status, when it finished."""

    id: str
    name: str
    kind: str
    status: str
    parents: list[str]
    children: list[str]
    finished_at: int | None
    position: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> GraphStep:
        """Convert a ``run_graph`` row."""
        step_id, name, kind, status, parents, children, finished_at, position = row
        return _new(cls, (
            to_text(step_id), to_text(name), to_text(kind), to_text(status), to_json(parents),
            to_json(children), _optional_int(finished_at), int(position),
        ))  # fmt: skip


class LockedRun(NamedTuple):
    """``lock_run``: the locked run's state and how many of its steps have not succeeded."""

    state: str
    steps_left: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LockedRun:
        """Convert a ``lock_run`` row."""
        state, steps_left = row
        return _new(cls, (to_text(state), int(steps_left)))


class LeaseState(NamedTuple):
    """``lease_state``: one step's status and the secret of the lease on it."""

    status: str
    lease_token: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LeaseState:
        """Convert a ``lease_state`` row."""
        status, lease_token = row
        return _new(cls, (to_text(status), _optional_text(lease_token)))


class StepLease(NamedTuple):
    """``lease_states``: a step's id, the secret of the lease on it, and its status."""

    id: str
    lease_token: str | None
    status: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StepLease:
        """Convert a ``lease_states`` row."""
        step_id, lease_token, status = row
        return _new(cls, (to_text(step_id), _optional_text(lease_token), to_text(status)))


class ExpiredStep(NamedTuple):
    """``expired``: a running step whose lease ran out."""

    id: str
    run_id: str
    workflow: str
    name: str
    attempt: int
    failures: int
    reclaims: int
    lease_token: str | None
    key: str | None
    """The step's concurrency key: requeueing it releases the key."""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ExpiredStep:
        """Convert an ``expired`` row."""
        step_id, run_id, workflow, name, attempt, failures, reclaims, lease_token = row[:8]
        key = row[8] if len(row) > 8 else None  # absent before concurrency keys (see above)
        return _new(cls, (
            to_text(step_id), to_text(run_id), to_text(workflow), to_text(name), int(attempt),
            int(failures), int(reclaims), _optional_text(lease_token), _optional_text(key),
        ))  # fmt: skip


class DueStep(NamedTuple):
    """``due``: a scheduled, sleeping or waiting step whose time came."""

    id: str
    run_id: str
    status: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> DueStep:
        """Convert a ``due`` row."""
        step_id, run_id, status = row
        return _new(cls, (to_text(step_id), to_text(run_id), to_text(status)))


# -- reading -------------------------------------------------------------------------------
class RunRow(NamedTuple):
    """A run as ``RUN_COLUMNS`` reads it (``get_run``, ``list_runs``)."""

    seq: int
    id: str
    workflow: str
    queue: str
    state: str
    payload: bytes
    idem_key: str | None
    labels: dict[str, str]
    created_at: int
    run_at: int
    finished_at: int | None
    error: ErrorInfo | None
    headers: dict[str, str]
    tenant: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> RunRow:
        """Convert a row of ``RUN_COLUMNS``; ``headers`` and ``tenant`` are absent in a schema
        before them (a test's older release)."""
        (
            seq, run_id, workflow, queue, state, payload, idem_key, labels, created_at, run_at,
            finished_at, error, *rest,
        ) = row  # fmt: skip
        headers = rest[0] if rest else None
        tenant = rest[1] if len(rest) > 1 else None
        return _new(cls, (
            int(seq), to_text(run_id), to_text(workflow), to_text(queue), to_text(state),
            to_bytes(payload) or b"", _optional_text(idem_key), to_json(labels), int(created_at),
            int(run_at), _optional_int(finished_at), to_error(error), to_headers(headers),
            _optional_text(tenant),
        ))  # fmt: skip

    def stored(self, steps: tuple[StoredStep, ...]) -> StoredRun:
        """The run with its ``steps``, as ``get_run`` returns it."""
        return StoredRun(
            id=self.id,
            workflow=self.workflow,
            queue=self.queue,
            state=self.state,
            payload=self.payload,
            key=self.idem_key,
            labels=self.labels,
            created_at=self.created_at,
            run_at=self.run_at,
            finished_at=self.finished_at,
            error=self.error,
            steps=steps,
            headers=self.headers,
            tenant=self.tenant,
        )

    def summary(self, step_counts: dict[StepStatus, int]) -> RunSummary:
        """The run without its payload, as ``list_runs`` returns it."""
        return RunSummary(
            id=self.id,
            workflow=self.workflow,
            queue=self.queue,
            state=self.state,
            key=self.idem_key,
            labels=self.labels,
            created_at=self.created_at,
            run_at=self.run_at,
            finished_at=self.finished_at,
            error=self.error,
            step_counts=step_counts,
            tenant=self.tenant,
        )


class StepRow(NamedTuple):
    """A step as ``STEP_COLUMNS`` reads it (``get_steps``)."""

    name: str
    kind: StepKind
    status: StepStatus
    parents: list[str]
    attempt: int
    failures: int
    reclaims: int
    output: bytes | None
    error: ErrorInfo | None
    node: str | None
    progress: bytes | None
    signal_name: str | None
    due_at: int | None
    started_at: int | None
    finished_at: int | None
    heartbeat_at: int | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StepRow:
        """Convert a row of ``STEP_COLUMNS``."""
        (
            name, kind, status, parents, attempt, failures, reclaims, output, error, node,
            progress, signal_name, due_at, started_at, finished_at, heartbeat_at,
        ) = row  # fmt: skip
        return _new(cls, (
            to_text(name), StepKind(to_text(kind)), StepStatus(to_text(status)), to_json(parents),
            int(attempt), int(failures), int(reclaims), to_bytes(output), to_error(error),
            _optional_text(node), to_bytes(progress), _optional_text(signal_name),
            _optional_int(due_at), _optional_int(started_at), _optional_int(finished_at),
            _optional_int(heartbeat_at),
        ))  # fmt: skip

    def stored(self) -> StoredStep:
        """The step as ``get_run`` returns it."""
        return StoredStep(
            name=self.name,
            kind=self.kind,
            status=self.status,
            parents=tuple(self.parents),
            attempt=self.attempt,
            failures=self.failures,
            reclaims=self.reclaims,
            output=self.output,
            error=self.error,
            node=self.node,
            progress=self.progress,
            signal=self.signal_name,
            due_at=self.due_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            heartbeat_at=self.heartbeat_at,
        )


# -- schedules -----------------------------------------------------------------------------
class ScheduleRow(NamedTuple):
    """A schedule as ``SCHEDULE_COLUMNS`` reads it, then whether its last run is finished."""

    id: str
    workflow: str
    name: str
    spec: str
    fingerprint: str
    next_fire: int
    paused: bool
    resumed_at: int | None
    last_fire: int | None
    last_run_id: str | None
    created_at: int
    updated_at: int
    last_run_finished: bool

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ScheduleRow:
        """Convert a row of ``get_schedule``, ``list_schedules`` or ``due_schedules``."""
        (
            schedule_id, workflow, name, spec, fingerprint, next_fire, paused, resumed_at,
            last_fire, last_run_id, created_at, updated_at, last_run_finished,
        ) = row  # fmt: skip
        return _new(cls, (
            to_text(schedule_id), to_text(workflow), to_text(name), to_text(spec),
            to_text(fingerprint), int(next_fire), bool(paused), _optional_int(resumed_at),
            _optional_int(last_fire), _optional_text(last_run_id), int(created_at),
            int(updated_at), bool(last_run_finished),
        ))  # fmt: skip

    def record(self) -> ScheduleRecord:
        """The schedule as the ``Schedules`` facet returns it (the fields have its names)."""
        return ScheduleRecord(**self._asdict())


class LockedSchedule(NamedTuple):
    """``lock_schedule``: what a fire of the locked schedule compares and moves."""

    next_fire: int
    last_fire: int | None
    last_run_id: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LockedSchedule:
        """Convert a ``lock_schedule`` row."""
        next_fire, last_fire, last_run_id = row
        return _new(cls, (int(next_fire), _optional_int(last_fire), _optional_text(last_run_id)))


class TickRow(NamedTuple):
    """A recorded tick as ``TICK_COLUMNS`` reads it (``tick_history``)."""

    schedule_id: str
    at: int
    outcome: TickOutcome
    reason: str
    node: str
    recorded_at: int
    run_id: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> TickRow:
        """Convert a row of ``TICK_COLUMNS``."""
        schedule_id, at, outcome, reason, node, recorded_at, run_id = row
        return _new(cls, (
            to_text(schedule_id), int(at), TickOutcome(to_text(outcome)), to_text(reason),
            to_text(node), int(recorded_at), _optional_text(run_id),
        ))  # fmt: skip

    def record(self) -> TickRecord:
        """The tick as ``schedule_history`` returns it (the fields have its names)."""
        return TickRecord(**self._asdict())


class TickKey(NamedTuple):
    """``prunable_ticks``: the primary key of a tick to delete."""

    schedule_id: str
    at: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> TickKey:
        """Convert a ``prunable_ticks`` row."""
        schedule_id, at = row
        return _new(cls, (to_text(schedule_id), int(at)))


# -- leadership ----------------------------------------------------------------------------
class LeaderRow(NamedTuple):
    """A role's lease as ``LEADER_COLUMNS`` reads it (``lock_leader``)."""

    role: str
    node: str
    term: int
    lease_until: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LeaderRow:
        """Convert a row of ``LEADER_COLUMNS``."""
        role, node, term, lease_until = row
        return _new(cls, (to_text(role), to_text(node), int(term), int(lease_until)))

    def record(self) -> Leader:
        """The lease as the ``Leadership`` facet returns it (the fields have its names)."""
        return Leader(**self._asdict())


# -- named locks ---------------------------------------------------------------------------
class LockRow(NamedTuple):
    """A named lock as ``LOCK_COLUMNS`` reads it (``lock_named``, ``read_named``)."""

    name: str
    token: str
    taken_at: int
    expires_at: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LockRow:
        """Convert a row of ``LOCK_COLUMNS``."""
        name, token, taken_at, expires_at = row
        return _new(cls, (to_text(name), to_text(token), int(taken_at), int(expires_at)))

    def record(self) -> HeldLock:
        """The lock as the ``Locking`` facet returns it (the fields have its names)."""
        return HeldLock(**self._asdict())


# -- pauses --------------------------------------------------------------------------------
class PauseRow(NamedTuple):
    """A paused queue or workflow as ``PAUSE_COLUMNS`` reads it (``list_pauses``)."""

    kind: PauseKind
    name: str
    paused_at: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> PauseRow:
        """Convert a row of ``PAUSE_COLUMNS``."""
        kind, name, paused_at = row
        return _new(cls, (PauseKind(to_text(kind)), to_text(name), int(paused_at)))

    def record(self) -> Pause:
        """The pause as the ``QueueControl`` facet returns it (the fields have its names)."""
        return Pause(**self._asdict())


class KeyCandidate(NamedTuple):
    """``ready_keyed``: a keyed claim's candidate, with its key and the key's limit."""

    id: str
    run_id: str
    key: str | None
    limit: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> KeyCandidate:
        """Convert a ``ready_keyed`` row."""
        step_id, run_id, key, limit = row
        return _new(cls, (
            to_text(step_id), to_text(run_id), _optional_text(key), int(limit or 0)
        ))  # fmt: skip


class KeyRow(NamedTuple):
    """``lock_keys``: a key's row, locked: its running attempts, and its fifo head."""

    name: str
    running: int
    fifo: bool
    head: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> KeyRow:
        """Convert a ``lock_keys`` row."""
        name, running, fifo, head = row
        return _new(cls, (to_text(name), int(running), bool(fifo), _optional_text(head)))


def split_keyed(rows: Sequence[Sequence[Any]]) -> tuple[list[KeyCandidate], dict[str, KeyRow]]:
    """Convert ``ready_keyed_with_keys`` rows: the candidates, in order, and the keys' rows.

    Each row is ``(part, id, run_id, name, number, fifo, head)``: part ``'c'`` a
    candidate (``number``: its key's limit), ``'k'`` a key's row (``number``: its count).
    """
    candidates: list[KeyCandidate] = []
    keys: dict[str, KeyRow] = {}
    for part, step_id, run_id, name, number, fifo, head in rows:
        if to_text(part) == "c":
            candidates.append(KeyCandidate.from_row((step_id, run_id, name, number)))
        else:
            key = KeyRow.from_row((name, number, fifo, head))
            keys[key.name] = key
    return candidates, keys
