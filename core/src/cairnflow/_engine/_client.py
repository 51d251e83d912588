"""The client: the one object applications use to define, enqueue, run and watch runs."""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal

from .._caps import Cap
from .._checks import check_seconds
from .._errors import (
    InvalidName,
    UnknownWorkflow,
    Unsupported,
    WaitTimeout,
)
from .._fleet import HandedBack, Recycle, StopCause, StopReport
from .._models import Job, RunError, RunInfo, RunRef, Status, StepEvent, StepKind
from .._names import check_headers, check_key, check_labels, check_name, check_tenant
from .._queues import QueueConfig
from ..clock import Clock, DatabaseClock, Real, Subscribable
from ..codec import Codec, JSONCodec
from ..drivers import check_spi_version
from ..ids import IdGenerator, default_id_generator
from ..middleware import EngineObserver, EnqueueHook, StepMiddleware
from ..notify import Notifier
from ..retry import JitterSource
from ..store import (
    ConcurrencyKey,
    NewRun,
    NewStep,
    RunStream,
    SignalResult,
    Store,
    StoreFacets,
)
from ..workflow import Workflow
from ._admin_api import AdminMethods
from ._attempt import End, RunningAttempt, monotonic
from ._commit import GroupCommit
from ._dispatcher import Dispatcher, WorkerPool
from ._keeper import LeaseKeeper
from ._leader import Elector, StoreElector
from ._lifecycle import LifecycleDispatcher, Subscriber
from ._lifecycle_api import LifecycleMethods
from ._lock_api import LockMethods
from ._pruner import Pruner
from ._queue_api import QueueMethods
from ._rate_api import RateMethods
from ._reads import RunLike, RunList, RunReader, run_id_of
from ._retention_api import RetentionMethods
from ._runner import StepRunner
from ._schedule_api import ScheduleMethods
from ._scheduler import Scheduler, TickEvent
from ._settings import Settings
from ._state import CLOSURE_WORKFLOW, EngineState
from ._stats_api import StatsMethods
from ._timing_api import TimingMethods
from ._watch import StopWatch
from ._writer import RunWriter

__all__ = ["Client"]

_NS = 1_000_000_000


class Client(
    ScheduleMethods,
    QueueMethods,
    LockMethods,
    RateMethods,
    TimingMethods,
    AdminMethods,
    StatsMethods,
    RetentionMethods,
    LifecycleMethods,
):
    """Defines, enqueues, runs and watches workflow runs on one store.

    ``workers`` caps how many step attempts run at once on this client.
    ``queues`` (``Cap.QUEUE``) are the queues it serves, as
    :class:`~cairnflow.QueueConfig` or plain names: it claims runs of those
    queues only, each queue at most its ``workers`` at once, higher
    ``priority`` first when ``workers`` is what bounds a claim. Without
    ``queues`` it serves the queues of the workflows it registered; without
    ``workers`` it has 8, or the sum of its queues' when each says how many.
    While its steps run shorter than the write that ends them (tiny steps
    on a database a round trip away), a client claims up to ``prefetch``
    attempts (default: ``workers``) ahead of a free worker, so each write
    ends and starts up to ``workers + prefetch`` attempts and the database's
    round trip and commit are paid once for all of them; with longer steps
    it claims only for free workers. ``prefetch=0`` never claims ahead.
    ``poll_interval`` is how often it looks for work other clients made due
    (a notifier wakes it sooner). A claimed step is a ``lease`` of that many
    seconds, renewed every third of it; a step whose worker died is retaken by
    any client after the lease, and after more than ``max_reclaims`` takeovers
    the attempt fails with :class:`~cairnflow.Abandoned`.

    ``clock`` drives due times; ``lease_clock`` measures leases (wall time
    shared by the cluster). ``jitter`` draws backoff jitter in [0, 1).
    ``payload_limit`` refuses larger encoded payloads before any write.
    ``lease_skew`` makes this client wait that much longer past a lease's end
    before taking the step over. ``database_clock=True`` (or a resync period
    in seconds) makes the database server's clock the one "now" for due times
    and leases (``Cap.DATABASE_CLOCK``), read now and every minute and advanced
    on the local monotonic clock in between. ``interrupt=False`` stops the client from
    raising :class:`~cairnflow.StepTimeout` (and friends) inside sync steps
    that must stop; they then only see ``ctx.cancelled``.

    ``id_generator(kind)`` names every run and step row this client creates
    (default: :func:`cairnflow.ids.default_id_generator`), before it is written.
    ``enqueue_timeout`` is how long ``enqueue`` and ``enqueue_many`` send
    their runs again while the store is unavailable (a write whose commit
    outcome was lost is found if it landed, never made twice), before they
    raise :class:`~cairnflow.OutcomeUnknown` naming the run ids; 0 never
    sends them again.

    ``error_history`` (``Cap.ERROR_HISTORY``): how many errors of its last
    failed attempts each run keeps, newest kept (:meth:`errors`); default 20
    where the store keeps histories, 0 turns it off. A workflow's own
    ``error_history`` overrides it for its runs.

    ``start()`` never migrates: run ``store.migrate()`` (or ``cairn migrate``)
    first. A client that is never started can still enqueue and read;
    ``enqueue_only=True`` (``Cap.ENQUEUE_ONLY``) makes that a promise: such a
    client refuses ``start()`` and ``drain()``, takes no lease, and wakes the
    running clients through the store's notifier when it enqueues.
    ``recycle`` (a :class:`~cairnflow.Recycle`, ``Cap.DRAIN``) makes the client
    drain and stop by itself after a number of attempts, a time, or at a
    resident memory size, for a supervisor to start a fresh process.

    ``prune_after`` (seconds or a ``timedelta``; ``Cap.RETENTION``): a started
    client prunes finished runs older than that every ``prune_interval``
    seconds, ``prune_chunk`` runs per transaction, one client of the database
    at a time (the prune lock); default None: runs are kept until deleted
    (docs/retention.md says why). ``archive=True`` (``Cap.ARCHIVE``) moves them
    to the archive instead (:meth:`archived_runs`).
    ``middleware`` run around every step attempt, the first outermost
    (:meth:`use` adds more); ``observers`` are told of claims, takeovers and
    outcomes (:meth:`observe`); ``enqueue_hooks`` add headers to every run this
    client enqueues (``Cap.HEADERS``; :meth:`add_enqueue_hook`). See
    :mod:`cairnflow.middleware` and docs/middleware.md.
    """

    def __init__(
        self,
        store: Store,
        *,
        workers: int | None = None,
        queues: Iterable[QueueConfig | str] | None = None,
        poll_interval: float = 1.0,
        lease: float = 30.0,
        max_reclaims: int = 5,
        node_id: str | None = None,
        codec: Codec | None = None,
        clock: Clock | None = None,
        lease_clock: Clock | None = None,
        jitter: JitterSource | None = None,
        notifier: Notifier | Literal[False] | None = None,
        payload_limit: int | None = None,
        lease_skew: float = 0.0,
        fetch_batch: int = 100,
        interrupt: bool = True,
        prefetch: int | None = None,
        database_clock: bool | float = False,
        logger: logging.Logger | None = None,
        role: Literal["all", "worker", "scheduler"] = "all",
        on_tick: Callable[[TickEvent], None] | None = None,
        tick_retention: float = 7 * 86_400.0,
        leader_election: bool | Elector = False,
        leader_lease: float = 15.0,
        id_generator: IdGenerator = default_id_generator,
        enqueue_timeout: float = 30.0,
        enqueue_only: bool = False,
        recycle: Recycle | None = None,
        error_history: int | None = None,
        prune_after: float | timedelta | None = None,
        prune_interval: float = 60.0,
        prune_chunk: int = 200,
        archive: bool = False,
        middleware: Iterable[StepMiddleware] = (),
        observers: Iterable[EngineObserver] = (),
        enqueue_hooks: Iterable[EnqueueHook] = (),
    ) -> None:
        check_spi_version(store.spi_version, f"store {type(store).__qualname__}")
        facets = StoreFacets.of(store)
        settings = Settings.build(
            store.capabilities,
            workers=workers,
            poll_interval=poll_interval,
            lease=lease,
            max_reclaims=max_reclaims,
            node_id=node_id,
            payload_limit=payload_limit,
            lease_skew=lease_skew,
            fetch_batch=fetch_batch,
            interrupt=interrupt,
            prefetch=prefetch,
            role=role,
            tick_retention=tick_retention,
            enqueue_timeout=enqueue_timeout,
            queues=queues,
            recycle=recycle,
            enqueue_only=enqueue_only,
            error_history=error_history,
            prune_after=prune_after,
            prune_interval=prune_interval,
            prune_chunk=prune_chunk,
            archive=archive,
        )
        if database_clock is not False:
            if Cap.DATABASE_CLOCK not in store.capabilities:
                raise Unsupported(Cap.DATABASE_CLOCK, "Client(database_clock=...)")
            if clock is not None or lease_clock is not None:
                raise ValueError(
                    "database_clock replaces clock and lease_clock: give one or the other"
                )
            resync = 60.0 if database_clock is True else float(database_clock)
            assert facets.clock is not None  # check_store: DATABASE_CLOCK has its facet
            clock = lease_clock = DatabaseClock(facets.clock.database_now, resync)
        chosen: Notifier | None
        if notifier is False:
            chosen = None
        elif notifier is None:
            chosen = store.default_notifier()
        else:
            chosen = notifier
        self._state = EngineState(
            facets=facets,
            settings=settings,
            codec=codec or JSONCodec(),
            clock=clock or Real(),
            lease_clock=lease_clock or Real(),
            jitter=jitter or random.random,
            notifier=chosen,
            logger=logger or logging.getLogger("cairnflow"),
        )
        self._hooks: tuple[EnqueueHook, ...] = ()
        for mw in middleware:
            self.use(mw)
        for observer in observers:
            self.observe(observer)
        for hook in enqueue_hooks:
            self.add_enqueue_hook(hook)
        self._reads = RunReader(self._state)
        self._writer = RunWriter(self._state, id_generator)
        if on_tick is not None:
            if not callable(on_tick):
                raise TypeError(f"on_tick must be callable, got {on_tick!r}")
            self._state.require(Cap.TICK_EVENTS, "Client(on_tick=...)")
        self._scheduler = (
            None
            if facets.schedules is None
            else Scheduler(self._state, facets.schedules, self._new_run, on_tick)
        )
        self._elector = self._make_elector(leader_election, leader_lease)
        self._steps: dict[str, tuple[NewStep, ...]] = {}
        self._keyed: dict[str, bool] = {}
        """Whether a registered workflow's runs carry a concurrency key: ``has_keys``, worked
        out at register, where each new run looks it up."""
        self._lifecycle = threading.Lock()
        self._started = False
        self._stopped = False
        self._commit: GroupCommit | None = None
        self._runner: StepRunner | None = None
        self._pool: WorkerPool | None = None
        self._dispatcher: Dispatcher | None = None
        self._keeper: LeaseKeeper | None = None
        self._pruner: Pruner | None = None
        self._subscribers: list[Subscriber] = []
        self._events: LifecycleDispatcher | None = None
        """Delivers lifecycle events and runs on_failure handlers (``Cap.LIFECYCLE``)."""
        self._cleanups: list[Callable[[], None]] = []
        self._watch: StopWatch | None = None
        self._idle: tuple[float, float] | None = None
        """``stop_when_idle``'s grace and drain timeout, once asked."""
        self._halting: int | None = None
        """The thread that stops this client (its ident), once one does."""
        self._cut = threading.Event()
        """Set to end a drain's wait at once (a ``stop()`` during a drain)."""
        self._halted = threading.Event()
        self._report: StopReport | None = None

    def _make_elector(self, choice: bool | Elector, lease: float) -> Elector | None:
        if choice is False:
            return None
        if choice is True:
            self._state.require(Cap.LEADER_ELECTION, "Client(leader_election=True)")
            leadership = self._state.facets.leadership
            assert leadership is not None  # declared, so check_store made sure
            return StoreElector(self._state, leadership, lease=check_seconds("leader_lease", lease))
        if not isinstance(choice, Elector):
            raise TypeError(
                f"leader_election takes True or an Elector (start, stop, is_leader), got {choice!r}"
            )
        return choice

    # -- integrations -------------------------------------------------------------------------
    def use(self, middleware: StepMiddleware) -> None:
        """Run ``middleware(ctx, call_next)`` around every step attempt of this client.

        Middleware added first runs outermost. Add them before :meth:`start`: an
        attempt already running keeps the chain it began with.
        """
        if not callable(middleware):
            raise TypeError(f"a step middleware is a callable (ctx, call_next), got {middleware!r}")
        state = self._state
        state.middleware = (*state.middleware, middleware)

    def observe(self, observer: EngineObserver) -> None:
        """Tell ``observer`` (a :class:`~cairnflow.middleware.EngineObserver`) what happens."""
        if not isinstance(observer, EngineObserver):
            raise TypeError(
                f"observe() takes a cairnflow.middleware.EngineObserver, got {observer!r}"
            )
        state = self._state
        state.observers = (*state.observers, observer)

    def add_enqueue_hook(self, hook: EnqueueHook) -> None:
        """Call ``hook(workflow, headers)`` for every run this client enqueues (``Cap.HEADERS``)."""
        if not callable(hook):
            raise TypeError(f"an enqueue hook is a callable (workflow, headers), got {hook!r}")
        self._state.require(Cap.HEADERS, "an enqueue hook")
        self._hooks = (*self._hooks, hook)

    # -- properties -------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        """True while this client fires schedules as the leader.

        Without leader election every running client that fires schedules is
        one (the store makes each tick fire once); with it, only the elected one.
        """
        if not self.running or not self._state.settings.fires_schedules:
            return False
        return self._elector is None or self._elector.is_leader()

    @property
    def store(self) -> Store:
        """The store this client works on."""
        return self._state.store

    @property
    def node_id(self) -> str:
        """This client's node id, recorded on every attempt it claims."""
        return self._state.settings.node_id

    @property
    def capabilities(self) -> frozenset[Cap]:
        """What the store declared."""
        return self._state.caps

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._started and not self._stopped

    @property
    def draining(self) -> bool:
        """True while the client stops: it claims nothing, its running attempts finish."""
        return self._halting is not None and not self._halted.is_set()

    @property
    def enqueue_only(self) -> bool:
        """True for a client that only enqueues and reads (``Cap.ENQUEUE_ONLY``)."""
        return self._state.settings.enqueue_only

    @property
    def workflows(self) -> Mapping[str, Workflow]:
        """The registered workflows by name."""
        return dict(self._state.registry)

    # -- definitions ---------------------------------------------------------------------------
    def register(self, *workflows: Workflow) -> None:
        """Register workflows this client enqueues and runs.

        A client only claims steps of workflows it registered. On a running
        client the workflow's capabilities are checked at once.
        """
        for workflow in workflows:
            if not isinstance(workflow, Workflow):
                raise TypeError(f"register() takes Workflow objects, got {workflow!r}")
            workflow.validate()
            if workflow.name.startswith("cairnflow."):
                raise InvalidName(
                    f"workflow name {workflow.name!r} is reserved: names starting with "
                    f"'cairnflow.' belong to the engine"
                )
            known = self._state.registry.get(workflow.name)
            if known is not None and known is not workflow:
                raise ValueError(f"another workflow named {workflow.name!r} is already registered")
            if self.running:
                self._check_workflow(workflow)
                if workflow.failure_handler is not None:
                    self._state.register(workflow)
                    if self._events is not None:
                        self._events.subscribe()
                    else:
                        self._start_events()
                if self._scheduler is not None and self._state.settings.fires_schedules:
                    now = self._state.now()
                    for schedule in workflow.schedules.values():
                        self._scheduler.record(workflow.name, schedule, now)
            self._keyed[workflow.name] = workflow.has_keys
            self._steps[workflow.name] = tuple(
                NewStep(
                    name=step.name,
                    kind=step.kind,
                    parents=workflow.stored_parents(step.name),
                    children=workflow.children(step.name),
                )
                for step in workflow.steps.values()
            )
            self._state.register(workflow)

    def _check_workflow(self, workflow: Workflow) -> None:
        workflow.check_concurrency()
        for cap, why in workflow.required_capabilities().items():
            self._state.require(cap, f"workflow {workflow.name!r} ({why})")

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Check every workflow and the schema, then start working. Does not block.

        Raises :class:`~cairnflow.Unsupported` naming the workflow and the
        capability a store lacks, and :class:`~cairnflow.SchemaNotReady` when
        the database was not migrated.
        """
        with self._lifecycle:
            if self._state.settings.enqueue_only:
                raise RuntimeError(
                    "this client is enqueue_only: it enqueues and reads, and never runs steps; "
                    "start a Client without enqueue_only=True to run them"
                )
            if self._started:
                raise RuntimeError("this client was already started; make a new Client to restart")
            for workflow in self._state.registry.values():
                self._check_workflow(workflow)
            self._state.store.check_schema()
            state = self._state
            self._commit = GroupCommit(state)
            self._runner = StepRunner(state, self._commit)
            self._pool = WorkerPool(state, self._runner)
            self._keeper = LeaseKeeper(state, self._runner)
            firing = self._scheduler if state.settings.fires_schedules else None
            if firing is not None:
                firing.record_declared()
            self._dispatcher = Dispatcher(
                state, self._runner, self._pool, firing, self._elector if firing else None
            )
            self._started = True
            state.running = True
            self._commit.start()
            self._pool.start()
            self._keeper.start()
            if self._elector is not None and firing is not None:
                self._elector.start()
            self._dispatcher.start()
            retention = state.facets.retention
            if state.settings.prune_after is not None and retention is not None:
                self._pruner = Pruner(state, retention, state.locks("Client(prune_after=...)"))
                self._pruner.start()
            self._start_events()
            if state.notifier is not None:
                self._cleanups.append(state.notifier.listen(state.channel, state.wake))
            if isinstance(state.clock, Subscribable):
                self._cleanups.append(state.clock.subscribe(state.wake))
            if state.settings.recycle is not None or self._idle is not None:
                self._watch = StopWatch(state, self._stop_from_watch)
                if self._idle is not None:
                    self._watch.when_idle(*self._idle)
                self._watch.start()

    def stop(self, grace: float = 0.0, timeout: float = 10.0) -> None:
        """Stop working: hand running steps back and wait for the workers.

        New claims stop at once. With ``grace``, running attempts get that many
        seconds to finish and write their outcomes first. The attempts still
        running are then handed back, so another client can take them at once
        instead of after their lease; their code sees ``ctx.cancelled`` (and a
        :class:`~cairnflow.Cancelled` raised inside sync steps), and whatever
        they return is not written. ``timeout`` bounds the wait for threads.
        A stop during a :meth:`drain` ends the drain's wait at once. The stop
        is reported by :meth:`wait_stopped` (``StopCause.REQUESTED``). Not from
        a signal handler: it may run in the middle of a stop of the same thread;
        start a thread that calls it (``cairn worker`` does).
        """
        self._halt(StopCause.REQUESTED, grace, timeout, cut=True)

    def drain(self, timeout: float = 30.0, *, join_timeout: float = 10.0) -> StopReport:
        """Stop claiming at once, let running attempts finish, then stop (``Cap.DRAIN``).

        Attempts claimed ahead that no worker began go back at once. Those still
        running after ``timeout`` seconds are handed back, ready for another
        client at once (not counted as failures of their steps); the report
        names them (``Cap.SHUTDOWN_REQUEUE``). An outcome already decided is
        written, once, whatever the deadline. ``join_timeout`` bounds the wait
        for the client's threads after that. Returns the report of the stop
        (the earlier one when the client had stopped already).
        """
        self._state.require(Cap.DRAIN, "drain()")
        self._refuse_enqueue_only("drain()")
        timeout = check_seconds("timeout", timeout, zero=True)
        report = self._halt(StopCause.DRAINED, timeout, join_timeout, cut=False)
        return report if report is not None else StopReport(StopCause.DRAINED)

    def stop_when_idle(self, grace: float, *, drain_timeout: float = 30.0) -> None:
        """Drain once no unfinished run of this client's workflows on its queues existed for
        ``grace`` seconds (``Cap.DRAIN``). Returns at once; :meth:`wait_stopped` waits.

        Judged from the store: a run sleeping, waiting for a signal, delayed, or
        running on another client keeps the client up; a run enqueued during the
        grace starts it again. May be called before :meth:`start`.
        """
        self._state.require(Cap.DRAIN, "stop_when_idle()")
        self._refuse_enqueue_only("stop_when_idle()")
        grace = check_seconds("grace", grace, zero=True)
        drain_timeout = check_seconds("drain_timeout", drain_timeout, zero=True)
        with self._lifecycle:
            self._idle = (grace, drain_timeout)
            if self._started and not self._stopped:
                if self._watch is None:
                    self._watch = StopWatch(self._state, self._stop_from_watch)
                self._watch.when_idle(grace, drain_timeout)

    def wait_stopped(self, timeout: float | None = None) -> StopReport:
        """Wait until this client has stopped, by any cause, and return its report.

        The report says why (:class:`~cairnflow.StopCause`: requested, drained,
        idle or a recycle) and which attempts were handed back
        (``Cap.SHUTDOWN_REQUEUE``). Raises :class:`~cairnflow.WaitTimeout` after
        ``timeout`` seconds, and ``RuntimeError`` for a client never started.
        """
        self._state.require(Cap.SHUTDOWN_REQUEUE, "wait_stopped()")
        if not self._started:
            raise RuntimeError("this client was never started: it has no stop to report")
        if not self._halted.wait(timeout):
            raise WaitTimeout(f"client {self.node_id} did not stop within {timeout:g}s")
        assert self._report is not None
        return self._report

    def _refuse_enqueue_only(self, what: str) -> None:
        if self._state.settings.enqueue_only:
            raise RuntimeError(f"{what}: this client is enqueue_only and never runs steps")

    def _stop_from_watch(self, cause: StopCause, grace: float) -> None:
        # Never waits for a stop begun elsewhere: that stop joins this thread.
        self._halt(cause, grace, 10.0, cut=False, wait=False)

    def _halt(
        self, cause: StopCause, grace: float, timeout: float, *, cut: bool, wait: bool = True
    ) -> StopReport | None:
        """Stop for ``cause`` (one stop per client); the report, or None if never started.

        On a client stopping already, wait for that stop; with ``cut`` (a ``stop()``)
        end its drain's wait first, so what still runs is handed back at once.
        """
        with self._lifecycle:
            if not self._started:
                return None
            first = not self._stopped
            if first:
                self._stopped = True
                self._halting = threading.get_ident()
        if not first:
            # Stopping already (a drain, or a stop by the watch): wait for it, unless this
            # is its own thread (a signal handler that runs in it).
            if cut:
                self._cut.set()
            if wait and self._halting != threading.get_ident():
                self._halted.wait(timeout + 1.0)
            return self._report
        try:
            report = self._shut_down(cause, grace, timeout)
        finally:
            if self._report is None:
                self._report = StopReport(cause)
            self._halted.set()
        return report

    def _shut_down(self, cause: StopCause, grace: float, timeout: float) -> StopReport:
        state = self._state
        assert self._dispatcher is not None
        assert self._pool is not None
        assert self._keeper is not None
        state.stopping.set()
        state.wake_event.set()
        if self._watch is not None:
            self._watch.stop(timeout)
        # Said once the claim loop has ended, not when the stop was asked for: an operator
        # (and a test of `cairn worker`) may read it as "nothing more is claimed".
        if self._dispatcher.join(timeout):
            state.log.info(
                "client %s claims nothing more (%s); %d attempt(s) held",
                state.settings.node_id,
                cause.value,
                len(state.held_attempts()),
            )
        else:
            state.log.warning(
                "the claim loop of client %s did not end within %gs (the store is slow "
                "or down); the stop goes on",
                state.settings.node_id,
                timeout,
            )
        if self._pruner is not None:
            self._pruner.stop(timeout)
        if self._events is not None:
            self._events.stop(timeout)
        handed: list[HandedBack] = []
        if grace > 0:
            # A drain starts nothing new: attempts claimed ahead that no worker began go
            # back at once, for another client to take now rather than after this one. Not
            # a recycle after its jobs: it claimed no more than those, and lets them all
            # finish (Recycle.jobs), the one a worker has not begun yet too.
            if cause is not StopCause.RECYCLE_JOBS:
                unbegun = [a for a in state.held_attempts() if a.give_back_unbegun()]
                handed += self._hand_back(unbegun)
            ends = monotonic() + grace
            while (
                monotonic() < ends
                and not self._cut.is_set()
                and any(a.end is not End.STOPPING for a in state.held_attempts())
            ):
                self._cut.wait(0.01)
        handed += self._hand_back([a for a in state.held_attempts() if a.stop(End.STOPPING)])
        stuck = self._pool.stop(timeout)
        if stuck:
            state.log.warning("workers still inside step code after stop: %s", ", ".join(stuck))
        assert self._commit is not None
        if not self._commit.close(timeout):
            state.log.warning(
                "outcomes still being written after stop (the store is slow or down); "
                "their attempts are retaken after their leases"
            )
        self._keeper.stop(timeout)
        if self._elector is not None and state.settings.fires_schedules:
            self._elector.stop()
        for cleanup in reversed(self._cleanups):
            cleanup()
        self._cleanups.clear()
        state.running = False
        state.run_finished()
        self._report = StopReport(cause, tuple(handed))
        return self._report

    def _hand_back(self, attempts: Sequence[RunningAttempt]) -> list[HandedBack]:
        """Make ``attempts`` (finalized for stopping) ready again in the store; name them."""
        if not attempts:
            return []
        state = self._state
        try:
            state.store.hand_back([a.token for a in attempts], state.now())
        except Exception:
            state.log.warning(
                "could not hand %d attempt(s) back; they are retaken after their leases",
                len(attempts),
                exc_info=True,
            )
            return []
        state.work_made_ready(others=True)
        return [HandedBack(a.claimed.run_id, a.claimed.step, a.claimed.attempt) for a in attempts]

    def __enter__(self) -> Client:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wake(self, *, others: bool = False) -> None:
        """Look for work now instead of at the next poll (e.g. after ``enqueue_tx`` commits).

        ``others=True`` also tells the other clients of the store, through its
        notifier, that work may be due, as :meth:`enqueue` does after its commit:
        what a client that is never started (a web application's) calls once the
        application's transaction holding its ``enqueue_tx`` runs has committed.
        """
        if self.running:
            self._state.wake()
        if others:
            self._state.notify_others()

    # -- enqueueing ------------------------------------------------------------------------------
    def enqueue(
        self,
        workflow: str | Workflow,
        payload: Any = None,
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        labels: Mapping[str, str] | None = None,
        queue: str | None = None,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> RunRef:
        """Enqueue one run of ``workflow`` with ``payload``; return its reference.

        ``key`` is an idempotency key: while an unfinished run of the workflow
        holds it, another enqueue raises :class:`~cairnflow.DuplicateRun`.
        ``delay`` (seconds or a timedelta) starts the run later. ``labels`` are
        short strings stored with the run, for queries. ``queue`` puts this run
        on another queue than its workflow's (``Cap.QUEUE_OVERRIDE``).
        ``headers`` (``Cap.HEADERS``) are short strings kept with the run that
        every step reads as ``ctx.headers``, after those the client's enqueue
        hooks added (the caller's win). ``tenant`` (``Cap.TENANT``) is the
        tenant the run belongs to: kept in its own column, filtered on by
        :meth:`runs`, read by its steps as ``ctx.tenant``, and the owner of its
        per-tenant concurrency keys (``Concurrency(per_tenant=True)``).

        One call makes one run, with or without a key, even when the
        connection is lost while the run is committed: the write is sent
        again under the same run id for ``enqueue_timeout`` seconds, and found
        if it had landed. After that, :class:`~cairnflow.OutcomeUnknown`
        names the run id, whose fate is unknown.
        """
        name = workflow.name if isinstance(workflow, Workflow) else workflow
        job = Job(name, payload, key, _seconds(delay), labels, queue, headers, tenant)
        return self._create([job])[0]

    def enqueue_many(self, jobs: Iterable[Job]) -> list[RunRef]:
        """Enqueue several runs in one transaction: all of them or none.

        Sent again through a lost connection like :meth:`enqueue`: all the
        runs are made once, or :class:`~cairnflow.OutcomeUnknown` names them.
        """
        jobs = list(jobs)
        self._state.require(Cap.BATCH_ENQUEUE, "enqueue_many()")
        if not jobs:
            return []
        return self._create(jobs)

    def enqueue_tx(
        self,
        tx: Any,
        workflow: str | Workflow,
        payload: Any = None,
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        labels: Mapping[str, str] | None = None,
        queue: str | None = None,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> RunRef:
        """Enqueue inside the application's own transaction ``tx`` (a driver connection).

        ``queue`` puts the run on another queue than its workflow's, as with
        :meth:`enqueue` (``Cap.QUEUE_OVERRIDE``); ``tenant`` as with :meth:`enqueue`
        (``Cap.TENANT``).
        The run commits or rolls back with the application's writes. Call
        :meth:`wake` after the commit to start it without waiting for a poll.
        Nothing is sent again here when the store is unavailable: the
        transaction, its COMMIT and retrying it are the application's (a new
        call makes a new run id).
        """
        self._state.require(Cap.TRANSACTIONAL_ENQUEUE, "enqueue_tx()")
        name = workflow.name if isinstance(workflow, Workflow) else workflow
        job = Job(name, payload, key, _seconds(delay), labels, queue, headers, tenant)
        return self._create([job], tx=tx, wake=False)[0]

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> RunRef:
        """Run ``fn(*args, **kwargs)`` as a one-step run (``Cap.CLOSURE``: in-process stores).

        The callable is not registered and not stored as data; its return
        value becomes the run's result.
        """
        state = self._state
        state.require(Cap.CLOSURE, "submit()")
        if not callable(fn):
            raise TypeError(f"submit() takes a callable, got {fn!r}")
        now = state.now()
        steps = (NewStep("call", StepKind.TASK, (), ()),)
        run_id, step_ids = self._writer.names(len(steps))
        new = NewRun(
            id=run_id,
            workflow=CLOSURE_WORKFLOW,
            queue="default",
            priority=0,
            payload=state.codec.encode(None),
            steps=steps,
            step_ids=step_ids,
            created_at=now,
            run_at=now,
            closure=functools.partial(fn, *args, **kwargs),
        )
        self._writer.create([new])
        state.work_made_ready(others=False)
        return RunRef(run_id, CLOSURE_WORKFLOW)

    def _create(self, jobs: Sequence[Job], *, tx: Any = None, wake: bool = True) -> list[RunRef]:
        state = self._state
        now = state.now()
        steps = self._steps
        names = self._writer.names_many([len(steps.get(job.workflow, ())) for job in jobs])
        if tx is None and len(jobs) > 1:
            # Made as the store writes them (RunStream): the Python of the next chunk of
            # runs overlaps the server's writing of the last where the engine pipelines.
            stream = RunStream(
                [run_id for run_id, _ in names],
                lambda at: self._new_run(jobs[at], now, names[at]),
            )
            run_ids = self._writer.create_streamed(stream)
            runs = stream.all()
        else:
            runs = [self._new_run(job, now, name) for job, name in zip(jobs, names, strict=True)]
            if tx is None:
                run_ids = self._writer.create(runs)
            else:
                transactional = state.facets.transactional
                assert transactional is not None  # enqueue_tx required the capability
                run_ids = transactional.create_runs_in(tx, runs)
        if wake:
            self._after_create(runs, now)
        return [RunRef(run_id, run.workflow) for run_id, run in zip(run_ids, runs, strict=True)]

    def _after_create(self, runs: Sequence[NewRun], now: int) -> None:
        state = self._state
        for run in runs:
            if run.run_at > now:
                state.add_timer(run.run_at)
        if any(run.run_at <= now for run in runs):
            state.work_made_ready(others=True)

    def _new_run(
        self, job: Job, now: int, names: tuple[str, tuple[str, ...]] | None = None
    ) -> NewRun:
        """The run ``job`` makes, checked, named ``names`` (its id and its steps' ids; made
        here when None)."""
        state = self._state
        workflow = state.registry.get(job.workflow)
        if workflow is None:
            check_name("workflow", job.workflow)
            raise UnknownWorkflow(job.workflow, list(state.registry))
        key = None
        if job.key is not None:
            state.require(Cap.IDEMPOTENCY, "an idempotency key")
            key = check_key(job.key)
        run_at = now
        if job.delay is not None:
            delay = _seconds(job.delay)
            if delay is not None and delay > 0:
                state.require(Cap.DELAYED_START, "a delayed start")
                run_at = now + int(delay * _NS)
        labels = check_labels(job.labels)
        headers = self._headers(workflow.name, job.headers)
        tenant = None
        if job.tenant is not None:
            tenant = check_tenant(job.tenant)
            state.require(Cap.TENANT, "enqueue(tenant=...)")
        queue = workflow.queue
        if job.queue is not None:
            state.require(Cap.QUEUE_OVERRIDE, "enqueue(queue=...)")
            queue = check_name("queue", job.queue)
        payload = self._encode(job.payload, f"the payload of workflow {workflow.name!r}")
        steps = self._steps[workflow.name]
        run_id, step_ids = self._writer.names(len(steps)) if names is None else names
        keyed = self._keyed[workflow.name]
        keys = _concurrency_keys(workflow, job.payload, tenant) if keyed else ()
        return NewRun(
            id=run_id,
            workflow=workflow.name,
            queue=queue,
            priority=workflow.priority,
            payload=payload,
            steps=steps,
            step_ids=step_ids,
            created_at=now,
            run_at=run_at,
            key=key,
            labels=labels,
            keys=keys,
            headers=headers,
            tenant=tenant,
        )

    def _headers(self, workflow: str, given: Mapping[str, str] | None) -> dict[str, str]:
        """The headers of a new run: the enqueue hooks', then the caller's (``Cap.HEADERS``)."""
        if given is not None:
            given = check_headers(given)
            if given:
                self._state.require(Cap.HEADERS, "enqueue(headers=...)")
        if not self._hooks:
            return given or {}
        made: dict[str, str] = {}
        for hook in self._hooks:
            hook(workflow, made)
        made.update(given or {})
        return check_headers(made)

    def _encode(self, value: Any, what: str) -> bytes:
        return self._state.encode(value, what)

    # -- acting on runs ---------------------------------------------------------------
    def signal(self, run: RunLike, name: str, payload: Any = None) -> SignalResult:
        """Send signal ``name`` with ``payload`` to a run.

        A step waiting for it resolves at once; otherwise the signal is kept
        until a wait for it becomes ready. Raises :class:`~cairnflow.RunNotFound`.
        """
        state = self._state
        state.require(Cap.SIGNAL, "signal()")
        check_name("signal", name)
        data = self._encode(payload, f"the payload of signal {name!r}")
        result = state.store.send_signal(run_id_of(run), name, data, state.now())
        if result is SignalResult.DELIVERED:
            state.work_made_ready(others=True)
            state.run_finished()
        return result

    def cancel(self, run: RunLike) -> bool:
        """Cancel an unfinished run; False if it had already finished.

        Steps running on this client see ``ctx.cancelled`` at once; on other
        clients at their next lease renewal. Their outcomes are not written.
        """
        state = self._state
        state.require(Cap.CANCEL, "cancel()")
        run_id = run_id_of(run)
        cancelled = state.store.cancel_run(run_id, state.now())
        if cancelled:
            for running in state.held_attempts():
                if running.claimed.run_id == run_id:
                    running.stop(End.CANCELLED)
            state.run_finished()
        return cancelled

    # -- reading ----------------------------------------------------------------------
    def info(self, run: RunLike) -> RunInfo:
        """A snapshot of the run: status, steps, result and error."""
        return self._reads.info(run)

    def errors(self, run: RunLike) -> list[RunError]:
        """The errors of the run's last failed attempts, newest first (``Cap.ERROR_HISTORY``).

        Each names its step, attempt, node and time, with the error's type,
        message and traceback. A run keeps the newest ``error_history`` of them
        (the client's or its workflow's; the store drops older ones as it
        records a new one). Empty for a run that never failed an attempt.
        """
        state = self._state
        state.require(Cap.ERROR_HISTORY, "errors()")
        history = state.facets.errors
        assert history is not None  # declared, so check_store made sure
        return history.run_errors(run_id_of(run))

    def step_history(self, run: RunLike) -> list[StepEvent]:
        """Every kept transition of the run's steps, oldest first (``Cap.STEP_HISTORY``).

        Claimed, succeeded, failed, retried, reclaimed (a lease ran out and
        another client took the step back), snoozed, sleeping, waiting,
        cancelled, reopened: each recorded by the store in the transaction that
        made it, so an attempt fenced out (its lease lost) records nothing. A
        run keeps its newest :data:`~cairnflow._models.STEP_HISTORY_KEEP`
        (plus its attempts running now). Empty for an unknown run.
        """
        state = self._state
        state.require(Cap.STEP_HISTORY, "step_history()")
        history = state.facets.history
        assert history is not None  # declared, so check_store made sure
        return history.step_history(run_id_of(run))

    def wait(self, run: RunLike, timeout: float | None = None) -> RunInfo:
        """Block until the run finishes and return its info.

        Raises :class:`~cairnflow.WaitTimeout` after ``timeout`` seconds (the run
        goes on).
        """
        return self._reads.wait(run, timeout)

    def result(self, run: RunLike, timeout: float | None = None) -> Any:
        """Wait for the run and return its result; raise :class:`~cairnflow.RunFailed` otherwise.

        The result is the output of the run's last step, or a dict of outputs
        by step name when it has several last steps.
        """
        return self._reads.result(run, timeout)

    def runs(
        self,
        *,
        workflow: str | None = None,
        queue: str | None = None,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: Mapping[str, str] | None = None,
        label_prefix: tuple[str, str] | None = None,
        tenant: str | None = None,
        created_since: int | None = None,
        created_until: int | None = None,
        finished_since: int | None = None,
        finished_until: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
        count: bool = False,
    ) -> RunList:
        """List runs of every workflow in the store, newest first (``Cap.RUN_QUERY``).

        Every filter given must hold: ``status`` one or several statuses (the
        active ones as exactly as the final ones); ``labels`` every given label;
        ``label_prefix`` ``(name, prefix)``: the label starts with the prefix
        (``Cap.LABEL_PREFIX``); ``tenant`` one tenant's runs (``Cap.TENANT``);
        ``created_*`` / ``finished_*`` ranges of Unix nanoseconds, ``since``
        included, ``until`` excluded. Pass the returned
        ``cursor`` for the next page; ``count=True`` also counts every match
        (``RunList.total``). Each :class:`RunOverview` names its failed step
        and the error's summary. A bad filter raises :class:`~cairnflow.InvalidQuery`.
        """
        return self._reads.runs(
            workflow=workflow,
            queue=queue,
            status=status,
            labels=labels,
            label_prefix=label_prefix,
            tenant=tenant,
            created_since=created_since,
            created_until=created_until,
            finished_since=finished_since,
            finished_until=finished_until,
            limit=limit,
            cursor=cursor,
            count=count,
        )

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped" if self._stopped else "idle"
        return f"<Client {self.node_id} on {self._state.store.describe().url} {state}>"


def _seconds(delay: float | timedelta | None) -> float | None:
    if delay is None:
        return None
    if isinstance(delay, timedelta):
        delay = delay.total_seconds()
    return check_seconds("delay", delay, zero=True)


def _concurrency_keys(
    workflow: Workflow, payload: Any, tenant: str | None
) -> tuple[ConcurrencyKey | None, ...]:
    """Each step's concurrency key for a run of ``workflow`` with ``payload`` (at enqueue);
    a per-tenant key is the run's ``tenant``'s (``Concurrency(per_tenant=True)``).

    Each key function is called once per run, on the enqueuing client; what it
    returns is checked here, before anything is written.
    """
    computed: dict[int, ConcurrencyKey] = {}
    keys: list[ConcurrencyKey | None] = []
    for step in workflow.steps.values():
        declared = workflow.concurrency_for(step)
        if declared is None:
            keys.append(None)
            continue
        key = computed.get(id(declared))
        if key is None:
            where = f"workflow {workflow.name!r}" + (
                f", step {step.name!r}" if step.concurrency is not None else ""
            )
            name = declared.compute(payload, where, tenant)
            key = computed[id(declared)] = ConcurrencyKey(name, declared.limit, declared.fifo)
        keys.append(key)
    return tuple(keys)
