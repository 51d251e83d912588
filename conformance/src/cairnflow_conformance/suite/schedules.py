"""Schedules: one fire per tick across clients (CRON), the policies, pause, trigger, when,
windows, tick events, listing and history; leader election (LEADER_ELECTION).

Every test drives the scheduling clock by hand (:class:`cairnflow.clock.Fake`,
shared by the clients of a test), so a tick falls due exactly when the test
moves the clock and no test waits for a real minute. Leases stay on the real
clock. What fired is read from the store: runs by their schedule label, ticks
from the schedule's history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow._engine._leader import LEADER_ROLE
from cairnflow.clock import Fake
from cairnflow.schedule import schedule_id
from cairnflow.store import ScheduleRecord, Schedules, StoreFacets, TickOutcome, TickRecord

from .._kit import Kit
from .._markers import proves
from ..workflows import TICKER, TICKER_SCHEDULE
from ._shared import TIMEOUT, wait_until

__all__ = ["ScheduleTests"]

_WORKFLOW = "kit-cron"
_LABEL = "cairnflow.schedule"
_START = datetime(2026, 3, 6, 10, 0, 30, tzinfo=UTC)  # a Friday, 30 s past a minute
_S = 10**9
_PROCESSES = pytest.mark.xdist_group("cairnflow-conformance-processes")


def _workflow(
    name: str = "every-minute", *, step: Callable[..., Any] | None = None, **options: Any
) -> cf.Workflow:
    wf = cf.Workflow(_WORKFLOW, steps=[cf.Step("tick", step or (lambda ctx, data: data))])
    options.setdefault("cron", "* * * * *")
    wf.schedule(name, payload={"from": name}, **options)
    return wf


def _runs(client: cf.Client, schedule: str) -> list[cf.RunOverview]:
    return list(client.runs(workflow=_WORKFLOW, labels={_LABEL: schedule}, limit=1000).runs)


def _wait_runs(client: cf.Client, schedule: str, count: int) -> list[cf.RunOverview]:
    wait_until(
        lambda: len(_runs(client, schedule)) >= count,
        timeout=TIMEOUT,
        what=f"{count} run(s) of schedule {schedule!r}",
    )
    return _runs(client, schedule)


def _history(client: cf.Client, schedule: str) -> list[tuple[str, str]]:
    """(outcome, reason) of every recorded tick, oldest first."""
    ticks = client.schedule_history(_WORKFLOW, schedule, limit=1000)
    return [(t.outcome.value, t.reason) for t in reversed(ticks)]


def _wait_ticks(client: cf.Client, schedule: str, count: int) -> list[tuple[str, str]]:
    wait_until(
        lambda: len(_history(client, schedule)) >= count,
        timeout=TIMEOUT,
        what=f"{count} recorded tick(s) of schedule {schedule!r}",
    )
    return _history(client, schedule)


class ScheduleTests:
    """``Cap.CRON`` and the schedule capabilities built on it."""

    @proves(Cap.CRON, requires=[Cap.RUN_QUERY, Cap.SCHEDULE_HISTORY])
    def test_every_tick_fires_once_across_three_clients(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        clients = [
            kit.client(_workflow(), store=store, clock=clock, node_id=f"kit-cron-{n}")
            for n, store in enumerate(kit.peer_stores(3))
        ]
        reader = clients[0]
        for minute in range(1, 7):
            clock.advance(60)
            _wait_runs(reader, "every-minute", minute)
        ticks = reader.schedule_history(_WORKFLOW, "every-minute", limit=100)
        assert [t.outcome for t in ticks] == [TickOutcome.FIRED] * 6
        assert len({t.at_ns for t in ticks}) == 6, "a tick was recorded twice"
        runs = _runs(reader, "every-minute")
        assert len(runs) == 6, f"{len(runs)} runs for 6 ticks"
        for run in runs:
            info = reader.wait(run.ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert info.result == {"from": "every-minute"}
            assert info.labels[_LABEL] == "every-minute"

    @proves(Cap.CRON)
    def test_a_tick_is_fired_by_one_caller_only(self, cairnflow_kit: Kit) -> None:
        # At the SPI: two clients planned the same pass from the same stored next fire.
        # The first to write fires the tick; the other's call applies nothing at all.
        kit = cairnflow_kit
        first, second = (StoreFacets.of(s).schedules for s in kit.peer_stores(2))
        assert first is not None
        assert second is not None
        client = kit.client(_workflow("raced"), start=False)
        now = cf.clock.to_ns(_START)
        tick = cf.clock.to_ns(datetime(2026, 3, 6, 10, 1, tzinfo=UTC))
        record = ScheduleRecord(
            id=schedule_id(_WORKFLOW, "raced"),
            workflow=_WORKFLOW,
            name="raced",
            spec="{}",
            fingerprint="f",
            next_fire=tick,
            created_at=now,
            updated_at=now,
        )
        first.save_schedule(record)
        run = client._new_run(cf.Job(_WORKFLOW, {"n": 1}), tick)

        def fire(store: Schedules, expected: int | None, at: int = tick) -> list[str] | None:
            ticks = [TickRecord(record.id, at, TickOutcome.FIRED, "due", "kit", tick)]
            return store.fire_ticks(
                record.id, expected_next=expected, next_fire=tick + 60 * _S, ticks=ticks, runs=[run]
            )

        won = fire(first, tick)
        assert won is not None
        assert len(won) == 1
        assert fire(second, tick) is None, "a second caller fired the same tick"
        # Planned from a next fire that moved on: refused even for a tick not yet recorded.
        assert fire(second, tick, at=tick + 60 * _S) is None, "a stale plan was applied"
        assert fire(second, None) is None, "a tick already recorded was recorded again"
        assert kit.run_count() == 1, "a refused fire_ticks wrote a run"
        (stored,) = [s for s in second.list_schedules([_WORKFLOW]) if s.id == record.id]
        assert (stored.next_fire, stored.last_fire, stored.last_run_id) == (
            tick + 60 * _S,
            tick,
            won[0],
        )

    @proves(Cap.CRON, requires=[Cap.SCHEDULE_LIST])
    def test_a_redeploy_keeps_the_stored_next_fire_and_a_change_recomputes_it(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        first = kit.client(_workflow("hourly", cron="0 * * * *"), clock=clock)
        (stored,) = first.schedules()
        assert stored.next_fire_ns == cf.clock.to_ns(datetime(2026, 3, 6, 11, tzinfo=UTC))
        first.stop()
        clock.advance(30 * 60)  # 10:30:30: a recomputation would still say 11:00...
        same = kit.client(_workflow("hourly", cron="0 * * * *"), clock=clock)
        (kept,) = same.schedules()
        assert (kept.id, kept.next_fire_ns) == (stored.id, stored.next_fire_ns)
        same.stop()
        changed = kit.client(_workflow("hourly", cron="45 * * * *"), clock=clock)
        (moved,) = changed.schedules()  # ...one row, whatever the declaration says now
        assert moved.id == stored.id
        assert moved.next_fire_ns == cf.clock.to_ns(datetime(2026, 3, 6, 10, 45, tzinfo=UTC))

    @proves(Cap.CRON, requires=[Cap.RUN_QUERY, Cap.SCHEDULE_HISTORY])
    def test_ticks_missed_while_no_client_ran_follow_the_misfire_policy(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        wf = cf.Workflow(_WORKFLOW, steps=[cf.Step("tick", lambda ctx, data: data)])
        wf.schedule("skip", cron="* * * * *", misfire=cf.Misfire.SKIP)
        wf.schedule("once", cron="* * * * *", misfire=cf.Misfire.FIRE_ONCE)
        wf.schedule("catch-up", cron="* * * * *", misfire=cf.Misfire.CATCH_UP(300))
        kit.client(wf, clock=clock).stop()  # recorded; next fires at 10:01
        clock.advance(10 * 60)  # 10:10:30: ticks 10:01 to 10:10 fell due with nobody running
        client = kit.client(wf, clock=clock)
        # The 10:10 tick is on time (30 s late) and fires under every policy.
        assert len(_wait_runs(client, "skip", 1)) == 1
        assert _wait_ticks(client, "skip", 10) == [("misfired", "missed")] * 9 + [("fired", "due")]
        assert len(_wait_runs(client, "once", 2)) == 2  # 10:09 for the missed ones, 10:10
        assert _wait_ticks(client, "once", 10) == [("misfired", "coalesced")] * 8 + [
            ("fired", "late"),
            ("fired", "due"),
        ]
        assert len(_wait_runs(client, "catch-up", 5)) == 5  # 10:06 to 10:10
        assert (
            _wait_ticks(client, "catch-up", 10)
            == [("misfired", "missed")] * 5 + [("fired", "due")] * 5
        )

    @proves(Cap.OVERLAP_SKIP, requires=[Cap.CRON, Cap.RUN_QUERY, Cap.SCHEDULE_HISTORY])
    def test_overlap_skip_skips_a_tick_while_the_previous_run_is_unfinished(
        self, cairnflow_kit: Kit
    ) -> None:
        release = threading.Event()
        clock = Fake(_START)
        wf = _workflow(
            "no-overlap", overlap=cf.Overlap.SKIP, step=lambda ctx, data: release.wait(TIMEOUT)
        )
        client = cairnflow_kit.client(wf, clock=clock)
        clock.advance(60)
        (first,) = _wait_runs(client, "no-overlap", 1)
        clock.advance(60)  # the first run still runs
        assert _wait_ticks(client, "no-overlap", 2) == [("fired", "due"), ("skipped", "overlap")]
        release.set()
        client.wait(first.ref, timeout=TIMEOUT)
        clock.advance(60)
        assert len(_wait_runs(client, "no-overlap", 2)) == 2
        assert _history(client, "no-overlap")[-1] == ("fired", "due")

    @proves(Cap.SCHEDULE_PAUSE, requires=[Cap.CRON, Cap.RUN_QUERY, Cap.SCHEDULE_HISTORY])
    def test_a_tick_due_while_paused_never_fires_not_even_on_resume(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        client = kit.client(_workflow("pausable"), clock=clock)
        operator = kit.client(start=False, store=kit.peer_stores(1)[0], clock=clock)
        operator.pause_schedule(_WORKFLOW, "pausable")  # from a client never started
        assert [s.paused for s in operator.schedules()] == [True]
        clock.advance(60)
        assert _wait_ticks(client, "pausable", 1) == [("skipped", "paused")]
        operator.resume_schedule(_WORKFLOW, "pausable")
        clock.advance(1)  # a pass after the resume: the paused tick stays unfired
        clock.advance(59)  # 10:02:30: the first tick after the resume
        assert len(_wait_runs(client, "pausable", 1)) == 1
        assert _wait_ticks(client, "pausable", 2) == [("skipped", "paused"), ("fired", "due")]
        assert len(_runs(client, "pausable")) == 1

    @proves(Cap.SCHEDULE_TRIGGER, requires=[Cap.CRON, Cap.RUN_QUERY])
    def test_a_trigger_fires_now_outside_the_cron_once(self, cairnflow_kit: Kit) -> None:
        clock = Fake(_START)
        client = cairnflow_kit.client(_workflow("manual", cron="0 3 * * *"), clock=clock)
        listed = cairnflow_kit.declares(Cap.SCHEDULE_LIST)
        before = client.schedules()[0].next_fire_ns if listed else None
        ref = client.trigger_schedule(_WORKFLOW, "manual")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.labels[_LABEL] == "manual"
        assert [r.id for r in _runs(client, "manual")] == [ref.id]
        if listed:  # the cron goes on as it was
            assert client.schedules()[0].next_fire_ns == before

    @proves(Cap.SCHEDULE_WHEN, requires=[Cap.CRON, Cap.RUN_QUERY, Cap.SCHEDULE_HISTORY])
    def test_a_when_predicate_decides_each_tick(self, cairnflow_kit: Kit) -> None:
        clock = Fake(_START)
        asked: list[datetime] = []

        def even_minutes(tick: datetime) -> bool:
            asked.append(tick)
            return tick.minute % 2 == 0

        client = cairnflow_kit.client(_workflow("even", when=even_minutes), clock=clock)
        for minute in range(1, 5):
            clock.advance(60)
            _wait_ticks(client, "even", minute)
        assert _history(client, "even") == [
            ("skipped", "when"),
            ("fired", "due"),
            ("skipped", "when"),
            ("fired", "due"),
        ]
        assert len(_runs(client, "even")) == 2
        assert [t.minute for t in asked] == [1, 2, 3, 4]

    @proves(Cap.SCHEDULE_WINDOW, requires=[Cap.CRON, Cap.RUN_QUERY, Cap.SCHEDULE_HISTORY])
    def test_ticks_outside_every_window_do_not_fire(self, cairnflow_kit: Kit) -> None:
        clock = Fake(datetime(2026, 3, 6, 23, 58, 30, tzinfo=UTC))  # Friday night
        wf = _workflow("weekdays", windows=[cf.Window(days="mon-fri")])
        client = cairnflow_kit.client(wf, clock=clock)
        for minute in range(1, 4):
            clock.advance(60)
            _wait_ticks(client, "weekdays", minute)
        assert _history(client, "weekdays") == [
            ("fired", "due"),  # Friday 23:59
            ("skipped", "window"),  # Saturday 00:00
            ("skipped", "window"),  # Saturday 00:01
        ]
        assert len(_runs(client, "weekdays")) == 1

    @proves(Cap.TICK_EVENTS, requires=[Cap.CRON])
    def test_every_tick_is_reported_once_by_the_client_that_handled_it(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        events, heard = _listener()

        wf = _workflow("reported", windows=[cf.Window(days="fri", start="10:00", end="10:02")])
        for n, store in enumerate(kit.peer_stores(2)):
            kit.client(wf, store=store, clock=clock, on_tick=heard, node_id=f"kit-tick-{n}")
        for minute in range(1, 4):
            clock.advance(60)
            wait_until(lambda: len(events) >= minute, timeout=TIMEOUT, what="tick events")  # noqa: B023
        seen = sorted((e.at_ns, e.outcome.value, e.reason) for e in events)
        minute_ns = 60 * 10**9
        start = cf.clock.to_ns(datetime(2026, 3, 6, 10, 1, tzinfo=UTC))
        assert seen == [
            (start, "fired", "due"),
            (start + minute_ns, "skipped", "window"),
            (start + 2 * minute_ns, "skipped", "window"),
        ]
        fired = [e for e in events if e.outcome is TickOutcome.FIRED]
        assert fired[0].run is not None
        assert fired[0].schedule == "reported"
        assert all(e.node in {"kit-tick-0", "kit-tick-1"} for e in events)

    @proves(Cap.SCHEDULE_LIST, requires=[Cap.CRON])
    def test_schedules_are_listed_with_next_fire_pause_and_last_fire(
        self, cairnflow_kit: Kit
    ) -> None:
        clock = Fake(_START)
        wf = _workflow("listed", cron="*/5 * * * *", tz="Europe/Berlin")
        client = cairnflow_kit.client(wf, clock=clock)
        reader = cairnflow_kit.client(start=False, clock=clock)  # never started
        (listed,) = reader.schedules(_WORKFLOW)
        assert (listed.workflow, listed.name, listed.cron, listed.tz) == (
            _WORKFLOW,
            "listed",
            "*/5 * * * *",
            "Europe/Berlin",
        )
        assert listed.next_fire_ns == cf.clock.to_ns(datetime(2026, 3, 6, 10, 5, tzinfo=UTC))
        assert (listed.paused, listed.last_fire_ns, listed.last_run) == (False, None, None)
        clock.advance(5 * 60)
        wait_until(
            lambda: reader.schedules()[0].last_run is not None,
            timeout=TIMEOUT,
            what="the first fire",
        )
        (fired,) = reader.schedules()
        assert fired.last_fire_ns == listed.next_fire_ns
        assert fired.next_fire_ns == cf.clock.to_ns(datetime(2026, 3, 6, 10, 10, tzinfo=UTC))
        assert fired.last_run is not None
        assert client.wait(fired.last_run, timeout=TIMEOUT).status is cf.Status.SUCCEEDED

    @proves(Cap.SCHEDULE_LIST, requires=[Cap.CRON])
    def test_schedules_are_added_updated_and_removed_at_run_time_by_any_client(
        self, cairnflow_kit: Kit
    ) -> None:
        clock = Fake(_START)
        operator = cairnflow_kit.client(start=False, clock=clock)  # never started
        added = operator.add_schedule(_WORKFLOW, cf.Schedule("added", "0 * * * *"))
        assert added.next_fire_ns == cf.clock.to_ns(datetime(2026, 3, 6, 11, tzinfo=UTC))
        updated = operator.add_schedule(_WORKFLOW, cf.Schedule("added", "15 * * * *"))
        assert (updated.id, updated.cron) == (added.id, "15 * * * *")
        assert updated.next_fire_ns == cf.clock.to_ns(datetime(2026, 3, 6, 10, 15, tzinfo=UTC))
        assert [s.name for s in operator.schedules(_WORKFLOW)] == ["added"]
        # A client of the workflow fires it, though it never declared it.
        worker = cairnflow_kit.client(_workflow("declared"), clock=clock)
        clock.advance(15 * 60)
        (run,) = _wait_runs(worker, "added", 1)
        assert worker.wait(run.ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert operator.remove_schedule(_WORKFLOW, "added") is True
        assert operator.remove_schedule(_WORKFLOW, "added") is False
        assert [s.name for s in operator.schedules(_WORKFLOW)] == ["declared"]

    @proves(Cap.SCHEDULE_HISTORY, requires=[Cap.CRON])
    def test_a_schedules_last_fires_are_read_back_newest_first(self, cairnflow_kit: Kit) -> None:
        clock = Fake(_START)
        client = cairnflow_kit.client(_workflow("history"), clock=clock)
        for minute in range(1, 4):
            clock.advance(60)
            _wait_ticks(client, "history", minute)
        ticks = client.schedule_history(_WORKFLOW, "history", limit=2)
        minute_ns = 60 * 10**9
        third = cf.clock.to_ns(datetime(2026, 3, 6, 10, 3, tzinfo=UTC))
        assert [t.at_ns for t in ticks] == [third, third - minute_ns]
        assert all(t.outcome is TickOutcome.FIRED and t.run is not None for t in ticks)
        for tick in ticks:
            assert tick.run is not None
            assert client.wait(tick.run, timeout=TIMEOUT).labels[_LABEL] == "history"

    @proves(Cap.CRON, requires=[Cap.SCHEDULE_HISTORY, Cap.NODE_IDENTITY])
    def test_a_scheduler_node_fires_and_a_worker_node_runs_the_steps(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        scheduler_store, worker_store = kit.peer_stores(2)
        scheduler = kit.client(
            _workflow("roles"),
            store=scheduler_store,
            clock=clock,
            role="scheduler",
            node_id="kit-scheduler",
        )
        worker = kit.client(
            _workflow("roles"),
            store=worker_store,
            clock=clock,
            role="worker",
            node_id="kit-worker",
        )
        assert scheduler.is_leader  # no election: every client that fires leads
        assert not worker.is_leader
        for minute in range(1, 4):
            clock.advance(60)
            _wait_ticks(worker, "roles", minute)
        ticks = worker.schedule_history(_WORKFLOW, "roles", limit=10)
        assert {t.node for t in ticks} == {"kit-scheduler"}, "a worker-only node fired"
        for tick in ticks:
            assert tick.run is not None
            info = worker.wait(tick.run, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert info.steps["tick"].node == "kit-worker", "a scheduler-only node ran a step"

    @proves(Cap.SCHEDULE_HISTORY, requires=[Cap.CRON])
    def test_old_ticks_are_pruned_and_each_schedules_newest_is_kept(
        self, cairnflow_kit: Kit
    ) -> None:
        # At the SPI, on explicit times: ticks recorded before the cut go, but never a
        # schedule's newest one, whatever its age.
        kit = cairnflow_kit
        store = StoreFacets.of(kit.store).schedules
        assert store is not None
        now = cf.clock.to_ns(_START)
        ids = []
        for name in ("pruned", "quiet"):
            record = ScheduleRecord(
                id=schedule_id(_WORKFLOW, name),
                workflow=_WORKFLOW,
                name=name,
                spec="{}",
                fingerprint="f",
                next_fire=now,
                created_at=now,
                updated_at=now,
            )
            store.save_schedule(record)
            ids.append(record.id)
        pruned, quiet = ids

        def tick(schedule: str, minute: int) -> TickRecord:
            at = now + minute * 60 * _S
            return TickRecord(schedule, at, TickOutcome.SKIPPED, "paused", "kit", at)

        for minute in range(5):
            assert (
                store.fire_ticks(
                    pruned, expected_next=None, next_fire=now, ticks=[tick(pruned, minute)], runs=[]
                )
                == []
            )
        assert (
            store.fire_ticks(
                quiet, expected_next=None, next_fire=now, ticks=[tick(quiet, 0)], runs=[]
            )
            == []
        )
        cut = now + 3 * 60 * _S  # minutes 0, 1, 2 are older
        assert store.prune_ticks(before=cut, limit=100) == 3  # pruned's 0-2; not quiet's only
        assert [t.at for t in store.schedule_history(pruned, 10)] == [
            now + m * 60 * _S for m in (4, 3)
        ]
        assert [t.at for t in store.schedule_history(quiet, 10)] == [now]
        assert store.prune_ticks(before=now + 60 * 60 * _S, limit=100) == 1  # pruned's 3
        assert len(store.schedule_history(pruned, 10)) == 1

    @proves(Cap.LEADER_ELECTION)
    def test_a_leadership_lease_is_held_by_one_node_and_its_term_grows_on_handover(
        self, cairnflow_kit: Kit
    ) -> None:
        # At the SPI, on explicit lease-clock times.
        first, second = (StoreFacets.of(s).leadership for s in cairnflow_kit.peer_stores(2))
        assert first is not None
        assert second is not None
        role, now = "kit-role", cf.clock.to_ns(_START)
        held = first.claim_leadership(role, "kit-a", lease_now=now, lease_until=now + 10 * _S)
        assert (held.node, held.term) == ("kit-a", 1)
        other = second.claim_leadership(
            role, "kit-b", lease_now=now + _S, lease_until=now + 11 * _S
        )
        assert (other.node, other.term) == ("kit-a", 1), "two nodes held one unexpired lease"
        renewed = first.claim_leadership(
            role, "kit-a", lease_now=now + 2 * _S, lease_until=now + 20 * _S
        )
        assert (renewed.node, renewed.term, renewed.lease_until) == ("kit-a", 1, now + 20 * _S)
        taken = second.claim_leadership(
            role, "kit-b", lease_now=now + 21 * _S, lease_until=now + 31 * _S
        )
        assert (taken.node, taken.term) == ("kit-b", 2), "an expired lease was not handed over"
        second.resign_leadership(role, "kit-b")
        back = first.claim_leadership(
            role, "kit-a", lease_now=now + 22 * _S, lease_until=now + 32 * _S
        )
        assert (back.node, back.term) == ("kit-a", 3), "a resigned lease was not free at once"
        assert second.read_leadership(role) == back
        assert second.read_leadership("kit-nobody") is None

    @proves(Cap.LEADER_ELECTION, requires=[Cap.CRON, Cap.TICK_EVENTS])
    def test_only_the_leader_fires_and_a_successor_fires_once_it_is_gone(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake(_START)
        events, heard = _listener()

        lease = 2.0
        stores = kit.peer_stores(2)
        cut = kit.partition(stores[0])
        clients = [
            kit.client(
                _workflow("led"),
                store=store,
                clock=clock,
                on_tick=heard,
                leader_election=True,
                leader_lease=lease,
                node_id=f"kit-leader-{n}",
            )
            for n, store in enumerate([cut, stores[1]])
        ]
        wait_until(
            lambda: sum(c.is_leader for c in clients) == 1, timeout=TIMEOUT, what="one leader"
        )
        leader = next(c for c in clients if c.is_leader)
        clock.advance(60)
        wait_until(lambda: len(events) == 1, timeout=TIMEOUT, what="the first tick")
        assert events[0].node == leader.node_id, "a client that does not lead fired"
        if leader is clients[1]:
            leader.stop()  # a clean stop hands the lease on at once
        else:
            cut.cut()  # the leader is cut off from the store: its lease runs out
        successor = clients[1] if leader is clients[0] else clients[0]
        wait_until(lambda: successor.is_leader, timeout=TIMEOUT, what="a successor")
        wait_until(
            lambda: not leader.is_leader, timeout=TIMEOUT, what="the old leader to step down"
        )
        clock.advance(60)
        wait_until(lambda: len(events) == 2, timeout=TIMEOUT, what="the tick after the handover")
        assert events[1].node == successor.node_id
        assert len({e.at_ns for e in events}) == 2, "a tick was fired twice"

    @_PROCESSES
    @proves(Cap.CRON, Cap.MULTI_PROCESS, requires=[Cap.SCHEDULE_HISTORY, Cap.RUN_QUERY])
    def test_three_processes_fire_each_of_200_ticks_once(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        clock = _fast_clock()
        workers = [
            kit.processes.spawn(f"kit-cron-{n}", schedules=True, clock=clock) for n in range(3)
        ]
        reader = kit.client(start=False)
        fired = _wait_fired(reader, 200, kit)
        for worker in workers:
            worker.stop()
        fired = _fired(reader)
        _assert_every_tick_once(reader, fired)
        assert len({t.node for t in fired}) > 1, "one process fired every tick: no race was run"

    @_PROCESSES
    @proves(
        Cap.LEADER_ELECTION,
        Cap.MULTI_PROCESS,
        requires=[Cap.CRON, Cap.SCHEDULE_HISTORY, Cap.RUN_QUERY],
    )
    def test_a_killed_leader_is_succeeded_and_no_tick_is_lost_or_fired_twice(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = _fast_clock()
        lease = 2.0
        workers = {
            f"kit-led-{n}": kit.processes.spawn(
                f"kit-led-{n}", schedules=True, clock=clock, leader_lease=lease
            )
            for n in range(3)
        }
        reader = kit.client(start=False)
        leadership = StoreFacets.of(kit.store).leadership
        assert leadership is not None
        before = _wait_fired(reader, 40, kit)
        leader = before[-1].node
        assert {t.node for t in before} == {leader}, "a process that does not lead fired"
        term = leadership.read_leadership(LEADER_ROLE)
        assert term is not None
        assert term.node == leader
        workers[leader].kill()  # SIGKILL: no resignation, the lease has to run out
        wait_until(
            lambda: any(t.node != leader for t in _fired(reader)[-5:]),
            timeout=TIMEOUT * 2,
            what=f"a successor of {leader} firing",
        )
        fired = _wait_fired(reader, len(_fired(reader)) + 40, kit)
        successor = leadership.read_leadership(LEADER_ROLE)
        assert successor is not None
        assert successor.node != leader
        assert successor.term > term.term, "the term did not grow on the handover"
        after = [t for t in fired if t.node != leader]
        assert after
        assert {t.node for t in after} <= set(workers) - {leader}
        for worker in workers.values():
            if worker.alive:
                worker.stop()
        _assert_every_tick_once(reader, _fired(reader))


def _listener() -> tuple[list[cf.TickEvent], Callable[[cf.TickEvent], None]]:
    """A list of tick events and the ``on_tick`` that fills it (from any thread)."""
    events: list[cf.TickEvent] = []
    lock = threading.Lock()

    def heard(event: cf.TickEvent) -> None:
        with lock:
            events.append(event)

    return events, heard


def _fast_clock() -> tuple[float, int, int]:
    """A scheduling clock 20 times faster than real time, the same in every process."""
    return (20.0, cf.clock.to_ns(_START), time.time_ns())


def _fired(client: cf.Client) -> list[cf.TickEvent]:
    """The ticker's fired ticks, oldest first."""
    ticks = client.schedule_history(TICKER, TICKER_SCHEDULE, limit=1000)
    return [t for t in reversed(ticks) if t.outcome is TickOutcome.FIRED]


def _wait_fired(client: cf.Client, count: int, kit: Kit) -> list[cf.TickEvent]:
    def enough() -> bool:
        try:
            return len(_fired(client)) >= count
        except cf.ScheduleNotFound:
            return False

    try:
        wait_until(enough, timeout=TIMEOUT * 2, what=f"{count} fired ticks")
    except TimeoutError as error:
        raise AssertionError(f"{error}; worker logs:\n{kit.processes.logs()}") from None
    return _fired(client)


def _assert_every_tick_once(client: cf.Client, fired: list[cf.TickEvent]) -> None:
    """Every second from the first fired tick to the last fired once, with one run each."""
    times = [t.at_ns for t in fired]
    assert len(times) == len(set(times)), "a tick was fired twice"
    expected = list(range(times[0], times[-1] + 1, _S))
    assert times == expected, f"ticks lost: {sorted(set(expected) - set(times))[:5]}"
    runs = client.runs(workflow=TICKER, labels={_LABEL: TICKER_SCHEDULE}, limit=1000).runs
    assert len({r.id for r in runs}) == len(fired), f"{len(runs)} runs for {len(fired)} ticks"
    assert {t.run.id for t in fired if t.run is not None} == {r.id for r in runs}
