"""The dispatcher: finds work and hands it to the worker pool.

One thread per client. It claims as many attempts as the client has idle
workers in one store call, so a SQL store claims in one round trip (plus
the claim-ahead of :meth:`EngineState.claim_ahead` while steps are shorter
than writes; otherwise no lease is held for a busy node). It claims again at once when a claim came
back full, when this client made work due (an enqueue, a finished step, a
signal), when a notifier or :meth:`Client.wake` says so, at a local timer (a
retry, snooze, sleep or delayed start this client scheduled), and at every
poll, which also runs the housekeeping: ending due sleeps, failing overdue
waits and taking back expired leases.
"""

from __future__ import annotations

import threading

from .._errors import ErrorInfo, RunTimeout
from . import _events as events
from ._attempt import End, monotonic
from ._leader import Elector
from ._runner import StepRunner
from ._scheduler import Scheduler
from ._state import EngineState

__all__ = ["Dispatcher", "WorkerPool"]

_PRUNE_EVERY = 60.0
"""Seconds between two clean-ups of old schedule ticks by one client."""

_HANDED_OVER = frozenset({End.COMPLETED, End.TIMED_OUT})
"""Ends whose finalizer hands an outcome to the committer (the worker, or the watchdog)."""


class WorkerPool:
    """``workers`` threads running the claimed attempts of :attr:`EngineState.handoff`."""

    def __init__(self, state: EngineState, runner: StepRunner) -> None:
        self._state = state
        self._runner = runner
        node = state.settings.node_id
        self._threads = [
            threading.Thread(target=self._loop, name=f"cairnflow-worker-{node}-{i}", daemon=True)
            for i in range(state.settings.workers)
        ]

    def start(self) -> None:
        """Start every worker thread."""
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float) -> list[str]:
        """Ask every worker to exit; wait up to ``timeout`` in all; name those still busy."""
        for _ in self._threads:
            self._state.handoff.put(None)
        deadline = monotonic() + timeout
        stuck = []
        for thread in self._threads:
            thread.join(max(0.0, deadline - monotonic()))
            if thread.is_alive():
                stuck.append(thread.name)
        return stuck

    def _loop(self) -> None:
        try:
            while True:
                running = self._state.handoff.get()
                if running is None:
                    return
                try:
                    self._runner.run(running)
                except BaseException:  # the worker outlives anything a step throws at it
                    self._state.log.exception("worker crashed running %r", running)
                finally:
                    # An outcome handed to the committer keeps the slot and the lease until
                    # it is written; the committer releases the attempt then.
                    if running.end not in _HANDED_OVER:
                        self._state.untrack(running)
        finally:
            self._runner.close_thread_loop()


class Dispatcher:
    """The claim loop and housekeeping of one client (see the module docstring)."""

    def __init__(
        self,
        state: EngineState,
        runner: StepRunner,
        pool: WorkerPool,
        scheduler: Scheduler | None = None,
        elector: Elector | None = None,
    ) -> None:
        self._state = state
        self._runner = runner
        self._pool = pool
        self._scheduler = scheduler
        """Fires due schedules at every poll and timer (None: a worker-only node)."""
        self._elector = elector
        """With leader election: schedules are fired only while it says this client leads."""
        self._next_prune = 0.0
        self._thread = threading.Thread(
            target=self._loop, name=f"cairnflow-dispatcher-{state.settings.node_id}", daemon=True
        )

    def start(self) -> None:
        """Start the dispatcher thread."""
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the dispatcher thread to end (after ``state.stopping`` is set); True
        once it has ended, False if it still runs after ``timeout`` seconds."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        state = self._state
        poll = state.settings.poll_interval
        next_poll = 0.0
        while not state.stopping.is_set():
            state.wake_event.clear()
            now = state.now()
            if monotonic() >= next_poll:
                # Polls keep their cadence, however long each one takes (unless a whole
                # period was missed: then the cadence starts again from now).
                after = next_poll + poll
                next_poll = after if after > monotonic() else monotonic() + poll
                # What other clients made ready is claimed first: a poll's latency is the
                # claim's, not the housekeeping's.
                state.request_claim()
                self._claim()
                if self._housekeeping(now):
                    state.request_claim()
            elif state.pop_due_timers(now):
                self._housekeeping(now)
                state.request_claim()
            state.pop_due_claim_timers(now)
            self._claim()
            state.wake_event.wait(self._sleep_for(next_poll))

    def _sleep_for(self, next_poll: float) -> float:
        state = self._state
        wait = next_poll - monotonic()
        timer = state.next_timer()
        if timer is not None:
            wait = min(wait, (timer - state.now()) / 1e9)
        return max(0.0, wait)

    def _claim(self) -> None:
        state = self._state
        while not state.stopping.is_set():
            request = state.plan_claim()
            if request is None:
                return
            started = monotonic()
            try:
                claimed = state.store.claim(request)
            except Exception:
                state.release(request)
                state.request_claim()
                state.log.warning("claim failed; retrying at the next poll", exc_info=True)
                return
            state.accept(claimed, request, started)
            if len(claimed) < request.limit:
                return

    def _fire_schedules(self, now: int) -> bool:
        """Fire the due schedules, and now and then forget old ticks; True if runs started."""
        scheduler = self._scheduler
        if scheduler is None or (self._elector is not None and not self._elector.is_leader()):
            return False
        state = self._state
        try:
            fired = scheduler.run_due(now)
            if monotonic() >= self._next_prune:
                self._next_prune = monotonic() + _PRUNE_EVERY
                scheduler.prune(now)
        except Exception:
            state.log.warning("firing schedules failed; retrying at the next poll", exc_info=True)
            return True
        return fired

    def _housekeeping(self, now: int) -> bool:
        """End due sleeps, fail overdue waits, take back expired leases; True if work was made."""
        state = self._state
        names = state.workflow_names
        batch = state.settings.fetch_batch
        try:
            advanced = state.store.advance_due(now=now, workflows=names, limit=batch)
            if advanced.woken or advanced.timed_out:
                state.run_finished()
            overdue = self._time_out_runs(now)
            reclaimed = state.store.reclaim_expired(
                lease_now=state.lease_clock.now_ns() - int(state.settings.lease_skew * 1e9),
                now=now,
                workflows=names,
                max_reclaims=state.settings.max_reclaims,
                limit=batch,
            )
        except Exception:
            state.log.warning("housekeeping failed; retrying at the next poll", exc_info=True)
            return True  # maybe some of it went through: look for work anyway
        if reclaimed.requeued:
            events.leases_taken_back(reclaimed.requeued, state.settings.node_id)
        if state.observers and (reclaimed.requeued or reclaimed.abandoned):
            requeued, abandoned = reclaimed.requeued, len(reclaimed.abandoned)
            state.tell(lambda o: o.took_over(requeued, abandoned))
        for expired in reclaimed.abandoned:
            events.attempt_abandoned(expired, state.settings.node_id)
            self._runner.abandon(expired)
        fired = self._fire_schedules(now)
        return bool(
            fired
            or advanced.promoted
            or advanced.woken
            or advanced.timed_out
            or reclaimed.requeued
            or reclaimed.abandoned
            or overdue
        )

    def _time_out_runs(self, now: int) -> int:
        """Fail the runs of this client's workflows past their ``run_timeout`` (RUN_TIMEOUT).

        Every client judges, from the store's indexed read; the store ends each run
        once, under its lock, however many clients judge at the same moment. Their
        running attempts hear the cancel at their next lease renewal.
        """
        state = self._state
        deadlines = state.facets.deadlines
        if deadlines is None:
            return 0
        ended = 0
        for workflow in list(state.registry.values()):
            if workflow.run_timeout is None:
                continue
            error = ErrorInfo(
                type=RunTimeout.__name__,
                message=f"the run ran past its run_timeout of {workflow.run_timeout:g} s",
            )
            due_before = now - int(workflow.run_timeout * 1e9)
            batch = state.settings.fetch_batch
            ended += len(deadlines.time_out_runs(workflow.name, due_before, error, now, batch))
        if ended:
            state.log.info("failed %d run(s) past their run_timeout", ended)
            state.run_finished()
        return ended
