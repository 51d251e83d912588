"""The ``Schedules`` and ``Leadership`` facets of ``memory://``: schedules, their ticks and
leadership leases in dictionaries.

A part of :class:`~cairnflow.store.MemoryStore` kept in its own module (the
store's run and step transitions fill one already). It shares the store's
lock, so firing a tick, creating its run and moving the stored next fire are
one atomic step, as they are one transaction in a SQL store.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Sequence

from ._records import ACTIVE, Leader, NewRun, ScheduleRecord, TickOutcome, TickRecord

__all__ = ["MemorySchedules"]


class MemorySchedules:
    """Schedules and ticks kept by a memory store (mixed into :class:`MemoryStore`)."""

    _lock: threading.RLock

    def __init__(self) -> None:
        super().__init__()  # the store's other facets (MemoryPauses)
        self._schedules: dict[str, ScheduleRecord] = {}
        self._ticks: dict[str, dict[int, TickRecord]] = {}
        self._leaders: dict[str, Leader] = {}

    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:  # the store's
        raise NotImplementedError

    def _run_state(self, run_id: str) -> str | None:  # the store's
        raise NotImplementedError

    def save_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """Insert, or update keeping the next fire of an unchanged fingerprint."""
        with self._lock:
            stored = self._schedules.get(record.id)
            if stored is not None:
                changed = stored.fingerprint != record.fingerprint
                record = dataclasses.replace(
                    stored,
                    spec=record.spec,
                    fingerprint=record.fingerprint,
                    next_fire=record.next_fire if changed else stored.next_fire,
                    updated_at=record.updated_at,
                )
            self._schedules[record.id] = record
            self._ticks.setdefault(record.id, {})
            return self._read(record)

    def remove_schedule(self, schedule_id: str) -> bool:
        """Forget a schedule and its ticks."""
        with self._lock:
            self._ticks.pop(schedule_id, None)
            return self._schedules.pop(schedule_id, None) is not None

    def list_schedules(self, workflows: Collection[str] | None = None) -> list[ScheduleRecord]:
        """Every schedule (of ``workflows``), by workflow and name."""
        with self._lock:
            found = [
                self._read(s)
                for s in self._schedules.values()
                if workflows is None or s.workflow in workflows
            ]
        return sorted(found, key=lambda s: (s.workflow, s.name))

    def due_schedules(
        self, *, now: int, workflows: Collection[str], limit: int
    ) -> list[ScheduleRecord]:
        """Schedules due at ``now``, earliest first."""
        with self._lock:
            due = [
                s
                for s in self._schedules.values()
                if s.workflow in workflows and s.next_fire <= now
            ]
            due.sort(key=lambda s: (s.next_fire, s.id))
            return [self._read(s) for s in due[:limit]]

    def fire_ticks(
        self,
        schedule_id: str,
        *,
        expected_next: int | None,
        next_fire: int,
        ticks: Sequence[TickRecord],
        runs: Sequence[NewRun],
    ) -> list[str] | None:
        """Compare and swap the next fire, record the ticks, create the runs: all or nothing."""
        with self._lock:
            stored = self._schedules.get(schedule_id)
            if stored is None:
                return None
            if expected_next is not None and stored.next_fire != expected_next:
                return None
            recorded = self._ticks[schedule_id]
            if any(tick.at in recorded for tick in ticks):
                return None
            run_ids = self.create_runs(runs)
            fired = iter(run_ids)
            last_fire, last_run = stored.last_fire, stored.last_run_id
            for tick in ticks:
                kept = tick
                if tick.outcome is TickOutcome.FIRED:
                    run_id = next(fired)
                    kept = dataclasses.replace(tick, run_id=run_id)
                    if last_fire is None or tick.at >= last_fire:
                        last_fire, last_run = tick.at, run_id
                recorded[tick.at] = kept
            self._schedules[schedule_id] = dataclasses.replace(
                stored,
                next_fire=stored.next_fire if expected_next is None else next_fire,
                last_fire=last_fire,
                last_run_id=last_run,
            )
            return run_ids

    def set_schedule_paused(self, schedule_id: str, paused: bool, now: int) -> bool:
        """Pause, or resume from ``now``."""
        with self._lock:
            stored = self._schedules.get(schedule_id)
            if stored is None:
                return False
            resumed_at = stored.resumed_at if paused else now
            self._schedules[schedule_id] = dataclasses.replace(
                stored, paused=paused, resumed_at=resumed_at, updated_at=now
            )
            return True

    def schedule_history(self, schedule_id: str, limit: int) -> list[TickRecord]:
        """The last ``limit`` ticks, newest first."""
        with self._lock:
            ticks = list(self._ticks.get(schedule_id, {}).values())
        ticks.sort(key=lambda t: (t.at, t.recorded_at), reverse=True)
        return ticks[:limit]

    def prune_ticks(self, *, before: int, limit: int) -> int:
        """Delete old tick rows, keeping each schedule's newest."""
        pruned = 0
        with self._lock:
            for recorded in self._ticks.values():
                if not recorded:
                    continue
                newest = max(recorded)
                for at in sorted(recorded):
                    if pruned >= limit:
                        return pruned
                    if at != newest and recorded[at].recorded_at < before:
                        del recorded[at]
                        pruned += 1
        return pruned

    def _read(self, record: ScheduleRecord) -> ScheduleRecord:
        """``record`` with whether its last run is finished (lock held)."""
        if record.last_run_id is None:
            return record
        finished = self._run_state(record.last_run_id) != ACTIVE
        return dataclasses.replace(record, last_run_finished=finished)

    # -- the leadership facet ----------------------------------------------------------------
    def claim_leadership(self, role: str, node: str, *, lease_now: int, lease_until: int) -> Leader:
        """Extend ``node``'s lease, or take an expired one with the term grown by one."""
        with self._lock:
            held = self._leaders.get(role)
            if held is not None and held.node != node and held.lease_until >= lease_now:
                return held
            if held is None:
                term = 1
            elif held.node == node and held.lease_until >= lease_now:
                term = held.term
            else:
                term = held.term + 1
            self._leaders[role] = Leader(role, node, term, lease_until)
            return self._leaders[role]

    def read_leadership(self, role: str) -> Leader | None:
        """The lease of ``role`` as it stands."""
        with self._lock:
            return self._leaders.get(role)

    def resign_leadership(self, role: str, node: str) -> None:
        """End ``node``'s lease now, if it holds it."""
        with self._lock:
            held = self._leaders.get(role)
            if held is not None and held.node == node:
                self._leaders[role] = dataclasses.replace(held, lease_until=0)
