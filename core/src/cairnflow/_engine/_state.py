"""The state one client's engine threads share, and the small operations on it.

Slots are counted for the client (:attr:`EngineState.in_flight`,
:attr:`EngineState.reserved`) and for each queue it serves
(:class:`~cairnflow._engine._slots.QueueSlots`), under one lock: a claim is
planned against both, so neither the client's ``workers`` (plus its claim-ahead)
nor a queue's ``workers`` is ever exceeded, whoever plans at the same time.
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from .._caps import Cap
from .._errors import Unsupported
from .._queues import DEFAULT_QUEUE, QueueConfig
from ..clock import Clock
from ..codec import Codec, encode_within
from ..notify import Notifier
from ..retry import JitterSource
from ..state import Journal, Locks, RateLimiter
from ..store import ClaimedAttempt, ClaimRequest, QueueClaim, Store, StoreFacets
from ..workflow import Workflow
from ._attempt import RunningAttempt, monotonic
from ._settings import Settings
from ._slots import QueueOrder, QueueSlots, note_claimed

if TYPE_CHECKING:
    from ..middleware import EngineObserver, StepMiddleware

__all__ = ["CLOSURE_WORKFLOW", "EngineState"]

CLOSURE_WORKFLOW = "cairnflow.closure"
"""The workflow name of runs made by ``Client.submit`` (reserved)."""

_NS = 1_000_000_000


class EngineState:
    """Everything the dispatcher, the workers and the keeper of one client share."""

    def __init__(
        self,
        *,
        facets: StoreFacets,
        settings: Settings,
        codec: Codec,
        clock: Clock,
        lease_clock: Clock,
        jitter: JitterSource,
        notifier: Notifier | None,
        logger: logging.Logger,
    ) -> None:
        self.facets = facets
        self.store: Store = facets.store
        self.settings = settings
        self.codec = codec
        self.clock = clock
        self.lease_clock = lease_clock
        self.jitter = jitter
        self.notifier = notifier
        self.log = logger
        self.caps = self.store.capabilities
        self.channel = self.store.channel
        self.registry: dict[str, Workflow] = {}
        self.workflow_names = self._names()
        self.keyed = False
        """Whether a registered workflow declares a concurrency key: its claims honour keys."""
        self.lock = threading.Lock()
        self.queues: dict[str, QueueSlots] = {}
        """The queues this client serves: its configured ones, or its workflows' (by name)."""
        self._order = QueueOrder()
        for config in settings.queues:
            self._serve(config)
        if not settings.queues and CLOSURE_WORKFLOW in self.workflow_names:
            self._serve(QueueConfig(DEFAULT_QUEUE))  # where submit() puts its runs
        self.held: dict[str, RunningAttempt] = {}
        self.handoff: queue.SimpleQueue[RunningAttempt | None] = queue.SimpleQueue()
        """Claimed attempts on their way to a worker (the pool takes them; None stops one)."""
        self.in_flight = 0
        self.reserved = 0
        """Slots promised to claims planned but not yet accepted or released: a claim
        reserves its limit when it is planned, so two claims planned at once (the
        dispatcher's and the committer's) never count the same free slot."""
        self.wake_event = threading.Event()
        self.replan = threading.Event()
        """Set when an attempt got a deadline: the watchdog plans again."""
        self.stopping = threading.Event()
        self.running = False
        self.finished = threading.Condition()
        self._timers: list[int] = []
        self._claim_timers: list[tuple[int, str]] = []
        """(due, queue): when a rate-limited queue that came back short is asked again."""
        self._journal: Journal | None = None
        self._locks: Locks | None = None
        self._rates: RateLimiter | None = None
        self.attempt_time = 0.0
        """A moving average of how long an attempt runs, from its worker's start to its
        outcome, in seconds (written by the workers)."""
        self.write_time = 0.0
        """A moving average of how long the committer's writes take, in seconds."""
        self.claimed_total = 0
        """Attempts this client claimed since it started (what ``Recycle.jobs`` counts)."""
        self.max_claims: int | None = settings.recycle.jobs if settings.recycle else None
        """With ``Recycle(jobs=n)``: the client claims no more than ``n`` attempts in all."""
        self.claims_spent = threading.Event()
        """Set once :attr:`max_claims` attempts were claimed (the recycle watch drains then)."""
        self.middleware: tuple[StepMiddleware, ...] = ()
        """Around every step attempt, the first outermost (``Client.use``)."""
        self.observers: tuple[EngineObserver, ...] = ()
        """Told of claims, takeovers and outcomes (``Client.observe``)."""

    # -- capabilities -------------------------------------------------------------------
    def require(self, cap: Cap, what: str) -> None:
        """Raise :class:`Unsupported` unless the store declared ``cap``."""
        if cap not in self.caps:
            raise Unsupported(cap, what, store=f"the {self.store.describe().driver} store")

    # -- durable step state (made on first use: most clients never memo or lock) ----------
    def journal(self, what: str) -> Journal:
        """The client's :class:`~cairnflow.Journal` (its codec, payload limit and clock)."""
        self.require(Cap.JOURNAL, what)
        journal = self._journal
        if journal is None:
            journal = self._journal = Journal(
                self.store,
                codec=self.codec,
                payload_limit=self.settings.payload_limit,
                clock=self.clock,
            )
        return journal

    def locks(self, what: str) -> Locks:
        """The client's :class:`~cairnflow.Locks` (on the database's clock where there is one)."""
        self.require(Cap.LOCKS, what)
        locks = self._locks
        if locks is None:
            locks = self._locks = Locks(self.store)
        return locks

    def rates(self, what: str) -> RateLimiter:
        """The client's :class:`~cairnflow.RateLimiter` (on the database's clock if it has one)."""
        self.require(Cap.RATE_LIMIT, what)
        rates = self._rates
        if rates is None:
            rates = self._rates = RateLimiter(self.store)
        return rates

    # -- payloads ----------------------------------------------------------------------------
    def encode(self, value: object, what: str) -> bytes:
        """``value`` encoded by the client's codec, within ``payload_limit``.

        The one check of every value a client writes (:func:`~cairnflow.codec.encode_within`).
        """
        return encode_within(self.codec, value, what, self.settings.payload_limit)

    # -- registry ---------------------------------------------------------------------------
    def register(self, workflow: Workflow) -> None:
        """Add ``workflow`` and refresh the set of names the dispatcher claims for.

        A client without configured queues serves its workflows' queues, so the
        workflow's queue is served from now on.
        """
        with self.lock:
            self.registry[workflow.name] = workflow
            self.workflow_names = self._names()
            self.keyed = self.keyed or workflow.has_keys
            if not self.settings.queues and workflow.queue not in self.queues:
                self._serve(QueueConfig(workflow.queue))

    def _serve(self, config: QueueConfig) -> None:
        self.queues[config.name] = QueueSlots.of(config, self.settings.workers)
        self._order.set(self.queues.values())

    def _names(self) -> frozenset[str]:
        names = set(self.registry)
        if Cap.CLOSURE in self.caps:
            names.add(CLOSURE_WORKFLOW)
        return frozenset(names)

    # -- time -------------------------------------------------------------------------------
    def now(self) -> int:
        """Now on the scheduling clock."""
        return self.clock.now_ns()

    def lease_until(self) -> int:
        """The end of a lease taken now, on the lease clock."""
        return self.lease_clock.now_ns() + self.settings.lease_ns

    def add_timer(self, due_ns: int) -> None:
        """Look for work again at ``due_ns`` (scheduling clock) instead of the next poll."""
        with self.lock:
            heapq.heappush(self._timers, due_ns)
        self.wake_event.set()

    def pop_due_timers(self, now: int) -> bool:
        """Drop timers due at ``now``; True if there were any."""
        fired = False
        with self.lock:
            while self._timers and self._timers[0] <= now:
                heapq.heappop(self._timers)
                fired = True
        return fired

    def next_timer(self) -> int | None:
        """The earliest pending timer (a rate-limited queue's claim timer too), or None."""
        with self.lock:
            due = [self._timers[0]] if self._timers else []
            if self._claim_timers:
                due.append(self._claim_timers[0][0])
            return min(due) if due else None

    # -- worker slots and the attempts held -----------------------------------------------
    def idle(self) -> int:
        """Worker slots free for a claim."""
        with self.lock:
            return self.settings.workers - self.in_flight - self.reserved

    def busy(self) -> int:
        """Attempts holding a worker slot: running, queued for a worker, or being written."""
        return self.in_flight

    def track(self, attempts: Iterable[RunningAttempt], freed: Iterable[str] = ()) -> None:
        """Hold ``attempts`` (their slots and their leases) from the claim on.

        ``freed``: tokens whose slots are given back in the same step (see :meth:`free_slots`).
        """
        with self.lock:
            self._free(freed)
            self._hold(attempts)

    def _hold(self, attempts: Iterable[RunningAttempt]) -> None:
        queues = self.queues
        for running in attempts:
            self.held[running.token] = running
            self.in_flight += 1
            slots = queues.get(running.claimed.queue)
            if slots is not None:
                slots.held += 1

    def _give_back(self, running: RunningAttempt) -> None:
        """Free ``running``'s slot, in the client's count and its queue's (lock held)."""
        running.slot_freed = True
        self.in_flight -= 1
        slots = self.queues.get(running.claimed.queue)
        if slots is not None:
            slots.held -= 1

    def free_slots(self, tokens: Iterable[str]) -> None:
        """Free the slots of attempts whose outcomes were just written (their leases stay held).

        The committer calls this as soon as its transaction ends, before it
        reacts to the outcomes, when the transaction claimed nothing for them.
        """
        with self.lock:
            self._free(tokens)

    def _free(self, tokens: Iterable[str]) -> None:
        for token in tokens:
            running = self.held.get(token)
            if running is not None and not running.slot_freed:
                self._give_back(running)

    def untrack(self, running: RunningAttempt, *, wake: bool = True) -> None:
        """Release ``running``'s slot and lease; wake the dispatcher if it wants to claim more.

        ``wake=False`` where the slot was already refilled: the committer's write
        claimed for it in the same transaction.
        """
        self.untrack_all((running,), wake=wake)

    def untrack_all(self, attempts: Iterable[RunningAttempt], *, wake: bool = True) -> None:
        """:meth:`untrack` for several attempts at once (one lock, at most one wake-up)."""
        wanted = False
        with self.lock:
            held, queues = self.held, self.queues
            for running in attempts:
                if held.pop(running.token, None) is None:
                    continue
                slots = queues.get(running.claimed.queue)
                wanted = wanted or (slots is not None and slots.want_claim)
                if not running.slot_freed:
                    self._give_back(running)
            wake = wake and wanted
        if wake:
            self.wake_event.set()

    def held_attempts(self) -> list[RunningAttempt]:
        """A snapshot of the attempts this client holds."""
        with self.lock:
            return list(self.held.values())

    def attempt_ran(self, seconds: float) -> None:
        """Count one attempt's duration into :attr:`attempt_time`."""
        # Unlocked: a lost update between two workers only nudges a moving average.
        self.attempt_time += (seconds - self.attempt_time) / 16

    def claim_ahead(self) -> int:
        """How many attempts a claim may take beyond the free workers, now.

        While attempts run shorter than the write that ends them and claims
        their successors, the workers spend most of their time waiting for
        that write: claiming up to ``prefetch`` attempts ahead makes each write
        end and start up to ``workers + prefetch`` attempts, so the round trip
        and the commit are paid once for all of them. Longer steps claim only
        for free workers, so no lease waits long behind a busy worker.
        """
        ahead = self.settings.prefetch
        if ahead and 0.0 < self.attempt_time < self.write_time:
            return ahead
        return 0

    # -- claiming -----------------------------------------------------------------------------
    def plan_claim(
        self, freeing: Collection[str] = (), *, eager: bool = False
    ) -> ClaimRequest | None:
        """A claim for the idle slots (and the slots of ``freeing``, about to free), or None.

        ``freeing``: tokens of attempts whose outcomes the claim's transaction
        writes; only those still holding a slot count, each for the client and
        for its queue. A queue is asked for when something suggests it has work
        (a wake-up since its last claim came back short, or ``eager``: an
        outcome in the same transaction, of an attempt of that queue, may make
        steps of its run ready) and it has a free slot; each queue for at most
        ``min(its free slots, the client's)``, the claim for at most the
        client's. None when no queue is asked for. Every slot asked for is
        reserved here (the client's total, and each queue's own ask) until the
        claim is accepted or released. The flags are cleared here; a wake-up
        during the claim sets them again, so none is lost.
        """
        with self.lock:
            if self.stopping.is_set() or not self.settings.runs_steps:
                return None  # stopping, or a scheduler-only node
            freed: dict[str, int] = {}
            touched: set[str] = set()
            for token in freeing:
                running = self.held.get(token)
                if running is not None:
                    queue = running.claimed.queue
                    touched.add(queue)
                    if not running.slot_freed:
                        freed[queue] = freed.get(queue, 0) + 1
            ahead = self.claim_ahead()
            total = (
                self.settings.workers + ahead - self.in_flight - self.reserved + sum(freed.values())
            )
            if self.max_claims is not None:
                total = min(total, self.max_claims - self.claimed_total - self.reserved)
            if total <= 0:
                return None  # the queues' flags stay set: the next freed slot claims
            asks: list[tuple[QueueSlots, int]] = []
            for slots in self._order.next():
                if not (slots.want_claim or (eager and slots.name in touched)):
                    continue
                free = slots.free(ahead) + freed.get(slots.name, 0)
                if free > 0:
                    asks.append((slots, min(free, total)))
            if not asks:
                return None
            limit = min(total, sum(n for _, n in asks))
            for slots, n in asks:
                slots.want_claim = False
                slots.reserved += n
            self.reserved += limit
        return ClaimRequest(
            workflows=self.workflow_names,
            limit=limit,
            now=self.now(),
            lease_until=self.lease_until(),
            node_id=self.settings.node_id,
            queues=tuple(QueueClaim(s.name, n, s.global_limit, s.rate) for s, n in asks),
            keys=self.keyed,
        )

    def release(self, request: ClaimRequest) -> None:
        """Give back the slots ``request`` reserved: its claim was not made (or failed)."""
        with self.lock:
            self._unreserve(request)

    def _unreserve(self, request: ClaimRequest) -> None:
        self.reserved -= request.limit
        queues = self.queues
        for ask in request.queues:
            slots = queues.get(ask.name)
            if slots is not None and ask.limit is not None:
                slots.reserved -= ask.limit

    def accept(
        self,
        claimed: list[ClaimedAttempt],
        request: ClaimRequest,
        started: float,
        freed: Sequence[str] = (),
    ) -> None:
        """Hold and hand to the workers what a claim returned; claim again if it came back full.

        ``freed``: the tokens of outcomes written in the claim's transaction, whose
        slots the claim refilled.
        """
        if self.observers:
            seconds = monotonic() - started
            self.tell(lambda o: o.claimed(claimed, seconds, joined=bool(freed)))
        interrupt = self.settings.interrupt
        attempts = [RunningAttempt(c, started, interrupt=interrupt) for c in claimed]
        with self.lock:  # one step: the reservation becomes the attempts it claimed
            self._unreserve(request)
            self._free(freed)
            self._hold(attempts)
            note_claimed(self.queues, request.queues, request.limit, claimed)
            self.claimed_total += len(claimed)
            spent = self.max_claims is not None and self.claimed_total >= self.max_claims
        if spent:
            self.claims_spent.set()
        self._rate_timers(request, claimed)
        for running in attempts:
            self.handoff.put(running)
        if len(claimed) >= request.limit:
            self.wake_event.set()  # full: there may be more

    def _rate_timers(self, request: ClaimRequest, claimed: Sequence[ClaimedAttempt]) -> None:
        """Claim a rate-limited queue again when its bucket holds its next token.

        A rate-limited queue that came back short may have been short of tokens,
        not of work. It is not asked again at once (its bucket would refuse every
        claim until a token leaks back: a busy loop), but at most one interval
        later, when the bucket holds its next token, instead of at the next poll.
        """
        due = [
            (request.now + ask.rate.interval_ns, ask.name)
            for ask in request.queues
            if ask.rate is not None
            and sum(1 for c in claimed if c.queue == ask.name)
            < (request.limit if ask.limit is None else min(ask.limit, request.limit))
        ]
        if due:
            with self.lock:
                for timer in due:
                    heapq.heappush(self._claim_timers, timer)
            self.wake_event.set()

    def pop_due_claim_timers(self, now: int) -> None:
        """Ask again each rate-limited queue whose timer is due at ``now``."""
        if not self._claim_timers:  # the dispatcher's every turn: no lock without a timer
            return
        with self.lock:
            while self._claim_timers and self._claim_timers[0][0] <= now:
                _, name = heapq.heappop(self._claim_timers)
                slots = self.queues.get(name)
                if slots is not None:
                    slots.want_claim = True

    def tell(self, event: Callable[[EngineObserver], None]) -> None:
        """Tell every observer ``event``; what one raises is logged, never the engine's."""
        for observer in self.observers:
            try:
                event(observer)
            except Exception:
                self.log.exception("engine observer %r failed", observer)

    # -- wake-ups ---------------------------------------------------------------------------
    def request_claim(self) -> None:
        """Make the dispatcher's next pass claim, from every queue (from its thread itself)."""
        with self.lock:
            for slots in self.queues.values():
                slots.want_claim = True

    def wake(self) -> None:
        """Make the dispatcher look for work now."""
        self.request_claim()
        self.wake_event.set()

    def work_made_ready(self, *, others: bool) -> None:
        """Work became due: wake this client, and tell the others when asked to."""
        self.wake()
        if others:
            self.notify_others()

    def notify_others(self) -> None:
        """Tell the other clients of the store, through the notifier, that work may be due."""
        if self.notifier is not None:
            try:
                self.notifier.notify(self.channel)
            except Exception:  # a hint only: polling finds the work anyway
                self.log.warning("could not send a wake-up notification", exc_info=True)

    def run_finished(self) -> None:
        """Wake every ``Client.wait`` of this client."""
        with self.finished:
            self.finished.notify_all()
