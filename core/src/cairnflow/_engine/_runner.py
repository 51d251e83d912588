"""Running one claimed attempt: its input, its code, its outcome.

The runner turns a :class:`ClaimedAttempt` into an :class:`Outcome` and hands
it to the committer (:mod:`._commit`), which writes it through the store's
fenced ``finish``. Sleep and wait steps have no code: they register with the
store at once and hold no worker while they wait.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from .._caps import Cap
from .._errors import (
    Abandoned,
    CairnError,
    Cancelled,
    LeaseLost,
    PayloadTooLarge,
    Permanent,
    Snooze,
    StepTimeout,
)
from .._models import StepKind
from ..context import StepContext
from ..middleware import chain
from ..state import Locks, RateLimiter
from ..store import (
    AttemptState,
    ClaimedAttempt,
    ExpiredAttempt,
    Failed,
    Outcome,
    SleepUntil,
    Snoozed,
    Succeeded,
    WaitFor,
)
from ..workflow import Sleep, Step, Wait
from ._attempt import End, RunningAttempt, monotonic
from ._commit import GroupCommit, due_time
from ._failures import failure_outcome
from ._state import EngineState

__all__ = ["StepRunner"]

_NS = 1_000_000_000


class _Control:
    """What ``ctx.heartbeat()``, ``ctx.progress()``, ``ctx.memo()`` and ``ctx.lock()`` call."""

    __slots__ = ("_attempt", "_runner")

    def __init__(self, runner: StepRunner, running: RunningAttempt) -> None:
        self._runner = runner
        self._attempt = running

    def heartbeat(self) -> None:
        self._runner.heartbeat(self._attempt)

    def progress(self, value: Any) -> None:
        self._runner.progress(self._attempt, value)

    def memo(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return self._runner.memo(self._attempt, name, fn, args, kwargs)

    def locks(self, what: str) -> Locks:
        return self._runner.locks(what)

    def rates(self, what: str) -> RateLimiter:
        return self._runner.rates(what)


class StepRunner:
    """Executes attempts for one client and writes their outcomes."""

    def __init__(self, state: EngineState, commit: GroupCommit) -> None:
        self._state = state
        self._loops = threading.local()
        self._commit = commit

    # -- the whole attempt -------------------------------------------------------------------
    def run(self, running: RunningAttempt) -> None:
        """Run ``running`` and hand its outcome to the committer, unless someone else finalized it.

        The worker does not wait for the write: the attempt keeps its slot and
        its lease until the committer has written the outcome.
        """
        if not running.begin():
            return
        started = monotonic()
        try:
            outcome = self._outcome(running)
        except Exception as error:  # a bug of ours must not kill the worker
            self._state.log.exception("attempt %r failed inside the engine", running)
            outcome = self.failure(running.claimed, Permanent(error), self._state.now(), None)
        self._state.attempt_ran(monotonic() - started)
        if outcome is not None and running.finalize(End.COMPLETED):
            try:
                self.write(running.claimed, outcome, holder=running)
            except BaseException:
                self._state.untrack(running)  # never handed over: nobody else releases it
                raise

    def write(
        self, claimed: ClaimedAttempt, outcome: Outcome, holder: RunningAttempt | None = None
    ) -> None:
        """Hand ``outcome`` to the committer (it is written through the fenced ``finish``).

        ``holder``: the attempt this client holds, released once the outcome is
        written; None for one it does not hold (an abandoned attempt).
        """
        if self._state.observers:
            self._state.tell(lambda o: o.outcome(claimed, outcome))
        self._commit.put(claimed, outcome, eager=self._may_release(claimed, outcome), holder=holder)

    def _may_release(self, claimed: ClaimedAttempt, outcome: Outcome) -> bool:
        """True when writing ``outcome`` may make other steps of the run ready."""
        if not isinstance(outcome, Succeeded | WaitFor | Failed | Snoozed):
            return False
        if not isinstance(outcome, Succeeded | WaitFor):
            # A retry or snooze due now is ready at once.
            due = due_time(outcome)
            return due is not None and due <= self._state.now()
        workflow = self._state.registry.get(claimed.workflow)
        return workflow is not None and bool(workflow.children(claimed.step))

    # -- outcomes ----------------------------------------------------------------------------
    def _outcome(self, running: RunningAttempt) -> Outcome | None:
        claimed = running.claimed
        state = self._state
        if claimed.closure is not None:
            return self._run_code(running, _closure_step(claimed.closure), None, None)
        workflow = state.registry.get(claimed.workflow)
        step = workflow.steps.get(claimed.step) if workflow is not None else None
        if workflow is None or step is None:
            problem = CairnError(
                f"step {claimed.step!r} of workflow {claimed.workflow!r} is not defined on this "
                f"client; was the workflow changed while runs were in flight?"
            )
            return self.failure(claimed, Permanent(problem), state.now(), None)
        if isinstance(step, Sleep):
            until = state.now() + int(step.seconds * _NS)
            return SleepUntil(until=until, output=self._passthrough(claimed))
        if isinstance(step, Wait):
            deadline = None if step.timeout is None else state.now() + int(step.timeout * _NS)
            return WaitFor(signal=step.signal, deadline=deadline)
        assert step.fn is not None
        return self._run_code(running, step.fn, step, workflow.timeout_for(step))

    def _run_code(
        self,
        running: RunningAttempt,
        fn: Callable[..., Any],
        step: Step | None,
        timeout: float | None,
    ) -> Outcome | None:
        claimed = running.claimed
        state = self._state
        try:
            payload, parents, data = self._inputs(claimed)
        except Exception as error:  # noqa: BLE001 - any decode error means a bad input
            failure = CairnError(f"the input of step {claimed.step!r} cannot be decoded: {error}")
            return self.failure(claimed, Permanent(failure), state.now(), step)
        if timeout is not None:
            running.deadline = monotonic() + timeout
            state.replan.set()
        ctx = StepContext(
            run_id=claimed.run_id,
            workflow=claimed.workflow,
            step=claimed.step,
            attempt=claimed.attempt,
            payload=payload,
            parents=parents,
            labels=claimed.labels,
            headers=claimed.headers,
            tenant=claimed.tenant,
            node_id=state.settings.node_id,
            queue=claimed.queue,
            deadline=running.deadline,
            cancel_event=running,
            control=_Control(self, running),
        )
        try:
            is_async = step.is_async if step is not None else inspect.iscoroutinefunction(fn)
            call = self._call_async if is_async else self._call_sync
            middleware = state.middleware
            if middleware:
                value = chain(middleware, ctx, functools.partial(call, running, fn, ctx, data))()
            else:
                value = call(running, fn, ctx, data)
        except Snooze as snooze:
            if Cap.SNOOZE not in state.caps:
                return self.failure(
                    claimed, Permanent(snooze_unsupported(state)), state.now(), step
                )
            return Snoozed(until=state.now() + int(snooze.seconds * _NS))
        except BaseException as error:  # noqa: BLE001 - whatever a step raises is its failure
            if running.finalized:
                return None
            return self.failure(claimed, error, state.now(), step)
        if running.finalized:
            return None
        try:
            output = state.encode(value, f"the output of step {claimed.step!r}")
        except (TypeError, PayloadTooLarge) as error:
            return self.failure(claimed, Permanent(error), state.now(), step)
        return Succeeded(output)

    def _inputs(self, claimed: ClaimedAttempt) -> tuple[Any, dict[str, Any], Any]:
        codec = self._state.codec
        payload = codec.decode(claimed.payload)
        parents = {name: codec.decode(raw) for name, raw in claimed.inputs.items()}
        if not parents:
            return payload, parents, payload
        if len(parents) == 1:
            return payload, parents, next(iter(parents.values()))
        return payload, parents, parents

    def _passthrough(self, claimed: ClaimedAttempt) -> bytes:
        """The encoded input of a sleep step, which becomes its output unchanged."""
        if not claimed.inputs:
            return claimed.payload
        if len(claimed.inputs) == 1:
            return next(iter(claimed.inputs.values()))
        codec = self._state.codec
        return codec.encode({name: codec.decode(raw) for name, raw in claimed.inputs.items()})

    def failure(
        self, claimed: ClaimedAttempt, error: BaseException, now: int, step: Step | None
    ) -> Failed:
        """The failure outcome of ``error``: a retry time by the policy, or none."""
        return failure_outcome(self._state, claimed, error, now, step)

    # -- calling user code -------------------------------------------------------------------
    def _call_sync(
        self, running: RunningAttempt, fn: Callable[..., Any], ctx: StepContext, data: Any
    ) -> Any:
        running.enter_user_code()
        try:
            if running.finalized:  # stopped between the claim and now
                raise Cancelled(f"attempt of step {ctx.step!r} was stopped before it began")
            return fn(ctx, data)
        finally:
            running.leave_user_code()

    def _call_async(
        self, running: RunningAttempt, fn: Callable[..., Any], ctx: StepContext, data: Any
    ) -> Any:
        loop = self._event_loop()

        async def main() -> Any:
            task = asyncio.current_task()
            assert task is not None
            running.attach_task(loop, task)
            return await fn(ctx, data)

        return loop.run_until_complete(main())

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        loop: asyncio.AbstractEventLoop | None = getattr(self._loops, "loop", None)
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            self._loops.loop = loop
        return loop

    def close_thread_loop(self) -> None:
        """Close the event loop of the calling worker thread, if it made one."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._loops, "loop", None)
        if loop is not None and not loop.is_closed():
            loop.close()

    # -- what the keeper, the dispatcher and the context ask of the runner -----------------------
    def write_timeout(self, running: RunningAttempt) -> None:
        """Write the StepTimeout failure of an attempt the watchdog stopped at its deadline.

        The attempt's worker may still be inside the step's code; the committer
        releases the attempt once the failure is written.
        """
        claimed = running.claimed
        try:
            workflow = self._state.registry.get(claimed.workflow)
            step = workflow.steps.get(claimed.step) if workflow is not None else None
            limit = (
                workflow.timeout_for(step) if workflow is not None and step is not None else None
            )
            error = StepTimeout(
                f"step {claimed.step!r} ran past its timeout of {limit or 0:g}s "
                f"(attempt {claimed.attempt})"
            )
            failure = self.failure(claimed, error, self._state.now(), step)
        except Exception:  # a bug of ours: nothing is written, the lease runs out
            self._state.log.exception("could not decide the timeout of %r", running)
            self._state.untrack(running)
            return
        self.write(claimed, failure, holder=running)

    def abandon(self, expired: ExpiredAttempt) -> None:
        """Fail an attempt that was reclaimed once too often, with :class:`Abandoned`."""
        claimed = ClaimedAttempt(
            token=expired.token,
            run_id=expired.run_id,
            workflow=expired.workflow,
            queue="",
            step=expired.step,
            kind=StepKind.TASK,
            attempt=expired.attempt,
            failures=expired.failures,
            reclaims=expired.reclaims,
            payload=b"",
            inputs={},
            labels={},
        )
        error = Abandoned(expired.step, expired.reclaims + 1)
        self.write(claimed, self.failure(claimed, error, self._state.now(), None))

    def heartbeat(self, running: RunningAttempt) -> None:
        """``ctx.heartbeat()``: renew this lease now, or learn it is gone."""
        state = self._state
        state.require(Cap.HEARTBEAT, "ctx.heartbeat()")
        _raise_if_over(running)
        started = monotonic()
        verdict = state.store.heartbeat(running.token, state.lease_until(), state.now())
        self._apply_verdict(running, verdict, started)

    def progress(self, running: RunningAttempt, value: Any) -> None:
        """``ctx.progress(value)``: store the step's progress (fenced)."""
        state = self._state
        state.require(Cap.PROGRESS, "ctx.progress()")
        _raise_if_over(running)
        encoded = state.encode(value, f"the progress of step {running.claimed.step!r}")
        started = monotonic()
        verdict = state.store.record_progress(running.token, encoded, state.now())
        self._apply_verdict(running, verdict, started)

    def memo(
        self,
        running: RunningAttempt,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """``ctx.memo(name, fn, ...)``: the result recorded for this step, or ``fn``'s, recorded.

        The record is fenced by the attempt's lease: an attempt that lost it
        records nothing, is finalized as lost here (its outcome is not written)
        and gets :class:`~cairnflow.LeaseLost`.
        """
        journal = self._state.journal("ctx.memo()")
        _raise_if_over(running)
        claimed = running.claimed
        try:
            return journal.run(
                claimed.run_id, claimed.step, name, fn, args, kwargs, lease=running.token
            )
        except LeaseLost:
            if running.finalize(End.LEASE_LOST):
                running.cancel()
            raise

    def locks(self, what: str) -> Locks:
        """The client's named locks (``ctx.lock()`` and its kin)."""
        return self._state.locks(what)

    def rates(self, what: str) -> RateLimiter:
        """The client's rate-limit buckets (``ctx.take()``)."""
        return self._state.rates(what)

    def _apply_verdict(
        self, running: RunningAttempt, verdict: AttemptState, started: float
    ) -> None:
        if verdict is AttemptState.HELD:
            running.renewed_at = max(running.renewed_at, started)
            return
        # Called from the step's own thread: finalize and raise here, no interrupt.
        end = End.CANCELLED if verdict is AttemptState.CANCELLED else End.LEASE_LOST
        if running.finalize(end):
            running.cancel()
        _raise_if_over(running)


def _raise_if_over(running: RunningAttempt) -> None:
    end = running.end
    if end is None or end is End.COMPLETED:
        return
    step = running.claimed.step
    if end is End.LEASE_LOST:
        raise LeaseLost(f"the lease of step {step!r} is lost; its outcome will not be written")
    if end is End.TIMED_OUT:
        raise StepTimeout(f"step {step!r} ran past its timeout")
    raise Cancelled(f"step {step!r} was cancelled")


def snooze_unsupported(state: EngineState) -> CairnError:
    """The error a Snooze raises on a store without ``Cap.SNOOZE``."""
    from .._errors import Unsupported

    return Unsupported(
        Cap.SNOOZE, "raise cf.Snooze()", store=f"the {state.store.describe().driver} store"
    )


def _closure_step(closure: Callable[[], Any]) -> Callable[[StepContext, Any], Any]:
    """Adapt a submitted callable (no arguments) to the ``fn(ctx, data)`` shape."""
    if inspect.iscoroutinefunction(closure):

        async def call_async(_ctx: StepContext, _data: Any) -> Any:
            return await closure()

        return call_async

    def call(_ctx: StepContext, _data: Any) -> Any:
        return closure()

    return call
