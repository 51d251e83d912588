"""Workflow definitions: a named DAG of steps.

A workflow is plain data plus the step functions; it is checked when it is
defined (names, parents, cycles), so a broken DAG never reaches a store::

    orders = cf.Workflow("process-order", queue="default")

    @orders.step(retry=cf.RetryPolicy(max_attempts=5))
    def charge(ctx, order): ...

    @orders.step(after=[charge], timeout=30)
    def ship(ctx, charged): ...

    cool_off = orders.sleep("cool-off", seconds=3600, after=[ship])
    orders.wait("approval", signal="approved", timeout=86400, after=[cool_off])

Failure paths (docs/guides/branches.md): a wait can name a *branch* step its
run continues with when the timeout passes (``on_timeout=``, declared with
``@wf.step(branch=True)``), and a step can have a *compensation*
(``@wf.compensation(for_=charge)``) that runs, in reverse order of completion,
for the steps that succeeded once the run fails (a saga).

Over 600 lines because a definition is checked here, in one place, as it is
written: every step class, the DAG's parents and cycles, branches and
compensations, and the capabilities a workflow asks of a store.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._caps import Cap
from ._checks import check_int, check_seconds
from ._concurrency import Concurrency
from ._models import RunFailure, StepKind
from ._names import check_name
from ._queues import DEFAULT_QUEUE
from .retry import RetryPolicy
from .schedule import Misfire, Overlap, Schedule, TickPredicate, Window

if TYPE_CHECKING:
    from .context import StepContext

__all__ = [
    "DEFAULT_QUEUE",
    "Branch",
    "Compensation",
    "Concurrency",
    "Sleep",
    "Step",
    "StepFn",
    "Wait",
    "Workflow",
    "schedule_capabilities",
]


StepFn = Callable[["StepContext", Any], Any]
"""``fn(ctx, data)``, sync or ``async def``; its return value is the step's output."""

F = TypeVar("F", bound=Callable[..., Any])
FailureHandler = Callable[[RunFailure], object]
"""A workflow's ``on_failure`` handler: called with one failed run (``Cap.LIFECYCLE``)."""


def _check_seconds(what: str, value: float | None, *, allow_zero: bool = False) -> float | None:
    return None if value is None else check_seconds(what, value, zero=allow_zero)


class Step:
    """One step of a workflow: user code (``fn``), a :class:`Sleep` or a :class:`Wait`.

    ``after`` lists the parents (names, steps or step functions); the step runs
    once every parent succeeded. ``retry`` and ``timeout`` default to the
    workflow's.
    """

    kind: StepKind = StepKind.TASK

    def __init__(
        self,
        name: str,
        fn: StepFn | None = None,
        *,
        after: Iterable[Any] = (),
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        concurrency: Concurrency | None = None,
    ) -> None:
        self.name = check_name("step", name)
        if concurrency is not None:
            if not isinstance(concurrency, Concurrency):
                raise TypeError(
                    f"step {name!r}: concurrency must be a cairnflow.Concurrency, "
                    f"got {concurrency!r}"
                )
            if concurrency.fifo:
                raise ValueError(
                    f"step {name!r}: a fifo key orders runs, so it is a workflow's "
                    f"(Workflow(concurrency=Concurrency(..., fifo=True))), not a step's"
                )
        self.concurrency = concurrency
        if self.kind.runs_code:
            if fn is None or not callable(fn):
                raise TypeError(f"step {name!r} needs a callable fn(ctx, data), got {fn!r}")
            _check_signature(name, fn)
        self.fn = fn
        if isinstance(after, str | Step) or callable(after):
            after = [after]
        self.after: tuple[Any, ...] = tuple(after)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"step {name!r}: retry must be a RetryPolicy, got {retry!r}")
        self.retry = retry
        self.timeout = _check_seconds(f"timeout of step {name!r}", timeout)
        self.parents: tuple[str, ...] = ()
        # Asked on every attempt: decided once here.
        self._is_async = fn is not None and inspect.iscoroutinefunction(fn)

    @property
    def is_async(self) -> bool:
        """True when ``fn`` is an ``async def``."""
        return self._is_async

    def __repr__(self) -> str:
        parents = f", after={list(self.parents)}" if self.parents else ""
        return f"{type(self).__name__}({self.name!r}{parents})"


class Sleep(Step):
    """A durable sleep of ``seconds``: it holds no worker while it waits.

    Its output is its input passed through (the parent's output, a dict of the
    parents' outputs, or the run's payload when it has no parent).
    """

    kind = StepKind.SLEEP

    def __init__(self, name: str, *, seconds: float, after: Iterable[Any] = ()) -> None:
        super().__init__(name, after=after)
        checked = _check_seconds(f"seconds of sleep {name!r}", seconds, allow_zero=True)
        assert checked is not None
        self.seconds: float = checked


class Wait(Step):
    """Waits for the signal ``signal`` sent to the run; holds no worker.

    Its output is the signal's payload. A signal sent before the wait became
    ready is kept and consumed when it does. With ``timeout`` the step fails
    with :class:`~cairnflow.StepTimeout` when no signal came in time, unless
    it names a branch in ``on_timeout`` (``Cap.WAIT_BRANCH``): then the wait
    ends ``timed_out``, the steps after it are ``skipped`` and the branch step
    runs. When the signal comes in time, the branch is ``skipped`` instead.
    """

    kind = StepKind.WAIT

    def __init__(
        self,
        name: str,
        *,
        signal: str,
        timeout: float | None = None,
        after: Iterable[Any] = (),
        on_timeout: str | Step | None = None,
    ) -> None:
        super().__init__(name, after=after)
        self.signal = check_name("signal", signal)
        self.timeout = _check_seconds(f"timeout of wait {name!r}", timeout)
        if isinstance(on_timeout, Step):
            on_timeout = on_timeout.name
        if on_timeout is not None:
            if not isinstance(on_timeout, str):
                raise TypeError(
                    f"wait {name!r}: on_timeout names a branch step (a name or the step), "
                    f"got {on_timeout!r}"
                )
            if self.timeout is None:
                raise ValueError(
                    f"wait {name!r}: on_timeout={on_timeout!r} needs a timeout (the branch is "
                    f"taken when it passes)"
                )
            check_name("step", on_timeout)
        self.on_timeout: str | None = on_timeout
        """The branch step the run continues with when the timeout passes (None: it fails)."""


class Branch(Step):
    """A step that runs only when the wait naming it in ``on_timeout`` timed out.

    Declared with ``@wf.step(branch=True)``; it has no ``after`` of its own (the
    wait is its one parent, whose timeout starts it) and its input is the run's
    payload. Steps ``after`` it are its branch; they are skipped with it when
    the wait's signal comes in time (``Cap.WAIT_BRANCH``).
    """

    kind = StepKind.BRANCH

    def __init__(self, name: str, fn: StepFn | None = None, **options: Any) -> None:
        if options.get("after"):
            raise ValueError(
                f"branch step {name!r} cannot have after=: it starts when the wait that "
                f"names it in on_timeout times out"
            )
        super().__init__(name, fn, **options)
        self.wait: str | None = None
        """The wait whose timeout starts this step (set by :meth:`Workflow.validate`)."""


class Compensation(Step):
    """The compensation of step ``for_``: run only when the run fails after ``for_`` succeeded.

    Its input is the output of the step it compensates. A failed run runs the
    compensations of its succeeded steps one after the other, the step that
    completed last first (``Cap.COMPENSATION``); each is leased, fenced and
    retried like any step.
    """

    kind = StepKind.COMPENSATION

    def __init__(self, name: str, fn: StepFn | None = None, *, for_: str, **options: Any) -> None:
        super().__init__(name, fn, **options)
        self.for_ = for_


def _check_signature(name: str, fn: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: trust the caller
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise TypeError(
            f"step {name!r}: {getattr(fn, '__qualname__', fn)!r} must accept two positional "
            f"arguments (ctx, data), its signature is {signature}"
        ) from None


class Workflow:
    """A named DAG of steps, run as one unit per enqueued payload.

    ``queue`` is where its steps are claimed from, ``priority`` orders its
    steps against others on that queue (higher first), and ``retry`` and
    ``timeout`` are the defaults for its steps. ``max_errors`` bounds the failed
    attempts of a whole run: once its steps together failed that many, none is
    retried again (the run fails, or is discarded by the step's policy).
    ``error_history`` is how many errors of its last failed attempts each run
    keeps (None: the client's setting, 0: none). ``run_timeout`` (seconds,
    ``Cap.RUN_TIMEOUT``): a run still unfinished that long after it was due to
    start (its ``run_at``) fails with :class:`~cairnflow.RunTimeout`; its
    running steps are cancelled (their workers hear it at their next lease
    renewal) and its pending ones never start.
    ``timeout`` are the defaults for its steps. ``concurrency``
    (:class:`~cairnflow.Concurrency`) gives every step of its runs a key computed
    from the payload at enqueue: at most ``limit`` attempts per key run at once
    across every client (``Cap.CONCURRENCY_KEY``); with ``fifo`` the runs sharing
    a key run one after the other, in enqueue order (``Cap.KEY_FIFO``).
    ``on_failure`` (``Cap.LIFECYCLE``, or the :meth:`on_failure` decorator) is
    called with a :class:`~cairnflow.RunFailure` once per failed run, by one client
    of those that registered the workflow, leased and fenced like a step and
    retried by ``on_failure_retry`` (docs/lifecycle.md).
    """

    def __init__(
        self,
        name: str,
        *,
        queue: str = DEFAULT_QUEUE,
        steps: Sequence[Step] = (),
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        priority: int = 0,
        description: str | None = None,
        max_errors: int | None = None,
        error_history: int | None = None,
        concurrency: Concurrency | None = None,
        run_timeout: float | None = None,
        on_failure: FailureHandler | None = None,
        on_failure_retry: RetryPolicy | None = None,
    ) -> None:
        self.name = check_name("workflow", name)
        self.failure_handler: FailureHandler | None = None
        """``Cap.LIFECYCLE``: called once per failed run (see :meth:`on_failure`)."""
        self.failure_retry = RetryPolicy()
        """How a failing ``on_failure`` handler is retried (default: not at all)."""
        if on_failure is not None or on_failure_retry is not None:
            if on_failure is None:
                raise ValueError(f"workflow {name!r}: on_failure_retry needs on_failure")
            self.on_failure(on_failure, retry=on_failure_retry)
        self.run_timeout = _check_seconds(f"run_timeout of workflow {name!r}", run_timeout)
        """``Cap.RUN_TIMEOUT``: seconds a run may take from its ``run_at`` (None: no limit)."""
        self.max_errors = (
            None
            if max_errors is None
            else check_int(f"max_errors of workflow {name!r}", max_errors, minimum=1)
        )
        """``Cap.RETRY_MAX_ERRORS``: a run's retries stop once its steps failed this many
        attempts together (counted by the store as it records each failure)."""
        self.error_history = (
            None
            if error_history is None
            else check_int(
                f"error_history of workflow {name!r}", error_history, minimum=0, maximum=10_000
            )
        )
        """``Cap.ERROR_HISTORY``: the errors each run keeps (None: the client's setting)."""
        if concurrency is not None and not isinstance(concurrency, Concurrency):
            raise TypeError(
                f"workflow {name!r}: concurrency must be a cairnflow.Concurrency, "
                f"got {concurrency!r}"
            )
        self.concurrency = concurrency
        self.queue = check_name("queue", queue)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"workflow {name!r}: retry must be a RetryPolicy, got {retry!r}")
        self.retry = retry or RetryPolicy()
        self.timeout = _check_seconds(f"timeout of workflow {name!r}", timeout)
        self.priority = check_int(f"the priority of workflow {name!r}", priority)
        self.description = description
        self._steps: dict[str, Step] = {}
        self._by_fn: dict[int, str] = {}
        self._children: dict[str, tuple[str, ...]] | None = None  # built on first use
        self._schedules: dict[str, Schedule] = {}
        self._when: dict[str, TickPredicate] = {}
        if steps:
            self._add_all(list(steps))

    # -- defining ---------------------------------------------------------------
    @overload
    def on_failure(
        self, fn: FailureHandler, /, *, retry: RetryPolicy | None = None
    ) -> FailureHandler: ...

    @overload
    def on_failure(
        self, fn: None = None, /, *, retry: RetryPolicy | None = None
    ) -> Callable[[FailureHandler], FailureHandler]: ...

    def on_failure(
        self, fn: FailureHandler | None = None, /, *, retry: RetryPolicy | None = None
    ) -> Any:
        """Declare the handler called once per failed run (``Cap.LIFECYCLE``), as a decorator.

        ``fn(failure)`` takes a :class:`~cairnflow.RunFailure` (run id, payload,
        the failed step and its error). One client of those that registered the
        workflow runs it, leased and fenced like a step: a client that dies in the
        middle leaves it to another after its lease, and one whose lease was taken
        over cannot record it as done. ``retry`` retries a handler that raises.
        """

        def declare(handler: FailureHandler) -> FailureHandler:
            if not callable(handler):
                raise TypeError(
                    f"workflow {self.name!r}: on_failure takes a callable, got {handler!r}"
                )
            if retry is not None and not isinstance(retry, RetryPolicy):
                raise TypeError(
                    f"workflow {self.name!r}: on_failure retry must be a RetryPolicy, got {retry!r}"
                )
            self.failure_handler = handler
            self.failure_retry = retry or RetryPolicy()
            return handler

        return declare if fn is None else declare(fn)

    @overload
    def step(
        self,
        fn: F,
        /,
        *,
        name: str | None = None,
        after: Iterable[Any] = (),
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        concurrency: Concurrency | None = None,
        branch: bool = False,
    ) -> F: ...

    @overload
    def step(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        after: Iterable[Any] = (),
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        concurrency: Concurrency | None = None,
        branch: bool = False,
    ) -> Callable[[F], F]: ...

    def step(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        after: Iterable[Any] = (),
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        concurrency: Concurrency | None = None,
        branch: bool = False,
    ) -> F | Callable[[F], F]:
        """Decorate ``fn(ctx, data)`` as a step; the function is returned unchanged.

        Usable bare (``@wf.step``), with options (``@wf.step(after=[a])``), or
        called directly (``wf.step(fn, name="a")``).
        The step's name is ``name`` or the function's ``__name__``. With
        ``branch=True`` it is a :class:`Branch`: it runs only when the wait
        naming it in ``on_timeout`` timed out (``Cap.WAIT_BRANCH``).
        """
        kind = Branch if branch else Step

        def decorate(func: F) -> F:
            step_name = name if name is not None else getattr(func, "__name__", None)
            self.add(
                kind(
                    str(step_name),
                    func,
                    after=after,
                    retry=retry,
                    timeout=timeout,
                    concurrency=concurrency,
                )
            )
            return func

        if fn is not None:
            return decorate(fn)
        return decorate

    def compensation(
        self,
        *,
        for_: Any,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]:
        """Decorate ``fn(ctx, output)`` as the compensation of step ``for_`` (``Cap.COMPENSATION``).

        ``for_`` is the step (its name, handle or function), defined before.
        When a run fails for good (a step out of retries), the compensations of
        its steps that succeeded run one after the other, the step that
        completed last first, each with the output of the step it compensates;
        the run then ends ``failed`` with its original error. A step has at
        most one compensation. The function is returned unchanged.
        """

        def decorate(func: F) -> F:
            step_name = name if name is not None else getattr(func, "__name__", None)
            target = self._resolve_ref(str(step_name), for_, known=self._steps)
            step = self._steps[target]
            if not step.kind.runs_code or step.kind is StepKind.COMPENSATION:
                raise ValueError(
                    f"workflow {self.name!r}: compensation {step_name!r} is for {step.kind.value} "
                    f"step {target!r}; only steps that run code have compensations"
                )
            for other in self._steps.values():
                if isinstance(other, Compensation) and other.for_ == target:
                    raise ValueError(
                        f"workflow {self.name!r}: step {target!r} already has a compensation "
                        f"({other.name!r})"
                    )
            self.add(Compensation(str(step_name), func, for_=target, retry=retry, timeout=timeout))
            return func

        return decorate

    def sleep(self, name: str, *, seconds: float, after: Iterable[Any] = ()) -> Sleep:
        """Add a durable sleep step and return its handle (usable in ``after=``)."""
        step = Sleep(name, seconds=seconds, after=after)
        self.add(step)
        return step

    def wait(
        self,
        name: str,
        *,
        signal: str,
        timeout: float | None = None,
        after: Iterable[Any] = (),
        on_timeout: str | Step | None = None,
    ) -> Wait:
        """Add a step that waits for ``signal`` and return its handle.

        ``on_timeout`` names a branch step (``@wf.step(branch=True)``, defined
        before or after) the run continues with when ``timeout`` passes
        (``Cap.WAIT_BRANCH``); without it the step fails with StepTimeout.
        """
        step = Wait(name, signal=signal, timeout=timeout, after=after, on_timeout=on_timeout)
        self.add(step)
        return step

    def schedule(
        self,
        name: str,
        *,
        cron: str,
        tz: str = "UTC",
        payload: Any = None,
        misfire: Misfire = Misfire.FIRE_ONCE,
        overlap: Overlap = Overlap.ALLOW,
        windows: Iterable[Window] = (),
        labels: Mapping[str, str] | None = None,
        paused: bool = False,
        when: TickPredicate | None = None,
        tenant: str | None = None,
    ) -> Schedule:
        """Start a run of this workflow with ``payload`` at every tick of ``cron`` in ``tz``.

        Recorded by ``Client.start()``; a redeploy with the same declaration
        keeps the stored next fire, a changed expression, zone or windows
        recompute it. ``misfire`` says what ticks missed while no client ran
        do, ``overlap`` what a tick does while the previous run is unfinished,
        ``windows`` when ticks may fire at all, and ``when(tick)`` decides at
        each tick, on the node that fires it (True fires). Every run it fires
        belongs to ``tenant`` (``Cap.TENANT``), when given. See
        :class:`cairnflow.Schedule` for every rule, DST included.
        """
        if name in self._schedules:
            raise ValueError(f"workflow {self.name!r} already has a schedule named {name!r}")
        declared = Schedule(
            name,
            cron,
            tz=tz,
            payload=payload,
            misfire=misfire,
            overlap=overlap,
            windows=tuple(windows),
            labels=labels or {},
            paused=paused,
            tenant=tenant,
        )
        if when is not None:
            if not callable(when):
                raise TypeError(f"schedule {name!r}: when must be callable, got {when!r}")
            self._when[name] = when
        self._schedules[name] = declared
        return declared

    @property
    def schedules(self) -> Mapping[str, Schedule]:
        """The schedules declared with this workflow, by name."""
        return dict(self._schedules)

    def when_of(self, schedule: str) -> TickPredicate | None:
        """The ``when`` predicate declared with the schedule ``schedule``, if any."""
        return self._when.get(schedule)

    def add(self, step: Step) -> Step:
        """Add ``step``, whose parents must already be in the workflow."""
        if not isinstance(step, Step):
            raise TypeError(f"workflow {self.name!r}: add() takes a Step, got {step!r}")
        self._check_new_name(step)
        step.parents = self._resolve_parents(step, known=self._steps)
        self._register(step)
        return step

    def _add_all(self, steps: list[Step]) -> None:
        pending: dict[str, Step] = {}
        for step in steps:
            if not isinstance(step, Step):
                raise TypeError(f"workflow {self.name!r}: steps must be Step objects, got {step!r}")
            self._check_new_name(step, also=pending)
            pending[step.name] = step
            if step.fn is not None:
                self._by_fn.setdefault(id(step.fn), step.name)
        for step in steps:
            step.parents = self._resolve_parents(step, known=pending)
        for name in _topological_order(self.name, {s.name: s.parents for s in steps}):
            self._register(pending[name])

    def _check_new_name(self, step: Step, also: Mapping[str, Step] = {}) -> None:
        if step.name in self._steps or step.name in also:
            raise ValueError(f"workflow {self.name!r} already has a step named {step.name!r}")

    def _register(self, step: Step) -> None:
        self._steps[step.name] = step
        self._children = None
        if step.fn is not None:
            self._by_fn.setdefault(id(step.fn), step.name)

    def _resolve_parents(self, step: Step, known: Mapping[str, Step]) -> tuple[str, ...]:
        parents: list[str] = []
        for ref in step.after:
            parent = self._resolve_ref(step.name, ref, known=known)
            if isinstance(known.get(parent, self._steps.get(parent)), Compensation):
                raise ValueError(
                    f"workflow {self.name!r}: step {step.name!r} cannot be after compensation "
                    f"{parent!r}: compensations run only when the run fails"
                )
            if parent not in parents:
                parents.append(parent)
        return tuple(parents)

    def _resolve_ref(self, name: str, ref: Any, known: Mapping[str, Step]) -> str:
        """The name of the step ``ref`` (a name, step or step function) that step ``name``
        refers to, which must already be known."""
        if isinstance(ref, Step):
            parent = ref.name
            if known.get(parent) is not ref and self._steps.get(parent) is not ref:
                raise ValueError(
                    f"workflow {self.name!r}: step {name!r} is after step {parent!r}, "
                    f"which is not part of this workflow (add parents before children)"
                )
        elif isinstance(ref, str):
            parent = ref
        elif callable(ref):
            found = self._by_fn.get(id(ref))
            if found is None:
                label = getattr(ref, "__qualname__", repr(ref))
                raise ValueError(
                    f"workflow {self.name!r}: step {name!r} is after {label}, "
                    f"which is not a step of this workflow"
                )
            parent = found
        else:
            raise TypeError(
                f"workflow {self.name!r}: step {name!r} has after={ref!r}; "
                f"after takes step names, steps or step functions"
            )
        if parent == name:
            raise ValueError(
                f"workflow {self.name!r}: step {name!r} cannot be after itself (a cycle)"
            )
        if parent not in known and parent not in self._steps:
            raise ValueError(
                f"workflow {self.name!r}: step {name!r} is after unknown step "
                f"{parent!r} (define parents before children)"
            )
        return parent

    # -- reading ----------------------------------------------------------------
    @property
    def steps(self) -> Mapping[str, Step]:
        """Every step by name, parents before children."""
        return dict(self._steps)

    def __getitem__(self, name: str) -> Step:
        return self._steps[name]

    def __contains__(self, name: object) -> bool:
        return name in self._steps

    def __len__(self) -> int:
        return len(self._steps)

    def children(self, name: str) -> tuple[str, ...]:
        """The steps that list ``name`` in their ``after``."""
        if self._children is None:
            children: dict[str, list[str]] = {n: [] for n in self._steps}
            for step in self._steps.values():
                for parent in step.parents:
                    children[parent].append(step.name)
            self._children = {n: tuple(c) for n, c in children.items()}
        return self._children.get(name, ())

    @property
    def sinks(self) -> tuple[str, ...]:
        """The steps no other step is after; the outputs of those that succeeded make the
        run's result (compensations are never sinks; a wait with a branch never is)."""
        dag = {n: s for n, s in self._steps.items() if s.kind is not StepKind.COMPENSATION}
        with_children = {p for n in dag for p in self.stored_parents(n)}
        return tuple(n for n in dag if n not in with_children)

    def stored_parents(self, name: str) -> tuple[str, ...]:
        """The parents a store keeps for step ``name``: its ``after``; a branch's wait; the
        step a compensation is for (whose output is its input). Neither of the last two is
        among its parent's children: only the failure path starts them."""
        step = self._steps[name]
        if isinstance(step, Branch):
            return () if step.wait is None else (step.wait,)
        if isinstance(step, Compensation):
            return (step.for_,)
        return step.parents

    @property
    def compensations(self) -> Mapping[str, str]:
        """The compensation of each step that has one: ``{step: compensation}``."""
        return {s.for_: s.name for s in self._steps.values() if isinstance(s, Compensation)}

    def retry_for(self, step: Step) -> RetryPolicy:
        """The retry policy that applies to ``step``."""
        return step.retry or self.retry

    def timeout_for(self, step: Step) -> float | None:
        """The attempt timeout that applies to a task ``step`` (None: no limit)."""
        return step.timeout if step.timeout is not None else self.timeout

    def concurrency_for(self, step: Step) -> Concurrency | None:
        """The concurrency key that applies to ``step``: its own, else the workflow's."""
        return step.concurrency if step.concurrency is not None else self.concurrency

    @property
    def has_keys(self) -> bool:
        """True when some step of the workflow's runs carries a concurrency key."""
        return self.concurrency is not None or any(
            s.concurrency is not None for s in self._steps.values()
        )

    def check_concurrency(self) -> None:
        """Refuse a key that is not a function (``Client.start()`` asks), naming the workflow."""
        if self.concurrency is not None:
            self.concurrency.check(f"workflow {self.name!r}")
        for step in self._steps.values():
            if step.concurrency is not None:
                step.concurrency.check(f"workflow {self.name!r}, step {step.name!r}")

    def required_capabilities(self) -> dict[Cap, str]:
        """The capabilities this workflow needs, each with the reason."""
        needs: dict[Cap, str] = {}
        if self.concurrency is not None:
            if self.concurrency.fifo:
                needs[Cap.KEY_FIFO] = "its fifo concurrency key"
            needs[Cap.CONCURRENCY_KEY] = "its concurrency key"
        for step in self._steps.values():
            if isinstance(step, Wait) and step.on_timeout is not None:
                needs.setdefault(Cap.WAIT_BRANCH, f"the on_timeout branch of wait {step.name!r}")
            if isinstance(step, Compensation):
                needs.setdefault(Cap.COMPENSATION, f"compensation step {step.name!r}")
        for step in self._steps.values():
            if step.kind is StepKind.SLEEP:
                needs.setdefault(Cap.SLEEP, f"sleep step {step.name!r}")
            elif step.kind is StepKind.WAIT:
                needs.setdefault(Cap.SIGNAL, f"wait step {step.name!r}")
            else:
                if step.concurrency is not None:
                    needs.setdefault(
                        Cap.CONCURRENCY_KEY, f"the concurrency key of step {step.name!r}"
                    )
                policy = self.retry_for(step)
                if policy.retries:
                    needs.setdefault(Cap.RETRY, f"the retry policy of step {step.name!r}")
                if policy.until is not None:
                    needs.setdefault(Cap.RETRY_UNTIL, f"the retry deadline of step {step.name!r}")
                if policy.discards:
                    needs.setdefault(Cap.DISCARD, f"the retry policy of step {step.name!r}")
                if self.timeout_for(step) is not None:
                    needs.setdefault(Cap.STEP_TIMEOUT, f"the timeout of step {step.name!r}")
        if self.error_history:
            needs.setdefault(Cap.ERROR_HISTORY, f"error_history of workflow {self.name!r}")
        if self.max_errors is not None:
            needs.setdefault(Cap.RETRY_MAX_ERRORS, f"max_errors of workflow {self.name!r}")
        if self.run_timeout is not None:
            needs.setdefault(Cap.RUN_TIMEOUT, f"run_timeout of workflow {self.name!r}")
        if self.failure_handler is not None:
            needs.setdefault(Cap.LIFECYCLE, f"the on_failure handler of workflow {self.name!r}")
        for name, declared in self._schedules.items():
            # The most specific capability first: a store without any of them is told
            # about the one this declaration asks for beyond plain cron.
            if name in self._when:
                needs.setdefault(Cap.SCHEDULE_WHEN, f"the when predicate of schedule {name!r}")
            for cap, why in schedule_capabilities(declared, f"schedule {name!r}").items():
                needs.setdefault(cap, why)
        return needs

    def validate(self) -> None:
        """Raise ``ValueError`` if the workflow cannot run: it has no steps, or a wait's
        ``on_timeout`` does not name a branch step that only it names, or a branch leads
        back to its own wait (a cycle). Binds each branch step to its wait."""
        if not self._steps:
            raise ValueError(f"workflow {self.name!r} has no steps")
        named: dict[str, str] = {}
        for step in self._steps.values():
            if not isinstance(step, Wait) or step.on_timeout is None:
                continue
            target = self._steps.get(step.on_timeout)
            if target is None:
                raise ValueError(
                    f"workflow {self.name!r}: wait {step.name!r} has on_timeout="
                    f"{step.on_timeout!r}, which is not a step of this workflow"
                )
            if not isinstance(target, Branch):
                raise ValueError(
                    f"workflow {self.name!r}: wait {step.name!r} has on_timeout="
                    f"{step.on_timeout!r}, which is not a branch step (declare it with "
                    f"@wf.step(branch=True))"
                )
            if target.name in named:
                raise ValueError(
                    f"workflow {self.name!r}: branch step {target.name!r} is named by two waits "
                    f"({named[target.name]!r} and {step.name!r}); a branch belongs to one wait"
                )
            named[target.name] = step.name
            if step.name in self._descendants(target.name):
                raise ValueError(
                    f"workflow {self.name!r} has a cycle: wait {step.name!r} comes after its own "
                    f"on_timeout branch {target.name!r}"
                )
        for step in self._steps.values():
            if isinstance(step, Branch):
                if step.name not in named:
                    raise ValueError(
                        f"workflow {self.name!r}: branch step {step.name!r} is named by no "
                        f"wait's on_timeout, so it could never run"
                    )
                step.wait = named[step.name]
        self._children = None

    def _descendants(self, name: str) -> set[str]:
        """Every step after ``name``, directly or not."""
        found: set[str] = set()
        todo = [name]
        while todo:
            for child in self.children(todo.pop()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, queue={self.queue!r}, steps={list(self._steps)})"


def _topological_order(workflow: str, parents: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Kahn's algorithm; refuses a cycle and names the steps on it."""
    remaining = {name: set(ps) for name, ps in parents.items()}
    order: list[str] = []
    ready = [name for name, ps in remaining.items() if not ps]
    while ready:
        name = ready.pop(0)
        order.append(name)
        del remaining[name]
        for other, ps in remaining.items():
            if name in ps:
                ps.discard(name)
                if not ps and other not in ready:
                    ready.append(other)
    if remaining:
        raise ValueError(f"workflow {workflow!r} has a cycle among steps {sorted(remaining)}")
    return order


def schedule_capabilities(schedule: Schedule, what: str) -> dict[Cap, str]:
    """The capabilities ``schedule`` needs of a store, each with the reason (``what``: its name)."""
    needs: dict[Cap, str] = {}
    if schedule.overlap is Overlap.SKIP:
        needs[Cap.OVERLAP_SKIP] = f"the overlap policy of {what}"
    if schedule.windows:
        needs[Cap.SCHEDULE_WINDOW] = f"the windows of {what}"
    if schedule.paused:
        needs[Cap.SCHEDULE_PAUSE] = f"{what}, declared paused"
    if schedule.tenant is not None:
        needs[Cap.TENANT] = f"the tenant of {what}"
    needs[Cap.CRON] = what  # last: the specific capabilities are named first
    return needs
