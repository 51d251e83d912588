"""The lifecycle dispatcher: events from the store's outbox to callbacks (``Cap.LIFECYCLE``).

One thread per started client that has ``on_event`` subscribers or workflows
with an ``on_failure`` handler. At start it records its subscriptions in the
store (from then on the store writes the events those want, in the
transactions of the transitions), then every ``poll_interval``:

* leases a batch of the ``events`` channel's free rows, checks that its lease
  still holds (a client that stalled after its claim, past its lease, delivers
  nothing: another one has the rows), calls the subscribers that want each
  event, and deletes the rows with its lease token. The rows of a fleet are
  shared, so each event goes to one client; a client that dies before it
  deleted them leaves them to be leased again after its lease (at-least-once;
  exactly once when no client dies or stalls past its lease);
* leases one ``on_failure`` row at a time (one failed run of a workflow it
  registered with a handler), runs the handler while renewing the lease every
  third of it, and deletes the row with its token: a handler whose lease was
  taken over (a stalled or dead client) cannot complete the row. A handler that
  raises is retried by its workflow's ``on_failure_retry`` policy (the row
  handed back until its backoff passed), then given up (logged). A client that
  stops while a handler runs hands the row back at once (the handler's thread
  runs on, unrecorded, as a stopping client's steps do).

Callbacks slower than a third of the lease have the rest of their batch renewed
(and what was delivered acknowledged) as they go.

A callback that raises is logged; the event still counts as delivered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _faults
from .._errors import CairnError
from .._models import (
    LIFECYCLE_ALL,
    LIFECYCLE_EVENTS,
    LIFECYCLE_FAILURES,
    LifecycleEvent,
    RunFailure,
)
from ..context import StepContext
from ..ids import new_token
from ..middleware import chain
from ..store import Lifecycle, StoredRun
from ..workflow import Workflow
from ._attempt import monotonic
from ._state import EngineState

__all__ = ["BATCH", "LifecycleDispatcher", "Subscriber"]

BATCH = 100
"""Event rows one lease takes at most."""


class _HandedBackError(Exception):
    """What :meth:`LifecycleDispatcher._run_handler` returns for a handler its stop handed back."""


_HANDED_BACK = _HandedBackError()

ON_FAILURE_STEP = "<on_failure>"
"""``ctx.step`` of the context the client's step middleware sees around an ``on_failure``
handler (no step can be named so: a step's name starts with a letter or a digit)."""


class _HandlerControl:
    """What an ``on_failure`` handler's context offers: the client's locks and buckets.

    The handler holds no step: the dispatcher renews its lease for it (a heartbeat is
    nothing to do), and it has no progress or memo of a step to record.
    """

    __slots__ = ("_state",)

    def __init__(self, state: EngineState) -> None:
        self._state = state

    def heartbeat(self) -> None:
        """Nothing: the dispatcher renews the handler's lease while it runs."""

    def progress(self, value: Any) -> None:
        raise CairnError("an on_failure handler has no step to report progress on")

    def memo(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        raise CairnError("an on_failure handler has no step to keep a memo in")

    def locks(self, what: str) -> Any:
        return self._state.locks(what)

    def rates(self, what: str) -> Any:
        return self._state.rates(what)


@dataclass(frozen=True, slots=True)
class Subscriber:
    """An ``on_event`` callback and the events it wants (None: every kind, every workflow)."""

    callback: Callable[[LifecycleEvent], object]
    kinds: frozenset[str] | None
    workflows: frozenset[str] | None

    def wants(self, event: LifecycleEvent) -> bool:
        """True when ``event`` is one of this subscriber's."""
        return (self.kinds is None or event.kind in self.kinds) and (
            self.workflows is None or event.workflow in self.workflows
        )


def subscribed_workflows(subscribers: Sequence[Subscriber]) -> frozenset[str] | None:
    """The workflows a client's subscribers want together (None: every workflow)."""
    names: set[str] = set()
    for subscriber in subscribers:
        if subscriber.workflows is None:
            return None
        names |= subscriber.workflows
    return frozenset(names)


class LifecycleDispatcher:
    """Delivers lifecycle events and runs ``on_failure`` handlers (module docstring)."""

    def __init__(
        self,
        state: EngineState,
        outbox: Lifecycle,
        subscribers: Sequence[Subscriber],
        read_run: Callable[[str], tuple[Any, StoredRun | None]],
    ) -> None:
        self._state = state
        self._outbox = outbox
        self._subscribers = tuple(subscribers)
        self._read_run = read_run
        """A run's decoded payload and its stored row (None once the run was deleted)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handler_done = threading.Event()
        """Set when the running on_failure handler ends, or when the client stops."""

    @property
    def _handlers(self) -> dict[str, Workflow]:
        """The registered workflows with an ``on_failure`` handler, by name."""
        return {n: w for n, w in self._state.registry.items() if w.failure_handler is not None}

    def add(self, subscriber: Subscriber) -> None:
        """Deliver to ``subscriber`` too, its subscription recorded at once."""
        self._subscribers = (*self._subscribers, subscriber)
        self.subscribe()

    def subscribe(self) -> None:
        """Record this client's subscriptions in the store (idempotent)."""
        now = self._state.now()
        if self._subscribers:
            wanted = subscribed_workflows(self._subscribers)
            names = [LIFECYCLE_ALL] if wanted is None else sorted(wanted)
            for name in names:
                self._outbox.subscribe_lifecycle(LIFECYCLE_EVENTS, name, now)
        for name in sorted(self._handlers):
            self._outbox.subscribe_lifecycle(LIFECYCLE_FAILURES, name, now)

    def start(self) -> None:
        """Record the subscriptions, then start the thread (its first pass at once)."""
        self.subscribe()
        self._thread = threading.Thread(
            target=self._loop,
            name=f"cairnflow-lifecycle-{self._state.settings.node_id}",
            daemon=True,
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the batch in flight (a running handler handed back); wait for the thread."""
        self._stop.set()
        self._handler_done.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        every = self._state.settings.poll_interval
        while not self._stop.is_set():
            try:
                busy = self.deliver() if self._subscribers else 0
                busy += self.handle_failures()
            except Exception:
                self._state.log.warning(
                    "lifecycle delivery failed; retrying at the next pass", exc_info=True
                )
                busy = 0
            if not busy:
                self._stop.wait(every)

    # -- events --------------------------------------------------------------------------
    def deliver(self) -> int:
        """Lease one batch of events, call the subscribers, acknowledge it; how many came."""
        state = self._state
        subscribers = self._subscribers
        token = new_token()
        events = self._outbox.claim_lifecycle(
            LIFECYCLE_EVENTS,
            subscribed_workflows(subscribers),
            token=token,
            lease_until=state.lease_until(),
            now=state.lease_clock.now_ns(),
            limit=BATCH,
        )
        if not events:
            return 0
        if _faults.plan is not None:
            _faults.fire(_faults.LIFECYCLE_AFTER_CLAIM)
        # Fenced: a client that stalled past its lease since the claim delivers nothing.
        held = set(self._outbox.renew_lifecycle([e.id for e in events], token, state.lease_until()))
        renewed = monotonic()
        delivered: list[int] = []
        lost = 0
        for event in events:
            if event.id not in held:
                continue
            if monotonic() - renewed > state.settings.lease / 3:
                # Slow callbacks: what was delivered is acknowledged, the rest renewed.
                lost += len(delivered) - self._outbox.ack_lifecycle(delivered, token)
                held -= set(delivered)
                delivered = []
                held = set(self._outbox.renew_lifecycle(held, token, state.lease_until()))
                renewed = monotonic()
                if event.id not in held:
                    continue
            for subscriber in subscribers:
                if subscriber.wants(event):
                    self._call(subscriber.callback, event)
            delivered.append(event.id)
        lost += len(delivered) - self._outbox.ack_lifecycle(delivered, token)
        if lost:
            state.log.warning(
                "%d lifecycle event(s) were taken over before they were acknowledged; "
                "another client delivers them again",
                lost,
            )
        return len(events)

    def _call(self, callback: Callable[[LifecycleEvent], object], event: LifecycleEvent) -> None:
        try:
            callback(event)
        except Exception:
            self._state.log.exception(
                "lifecycle callback %r failed on %s of run %s", callback, event.kind, event.run_id
            )

    # -- on_failure ----------------------------------------------------------------------
    def handle_failures(self) -> int:
        """Lease one failed run of a workflow with a handler and run the handler; 1 or 0."""
        state = self._state
        handlers = self._handlers
        if not handlers:
            return 0
        token = new_token()
        claimed = self._outbox.claim_lifecycle(
            LIFECYCLE_FAILURES,
            handlers.keys(),
            token=token,
            lease_until=state.lease_until(),
            now=state.lease_clock.now_ns(),
            limit=1,
        )
        if not claimed:
            return 0
        (event,) = claimed
        workflow = handlers[event.workflow]
        error = self._run_handler(workflow, event, token)
        if error is _HANDED_BACK:
            return 0
        if error is None:
            if not self._outbox.ack_lifecycle([event.id], token):
                state.log.warning(
                    "the on_failure handler of run %s finished after its lease was taken over; "
                    "its completion was not recorded",
                    event.run_id,
                )
            return 1
        delay = workflow.failure_retry.next_delay(error, event.deliveries, state.jitter())
        if delay is None:
            state.log.error(
                "the on_failure handler of run %s failed %d time(s); giving up",
                event.run_id,
                event.deliveries,
                exc_info=error,
            )
            self._outbox.ack_lifecycle([event.id], token)
        else:
            state.log.warning(
                "the on_failure handler of run %s failed; retrying in %.3gs", event.run_id, delay
            )
            due = state.lease_clock.now_ns() + int(delay * 1e9)
            self._outbox.release_lifecycle(event.id, token, due)
        return 1

    def _run_handler(
        self, workflow: Workflow, event: LifecycleEvent, token: str
    ) -> BaseException | None:
        """Run the handler in a thread of its own, renewing its lease; the error it raised."""
        handler = workflow.failure_handler
        assert handler is not None  # only workflows with one are in _handlers
        payload, stored = self._read_run(event.run_id)
        failure = RunFailure(
            run_id=event.run_id,
            workflow=event.workflow,
            payload=payload,
            step=None if event.error is None else event.error.step,
            error=event.error,
            attempt=event.deliveries,
            event=event,
        )
        outcome: list[BaseException | None] = []
        done = self._handler_done = threading.Event()  # set by the handler's end, or stop()

        # The client's step middleware runs around the handler too (metrics, traces: the
        # run's headers carry its trace context), with ctx.step ON_FAILURE_STEP.
        ctx = StepContext(
            run_id=event.run_id,
            workflow=event.workflow,
            step=ON_FAILURE_STEP,
            attempt=event.deliveries,
            payload=payload,
            parents={},
            labels={} if stored is None else stored.labels,
            headers={} if stored is None else stored.headers,
            tenant=None if stored is None else stored.tenant,
            node_id=self._state.settings.node_id,
            queue="" if stored is None else stored.queue,
            deadline=None,
            cancel_event=done,
            control=_HandlerControl(self._state),
        )
        middleware = self._state.middleware

        def run() -> None:
            try:
                if middleware:
                    chain(middleware, ctx, lambda: handler(failure))()
                else:
                    handler(failure)
                outcome.append(None)
            except BaseException as error:  # noqa: BLE001 - reported to the dispatcher
                outcome.append(error)
            finally:
                done.set()

        worker = threading.Thread(
            target=run, name=f"cairnflow-on-failure-{event.run_id}", daemon=True
        )
        worker.start()
        if self._stop.is_set():
            done.set()  # stop() came before this handler's event existed
        every = self._state.settings.lease / 3
        while True:
            done.wait(every)
            if outcome:
                break
            if self._stop.is_set():
                # The client stops: the failure goes back at once for another client to
                # handle (as a stopping client hands its running steps back); whatever this
                # handler does from now on is not recorded.
                self._outbox.release_lifecycle(event.id, token, self._state.lease_clock.now_ns())
                return _HANDED_BACK
            if _faults.plan is not None:
                _faults.fire(_faults.LIFECYCLE_BEFORE_RENEW)
            self._renew([event.id], token)
        return outcome[0] if outcome else RuntimeError("the on_failure handler did not return")

    def _renew(self, ids: Collection[int], token: str) -> None:
        try:
            self._outbox.renew_lifecycle(ids, token, self._state.lease_until())
        except Exception:
            self._state.log.warning("renewing an on_failure lease failed", exc_info=True)
