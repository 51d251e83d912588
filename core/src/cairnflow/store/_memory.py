"""``memory://``: the reference implementation of the Store SPI.

Everything lives in dictionaries behind one lock, so every operation is
atomic like a transaction. It is thread-safe and implements every transition
a durable store does, which makes it the executable specification the SQL
layer is checked against by the conformance kit. It is not durable and cannot
be shared between processes; in exchange it can run an unregistered Python
callable (``Cap.CLOSURE``).

The module is over 600 lines because it is the whole kernel in one place, read
side by side with the SPI it specifies; its facets live in modules of their own
(:mod:`._memory_schedules`, :mod:`._memory_pauses`, :mod:`._memory_state`,
:mod:`._memory_timing`, :mod:`._memory_admin`, :mod:`._memory_errors`,
:mod:`._memory_retention`).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import ids
from .._caps import Cap
from .._errors import DuplicateRun, RunNotFound, StepTimeout
from .._models import ErrorInfo, Status, StepKind, StepStatus
from .._version import SPI_VERSION, __version__
from ..notify import LOCAL, Notifier
from ._facets import (
    KERNEL,
    ErrorHistory,
    Journaling,
    Leadership,
    Lifecycle,
    Locking,
    QueueControl,
    RateLimiting,
    Retention,
    RunAdmin,
    RunDeadlines,
    RunStats,
    RunTiming,
    Schedules,
    Servers,
    StepHistory,
    facet_capabilities,
)
from ._landed import landed
from ._memory_admin import MemoryAdmin
from ._memory_branches import MemoryBranches
from ._memory_errors import MemoryErrors
from ._memory_history import MemoryStepHistory
from ._memory_lifecycle import MemoryLifecycle
from ._memory_pauses import MemoryPauses
from ._memory_retention import MemoryRetention
from ._memory_schedules import MemorySchedules
from ._memory_servers import MemoryServers
from ._memory_state import MemoryState
from ._memory_stats import MemoryStats
from ._memory_timing import MemoryTiming
from ._query import run_matches
from ._records import (
    ACTIVE,
    AdvanceResult,
    AttemptState,
    ClaimedAttempt,
    ClaimRequest,
    ConcurrencyKey,
    ExpiredAttempt,
    Failed,
    FinishResult,
    NewRun,
    Outcome,
    PauseKind,
    ReclaimResult,
    RenewResult,
    RunPage,
    RunQuery,
    RunSummary,
    SignalResult,
    SleepUntil,
    Snoozed,
    StoredRun,
    StoredStep,
    StoreInfo,
    Succeeded,
    WaitFor,
    cursor_position,
    run_cursor,
)

__all__ = ["MemoryStore"]


@dataclass(eq=False)
class _Step:
    id: str
    run: _Run
    name: str
    kind: StepKind
    parents: tuple[str, ...]
    children: tuple[str, ...]
    parents_left: int
    status: StepStatus
    due_at: int | None
    seq: int
    attempt: int = 0
    failures: int = 0
    reclaims: int = 0
    token: str | None = None
    lease_until: int | None = None
    node: str | None = None
    signal: str | None = None
    output: bytes | None = None
    error: ErrorInfo | None = None
    progress: bytes | None = None
    started_at: int | None = None
    finished_at: int | None = None
    heartbeat_at: int | None = None
    key: ConcurrencyKey | None = None


@dataclass(eq=False)
class _Run:
    id: str
    workflow: str
    queue: str
    priority: int
    payload: bytes
    key: str | None
    labels: dict[str, str]
    created_at: int
    run_at: int
    seq: int
    closure: Callable[..., Any] | None
    forced: bool = False  # force_run: no pause holds the run (RunTiming)
    fifo_key: str | None = None
    state: str = ACTIVE
    finished_at: int | None = None
    error: ErrorInfo | None = None
    steps_left: int = 0
    steps: dict[str, _Step] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # Cap.HEADERS
    tenant: str | None = None  # Cap.TENANT
    signals: dict[str, deque[bytes]] = field(default_factory=dict)


class MemoryStore(
    MemoryBranches,
    MemoryErrors,
    MemoryStepHistory,
    MemoryLifecycle,
    MemoryState,
    MemorySchedules,
    MemoryServers,
    MemoryPauses,
    MemoryStats,
    MemoryTiming,
    MemoryAdmin,
    MemoryRetention,
):
    """An in-process, thread-safe store: every capability but the durable ones."""

    capabilities = (
        (KERNEL.capabilities - {Cap.DURABLE, Cap.MULTI_PROCESS, Cap.NOTIFY})
        | facet_capabilities(
            Schedules,
            Leadership,
            QueueControl,
            Journaling,
            Locking,
            RateLimiting,
            RunTiming,
            RunAdmin,
            ErrorHistory,
            StepHistory,
            Lifecycle,
            RunDeadlines,
            RunStats,
            Servers,
            Retention,
        )
        | {Cap.DRAIN, Cap.SHUTDOWN_REQUEUE, Cap.ENQUEUE_ONLY}
        | {Cap.WAIT_BRANCH, Cap.COMPENSATION}
    )
    """Every kernel capability but the durable ones (and NOTIFY: its in-process bus wakes
    the clients of this object only), the schedules, leadership, queue control,
    journaling, locking, run timing and run admin facets, and what the engine enforces
    over the kernel (drain, enqueue-only)."""
    spi_version = SPI_VERSION

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._runs: dict[str, _Run] = {}
        self._ready: dict[str, _Step] = {}
        self._running: dict[str, _Step] = {}
        self._timed: dict[str, _Step] = {}  # scheduled, sleeping, waiting with a deadline
        self._tokens: dict[str, _Step] = {}  # every token ever issued that a holder may present
        self._active_keys: dict[tuple[str, str], str] = {}
        self._fifo: dict[str, dict[str, _Run]] = {}
        """The runs of each fifo key, in enqueue order (finished ones dropped from the front)."""
        self._seq = itertools.count()
        self._channel = f"memory:{id(self):x}"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryStore:
        """Open ``memory://`` (the URL carries nothing else)."""
        return cls(**options)

    # -- lifecycle ---------------------------------------------------------------
    def describe(self) -> StoreInfo:
        """An in-process store of this cairnflow version."""
        return StoreInfo(
            driver="memory",
            distribution="cairnflow",
            version=__version__,
            url="memory://",
            durable=False,
            server=None,
        )

    @property
    def channel(self) -> str:
        """A channel private to this store object."""
        return self._channel

    def default_notifier(self) -> Notifier | None:
        """The in-process bus: clients of this store wake each other at once."""
        return LOCAL

    def migrate(self) -> list[str]:
        """Nothing to migrate."""
        return []

    def check_schema(self) -> None:
        """Always ready."""

    def close(self) -> None:
        """Nothing to release."""

    # -- writing runs -------------------------------------------------------------
    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:
        """Create every run or none; runs whose ids exist landed before (see
        :meth:`Store.create_runs`)."""
        with self._lock:
            existing = {new.id: self._runs[new.id].workflow for new in runs if new.id in self._runs}
            done = landed(runs, existing)
            if done is not None:
                return done
            seen: set[tuple[str, str]] = set()
            for new in runs:
                if new.key is None:
                    continue
                slot = (new.workflow, new.key)
                if slot in seen or slot in self._active_keys:
                    raise DuplicateRun(new.workflow, new.key, self._active_keys.get(slot))
                seen.add(slot)
            for new in runs:
                self._insert(new)
        return [new.id for new in runs]

    def _run_state(self, run_id: str) -> str | None:
        """The stored state of a run (lock held), None when it is gone."""
        run = self._runs.get(run_id)
        return None if run is None else run.state

    def _insert(self, new: NewRun) -> None:
        run = _Run(
            id=new.id,
            workflow=new.workflow,
            queue=new.queue,
            priority=new.priority,
            payload=new.payload,
            key=new.key,
            labels=dict(new.labels),
            created_at=new.created_at,
            run_at=new.run_at,
            seq=next(self._seq),
            closure=new.closure,
            fifo_key=new.fifo_key,
            headers=dict(new.headers),
            tenant=new.tenant,
            # Compensations are not counted: they run only once the run failed (COMPENSATION).
            steps_left=sum(1 for spec in new.steps if spec.kind is not StepKind.COMPENSATION),
        )
        if run.fifo_key is not None:
            self._fifo.setdefault(run.fifo_key, {})[run.id] = run
        keys = new.keys or (None,) * len(new.steps)
        for step_id, spec, key in zip(new.step_ids, new.steps, keys, strict=True):
            root = not spec.parents
            step = _Step(
                id=step_id,
                run=run,
                name=spec.name,
                kind=spec.kind,
                parents=spec.parents,
                children=spec.children,
                parents_left=len(spec.parents),
                status=StepStatus.BLOCKED,
                due_at=None,
                seq=next(self._seq),
                key=key,
            )
            run.steps[spec.name] = step
            if spec.kind is StepKind.COMPENSATION:
                step.status = StepStatus.SKIPPED  # until the run fails (Cap.COMPENSATION)
            elif root:
                self._make_ready(step, new.run_at, new.created_at)
        self._runs[new.id] = run
        if new.key is not None:
            self._active_keys[(new.workflow, new.key)] = new.id

    # -- claiming and leases ---------------------------------------------------------
    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        """Lease the most urgent due, ready steps of the given workflows, queue by queue.

        Each queue of the request in its order, for at most its own limit and
        what the request still wants (``Cap.QUEUE``); a paused queue gives nothing,
        and a paused workflow's steps are passed over (``Cap.PAUSE_QUEUE``,
        ``Cap.PAUSE_WORKFLOW``), but for the steps of a forced run (``Cap.FORCE_RUN``).
        A queue with a global limit gives at most the limit minus its steps running
        now, counted under the store's lock, as a SQL store counts under the queue's
        limiter row (``Cap.QUEUE_LIMIT_GLOBAL``); a rate-limited one at most the tokens
        its bucket holds, charged for what it gave (``Cap.RATE_LIMIT``).
        """
        with self._lock:
            claimed: list[ClaimedAttempt] = []
            for queue in request.queues:
                left = request.limit - len(claimed)
                wanted = left if queue.limit is None else min(queue.limit, left)
                if queue.global_limit is not None:
                    wanted = min(wanted, queue.global_limit - self._running_in(queue.name))
                if queue.rate is not None:
                    wanted = min(wanted, self._queue_room(queue.name, queue.rate, request.now))
                if wanted <= 0:
                    continue
                paused = self._paused(PauseKind.QUEUE, queue.name)
                got = self._claim_queue(request, queue.name, wanted, paused)
                if queue.rate is not None:
                    self._charge_queue(queue.name, queue.rate, request.now, len(got))
                claimed.extend(got)
            return claimed

    def _running_in(self, queue: str) -> int:
        """Steps of ``queue`` running now, leases expired or not (lock held)."""
        return sum(1 for step in self._running.values() if step.run.queue == queue)

    def _claim_queue(
        self, request: ClaimRequest, queue: str, limit: int, paused: bool
    ) -> list[ClaimedAttempt]:
        """Lease up to ``limit`` of ``queue``'s most urgent due, ready steps (lock held).

        ``paused``: the queue is, so only the steps of forced runs are taken.
        """
        due = [
            s
            for s in self._ready.values()
            if s.due_at is not None
            and s.due_at <= request.now
            and s.run.queue == queue
            and s.run.workflow in request.workflows
            and (s.run.forced or not (paused or self._paused(PauseKind.WORKFLOW, s.run.workflow)))
        ]
        due.sort(key=lambda s: (-s.run.priority, s.due_at, s.seq))
        claimed: list[ClaimedAttempt] = []
        running = self._running_keys() if request.keys else Counter[str]()
        for step in due:
            if len(claimed) >= limit:
                break
            key = step.key if request.keys else None
            if key is not None:
                # Cap.CONCURRENCY_KEY: the key's running attempts, counted under the lock;
                # Cap.KEY_FIFO: only the key's oldest unfinished run is admitted.
                if running[key.name] >= key.limit:
                    continue
                if step.run.fifo_key is not None and self._fifo_head(key.name) is not step.run:
                    continue
                running[key.name] += 1
            del self._ready[step.id]
            token = ids.new_token()
            step.status = StepStatus.RUNNING
            step.attempt += 1
            step.token = token
            step.lease_until = request.lease_until
            step.node = request.node_id
            step.started_at = request.now
            self._transition(step, "claimed", request.now)
            self._running[step.id] = step
            self._tokens[token] = step
            run = step.run
            claimed.append(
                ClaimedAttempt(
                    token=token,
                    run_id=run.id,
                    workflow=run.workflow,
                    queue=run.queue,
                    step=step.name,
                    kind=step.kind,
                    attempt=step.attempt,
                    failures=step.failures,
                    reclaims=step.reclaims,
                    payload=run.payload,
                    # The parents that succeeded: a branch's wait timed out (no output).
                    inputs={
                        p: run.steps[p].output or b""
                        for p in step.parents
                        if run.steps[p].status is StepStatus.SUCCEEDED
                    },
                    labels=dict(run.labels),
                    closure=run.closure,
                    headers=dict(run.headers),
                    tenant=run.tenant,
                )
            )
        return claimed

    def _running_keys(self) -> Counter[str]:
        """Attempts running now per concurrency key, leases expired or not (lock held)."""
        return Counter(s.key.name for s in self._running.values() if s.key is not None)

    def _fifo_head(self, key: str) -> _Run | None:
        """The oldest unfinished run of the fifo key ``key`` (lock held)."""
        runs = self._fifo.get(key, {})
        for run_id in list(runs):
            if runs[run_id].state == ACTIVE:
                return runs[run_id]
            del runs[run_id]
        return None

    def _held(self, token: str) -> tuple[_Step | None, AttemptState]:
        step = self._tokens.get(token)
        if step is None or step.token != token:
            return None, AttemptState.LOST
        if step.status is StepStatus.RUNNING:
            return step, AttemptState.HELD
        if step.status is StepStatus.CANCELLED:
            return None, AttemptState.CANCELLED
        return None, AttemptState.LOST

    def renew(self, tokens: Collection[str], lease_until: int) -> RenewResult:
        """Extend every lease still held; report the others."""
        lost: set[str] = set()
        cancelled: set[str] = set()
        with self._lock:
            for token in tokens:
                step, state = self._held(token)
                if step is not None:
                    step.lease_until = lease_until
                elif state is AttemptState.CANCELLED:
                    cancelled.add(token)
                else:
                    lost.add(token)
        return RenewResult(frozenset(lost), frozenset(cancelled))

    def heartbeat(self, token: str, lease_until: int, now: int) -> AttemptState:
        """Renew one lease and record the heartbeat."""
        with self._lock:
            step, state = self._held(token)
            if step is not None:
                step.lease_until = lease_until
                step.heartbeat_at = now
            return state

    def record_progress(self, token: str, progress: bytes, now: int) -> AttemptState:
        """Store the step's progress."""
        with self._lock:
            step, state = self._held(token)
            if step is not None:
                step.progress = progress
                step.heartbeat_at = now
            return state

    def hand_back(self, tokens: Collection[str], now: int) -> int:
        """Make held attempts ready again at once."""
        count = 0
        with self._lock:
            for token in tokens:
                step, _ = self._held(token)
                if step is not None:
                    self._release(step)
                    self._make_ready(step, now)
                    self._transition(step, "snoozed", now)
                    count += 1
        return count

    def reclaim_expired(
        self,
        *,
        lease_now: int,
        now: int,
        workflows: Collection[str],
        max_reclaims: int,
        limit: int,
    ) -> ReclaimResult:
        """Requeue expired attempts; return those reclaimed too often."""
        requeued = 0
        abandoned: list[ExpiredAttempt] = []
        with self._lock:
            expired = [
                s
                for s in self._running.values()
                if s.lease_until is not None
                and s.lease_until < lease_now
                and s.run.workflow in workflows
            ]
            expired.sort(key=lambda s: (s.lease_until or 0, s.seq))
            for step in expired[:limit]:
                if step.reclaims >= max_reclaims:
                    assert step.token is not None
                    abandoned.append(
                        ExpiredAttempt(
                            token=step.token,
                            run_id=step.run.id,
                            workflow=step.run.workflow,
                            step=step.name,
                            attempt=step.attempt,
                            failures=step.failures,
                            reclaims=step.reclaims,
                        )
                    )
                    continue
                self._release(step)
                step.reclaims += 1
                self._make_ready(step, now)
                self._transition(step, "reclaimed", now)
                requeued += 1
        return ReclaimResult(requeued, tuple(abandoned))

    # -- outcomes ----------------------------------------------------------------------
    def finish(self, token: str, outcome: Outcome, now: int) -> FinishResult:
        """Apply ``outcome`` to the attempt ``token`` holds, or change nothing."""
        with self._lock:
            step, state = self._held(token)
            if step is None:
                if state is AttemptState.CANCELLED:
                    self._tokens.pop(token, None)  # the holder has heard; forget the token
                return FinishResult(state)
            self._release(step)
            run = step.run
            if isinstance(outcome, Succeeded):
                step.output = outcome.output
                return self._succeed(step, now)
            if isinstance(outcome, Failed):
                retry_at = outcome.retry_at
                if outcome.judged and not outcome.retry_stands(
                    run.run_at, sum(s.failures for s in run.steps.values())
                ):
                    retry_at = None
                step.failures += 1
                step.error = outcome.error
                self._record_error(run.id, outcome, now)
                if retry_at is not None:
                    step.reclaims = 0
                    self._make_ready(step, retry_at, now)
                    self._transition(step, "retried", now)
                    return FinishResult(AttemptState.HELD, ready=1)
                final = outcome.final_status
                if self._fail(step, outcome.error, now, final):
                    return FinishResult(AttemptState.HELD, run_status=final)
                return FinishResult(AttemptState.HELD, ready=1)  # compensating (COMPENSATION)
            if isinstance(outcome, Snoozed):
                self._make_ready(step, outcome.until, now)
                self._transition(step, "snoozed", now)
                return FinishResult(AttemptState.HELD, ready=1)
            if isinstance(outcome, SleepUntil):
                step.output = outcome.output
                step.status = StepStatus.SLEEPING
                step.due_at = outcome.until
                self._transition(step, "sleeping", now)
                self._timed[step.id] = step
                return FinishResult(AttemptState.HELD)
            if isinstance(outcome, WaitFor):
                step.signal = outcome.signal
                stored = run.signals.get(outcome.signal)
                if stored:
                    step.output = stored.popleft()
                    return self._succeed(step, now)
                step.status = StepStatus.WAITING
                step.due_at = outcome.deadline
                self._transition(step, "waiting", now)
                if outcome.deadline is not None:
                    self._timed[step.id] = step
                return FinishResult(AttemptState.HELD)
            raise TypeError(f"unknown outcome {outcome!r}")

    def finish_many(self, items: Sequence[tuple[str, Outcome]], now: int) -> list[FinishResult]:
        """Apply several outcomes at once (each fenced by its own token)."""
        with self._lock:
            return [self.finish(token, outcome, now) for token, outcome in items]

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        """:meth:`finish_many`, then :meth:`claim`, under one lock (the batch-outcomes facet)."""
        with self._lock:
            results = self.finish_many(items, now)
            return results, (self.claim(claim) if claim is not None else [])

    def advance_due(self, *, now: int, workflows: Collection[str], limit: int) -> AdvanceResult:
        """End due sleeps; fail waits past their deadline."""
        woken = timed_out = promoted = 0
        with self._lock:
            due = [
                s
                for s in self._timed.values()
                if s.due_at is not None and s.due_at <= now and s.run.workflow in workflows
            ]
            due.sort(key=lambda s: (s.due_at or 0, s.seq))
            for step in due[:limit]:
                # An earlier step of this pass may have ended the run and dropped this one.
                if self._timed.pop(step.id, None) is None:
                    continue
                if step.status is StepStatus.SCHEDULED:
                    self._make_ready(step, step.due_at or now)
                    promoted += 1
                elif step.status is StepStatus.SLEEPING:
                    self._succeed(step, now)
                    woken += 1
                elif step.status is StepStatus.WAITING:
                    error = ErrorInfo(
                        type=StepTimeout.__name__,
                        message=f"no signal {step.signal!r} arrived before the wait's deadline",
                        step=step.name,
                        attempt=step.attempt,
                    )
                    if not self._take_branch(step, error, now):  # Cap.WAIT_BRANCH
                        step.failures += 1
                        step.error = error
                        self._fail(step, error, now)
                    timed_out += 1
        return AdvanceResult(woken, timed_out, promoted)

    def send_signal(self, run_id: str, name: str, payload: bytes, now: int) -> SignalResult:
        """Resolve the first step waiting for ``name``, or keep the signal."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise RunNotFound(run_id)
            if run.state != ACTIVE:
                return SignalResult.RUN_FINISHED
            for step in run.steps.values():
                if step.status is StepStatus.WAITING and step.signal == name:
                    self._timed.pop(step.id, None)
                    step.output = payload
                    self._succeed(step, now)
                    return SignalResult.DELIVERED
            run.signals.setdefault(name, deque()).append(payload)
            return SignalResult.STORED

    def time_out_runs(
        self, workflow: str, due_before: int, error: ErrorInfo, now: int, limit: int
    ) -> list[str]:
        """Fail the unfinished runs of ``workflow`` due at or before ``due_before`` (RUN_TIMEOUT).

        Under the store's lock, so a run is judged once however many clients ask.
        """
        with self._lock:
            overdue = sorted(
                (
                    run
                    for run in self._runs.values()
                    if run.workflow == workflow and run.state == ACTIVE and run.run_at <= due_before
                ),
                key=lambda run: (run.run_at, run.seq),
            )[:limit]
            for run in overdue:
                self._end_run(run, Status.FAILED.value, now, error=error)
            return [run.id for run in overdue]

    def cancel_run(self, run_id: str, now: int) -> bool:
        """Cancel an unfinished run; running attempts learn at their next renewal."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise RunNotFound(run_id)
            if run.state != ACTIVE:
                return False
            self._end_run(run, Status.CANCELLED.value, now, error=None)
            return True

    # -- transitions shared by the operations above -------------------------------------
    def _transition(self, step: _Step, event: str, now: int) -> None:
        """Record a transition of ``step`` in its run's step history (``Cap.STEP_HISTORY``)."""
        run = step.run
        self._record_step(run.id, step.name, step.attempt, step.node, event, now)
        self._step_event(
            run_id=run.id,
            workflow=run.workflow,
            step=step.name,
            first=next(iter(run.steps)) == step.name,
            attempt=step.attempt,
            node=step.node,
            transition=event,
            error=step.error,
            now=now,
        )

    def _release(self, step: _Step) -> None:
        """Take ``step`` out of the running set (its token stops holding it)."""
        self._running.pop(step.id, None)
        if step.token is not None:
            self._tokens.pop(step.token, None)
        step.token = None
        step.lease_until = None

    def _make_ready(self, step: _Step, due_at: int, now: int | None = None) -> None:
        """Ready when due by ``now`` (or without a ``now``), scheduled otherwise."""
        step.due_at = due_at
        if now is not None and due_at > now:
            step.status = StepStatus.SCHEDULED
            self._timed[step.id] = step
            return
        step.status = StepStatus.READY
        self._ready[step.id] = step

    def _succeed(self, step: _Step, now: int) -> FinishResult:
        step.status = StepStatus.SUCCEEDED
        step.finished_at = now
        step.due_at = None
        self._transition(step, "succeeded", now)
        if step.kind is StepKind.COMPENSATION:
            return self._compensated(step, now)
        run = step.run
        self._skip_branch(step, now)  # a wait resolved in time skips its branch (WAIT_BRANCH)
        ready = 0
        for name in step.children:
            child = run.steps[name]
            child.parents_left -= 1
            if child.parents_left == 0 and child.status is StepStatus.BLOCKED:
                self._make_ready(child, now)
                ready += 1
        run.steps_left -= 1
        if run.steps_left == 0:
            # A run that kept an error while active had a step cancelled (Cap.CANCEL_STEP):
            # it ends cancelled once the rest of it is done, never succeeded.
            final = Status.SUCCEEDED if run.error is None else Status.CANCELLED
            self._end_run(run, final.value, now, error=run.error)
            return FinishResult(AttemptState.HELD, ready=ready, run_status=final)
        return FinishResult(AttemptState.HELD, ready=ready)

    def _fail(self, step: _Step, error: ErrorInfo, now: int, final: Status = Status.FAILED) -> bool:
        """``step`` failed for good: True when its run ended, False when it compensates."""
        step.status = StepStatus.FAILED
        step.finished_at = now
        step.due_at = None
        self._transition(step, "failed", now)
        return self._run_failed(step, final, error, now)

    def _end_run(self, run: _Run, state: str, now: int, error: ErrorInfo | None) -> None:
        run.state = state
        self._run_event(run.id, run.workflow, state, error, now)  # Cap.LIFECYCLE
        run.finished_at = now
        run.error = error
        run.signals.clear()
        if run.key is not None and self._active_keys.get((run.workflow, run.key)) == run.id:
            del self._active_keys[(run.workflow, run.key)]
        self._cancel_unfinished(run, now)

    def _cancel_unfinished(self, run: _Run, now: int) -> None:
        """Cancel the run's unfinished steps (it ended, or it fails and compensates)."""
        for step in run.steps.values():
            if step.status.finished:
                continue
            # A running attempt keeps its token, so its holder learns of the
            # cancellation at its next renewal instead of seeing a lost lease.
            self._running.pop(step.id, None)
            self._ready.pop(step.id, None)
            self._timed.pop(step.id, None)
            step.status = StepStatus.CANCELLED
            step.finished_at = now
            self._transition(step, "cancelled", now)

    # -- reading --------------------------------------------------------------------------
    def get_run(self, run_id: str) -> StoredRun | None:
        """A snapshot of the run and its steps."""
        with self._lock:
            run = self._runs.get(run_id)
            return None if run is None else self._snapshot(run)

    def list_runs(self, query: RunQuery) -> RunPage:
        """Newest first; the cursor holds the sequence number of the last run shown.

        Every run is matched in Python (:func:`run_matches`): an in-process store
        holds few enough runs that a walk costs less than keeping indexes.
        """
        before = cursor_position(query.cursor) if query.cursor is not None else None
        with self._lock:
            chosen: list[tuple[_Run, Counter[StepStatus]]] = []
            total = 0
            for run in sorted(self._runs.values(), key=lambda r: r.seq, reverse=True):
                counts = Counter(s.status for s in run.steps.values())
                if not run_matches(
                    query,
                    workflow=run.workflow,
                    queue=run.queue,
                    state=run.state,
                    run_at=run.run_at,
                    labels=run.labels,
                    tenant=run.tenant,
                    created_at=run.created_at,
                    finished_at=run.finished_at,
                    step_counts=counts,
                ):
                    continue
                total += 1
                if (before is None or run.seq < before) and len(chosen) <= query.limit:
                    chosen.append((run, counts))
                elif not query.count and len(chosen) > query.limit:
                    break
            more = len(chosen) > query.limit
            page = chosen[: query.limit]
            summaries = tuple(
                RunSummary(
                    id=r.id,
                    workflow=r.workflow,
                    queue=r.queue,
                    state=r.state,
                    key=r.key,
                    labels=dict(r.labels),
                    created_at=r.created_at,
                    run_at=r.run_at,
                    finished_at=r.finished_at,
                    error=r.error,
                    step_counts=counts,
                    tenant=r.tenant,
                )
                for r, counts in page
            )
            cursor = run_cursor(page[-1][0].seq) if more and page else None
            return RunPage(summaries, cursor, total if query.count else None)

    def _snapshot(self, run: _Run) -> StoredRun:
        return StoredRun(
            id=run.id,
            workflow=run.workflow,
            queue=run.queue,
            state=run.state,
            payload=run.payload,
            key=run.key,
            labels=dict(run.labels),
            created_at=run.created_at,
            run_at=run.run_at,
            finished_at=run.finished_at,
            error=run.error,
            headers=dict(run.headers),
            tenant=run.tenant,
            steps=tuple(
                StoredStep(
                    name=s.name,
                    kind=s.kind,
                    status=s.status,
                    parents=s.parents,
                    attempt=s.attempt,
                    failures=s.failures,
                    reclaims=s.reclaims,
                    output=s.output,
                    error=s.error,
                    node=s.node,
                    progress=s.progress,
                    signal=s.signal,
                    due_at=s.due_at,
                    started_at=s.started_at,
                    finished_at=s.finished_at,
                    heartbeat_at=s.heartbeat_at,
                )
                for s in run.steps.values()
            ),
        )

    def __repr__(self) -> str:
        return f"MemoryStore(runs={len(self._runs)})"
