"""Leases: renewing them, writing through them, giving them back, and taking them back.

An attempt's lease is its token, ``<step id>:<secret>``; every write of the
attempt is ``... WHERE id = ? AND lease_token = ? AND status = 'running'``, so a
write by a worker whose lease was lost (expired and reclaimed, or the run
cancelled) changes nothing. When a fenced write misses, :meth:`Leases.state`
says why: the lease is lost, or the step was cancelled under it.

Expired leases are requeued one small transaction per step, each guarded like
any fenced write (by the lease it had, still expired), so a reclaimer never
takes a step from a worker that renewed in time, and never locks more than one
step at once.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

from ..store import AttemptState, ExpiredAttempt, ReclaimResult, RenewResult
from ._dialect import Cursor
from ._keys import Keys
from ._parts import Context, Part, chunks, split_token, token
from ._rows import ExpiredStep, LeaseState, StepLease, to_text

__all__ = ["Leases"]


class Leases(Part):
    """``renew``, ``heartbeat``, ``record_progress``, ``hand_back``, ``reclaim_expired``.

    A hand back and a reclaim end leases: each releases the concurrency key of
    every lease its fenced write ended, in the same transaction (:mod:`._keys`).
    """

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._keys = Keys(context)

    def renew(self, tokens: Collection[str], lease_until: int) -> RenewResult:
        """Extend the leases still held; report the lost and the cancelled."""
        lost: set[str] = set()
        cancelled: set[str] = set()
        held: list[tuple[str, str]] = []
        for lease in tokens:
            parsed = split_token(lease)
            if parsed is None:
                lost.add(lease)
            else:
                held.append(parsed)
        q = self._q
        for chunk in chunks(held):

            def work(cur: Cursor, chunk: Sequence[tuple[str, str]] = chunk) -> None:
                if self._execute(cur, *q.renew(lease_until, chunk)).rowcount == len(chunk):
                    return
                sql, params = q.lease_states([step_id for step_id, _ in chunk])
                states = {
                    row.id: row
                    for row in map(StepLease.from_row, self._execute(cur, sql, params).fetchall())
                }
                for step_id, secret in chunk:
                    row = states.get(step_id)
                    if row is not None and row.lease_token == secret:
                        if row.status == "running":
                            continue
                        if row.status == "cancelled":
                            cancelled.add(token(step_id, secret))
                            continue
                    lost.add(token(step_id, secret))

            self._tx.run(work)
        return RenewResult(frozenset(lost), frozenset(cancelled))

    def state(self, cur: Cursor, step_id: str, secret: str) -> AttemptState:
        """Why a fenced write of the attempt changed nothing (inside its transaction)."""
        row = self._execute(cur, self._q.lease_state, (step_id,)).fetchone()
        if row is not None:
            lease = LeaseState.from_row(row)
            if lease.lease_token == secret:
                if lease.status == "running":
                    return AttemptState.HELD
                if lease.status == "cancelled":
                    return AttemptState.CANCELLED
        return AttemptState.LOST

    def _fenced(self, lease: str, sql: str, values: Sequence[Any]) -> AttemptState:
        parsed = split_token(lease)
        if parsed is None:
            return AttemptState.LOST
        step_id, secret = parsed

        def work(cur: Cursor) -> AttemptState:
            if self._execute(cur, sql, (*values, step_id, secret)).rowcount == 1:
                return AttemptState.HELD
            return self.state(cur, step_id, secret)

        return self._tx.run(work)

    def heartbeat(self, lease: str, lease_until: int, now: int) -> AttemptState:
        """Renew one lease and record the heartbeat (fenced)."""
        return self._fenced(lease, self._q.heartbeat, (lease_until, now))

    def record_progress(self, lease: str, progress: bytes, now: int) -> AttemptState:
        """Store the step's progress (fenced)."""
        return self._fenced(lease, self._q.progress, (progress, now))

    def hand_back(self, tokens: Collection[str], now: int) -> int:
        """Make held attempts ready again at once (fenced)."""
        held = [p for p in (split_token(t) for t in tokens) if p is not None]
        q = self._q

        def work(cur: Cursor, chunk: Sequence[tuple[str, str]]) -> int:
            # A keyed attempt is handed back by its own fenced statement: its row count
            # says whether this transaction ended the lease, and so releases its key.
            sql, params = q.keyed_steps([step_id for step_id, _ in chunk])
            keyed = {
                to_text(step_id): to_text(key)
                for step_id, key in self._execute(cur, sql, params).fetchall()
            }
            count = 0
            released: Counter[str] = Counter()
            for step_id, secret in chunk:
                if step_id not in keyed:
                    continue
                if self._execute(cur, q.hand_back_one, (now, step_id, secret)).rowcount == 1:
                    count += 1
                    released[keyed[step_id]] += 1
            rest = [(step_id, secret) for step_id, secret in chunk if step_id not in keyed]
            if rest:
                count += int(self._execute(cur, *q.hand_back(now, rest)).rowcount)
            self._keys.release(cur, released)
            return count

        count = 0
        for chunk in chunks(held):
            count += self._tx.run(functools.partial(work, chunk=chunk))
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
        """Requeue expired attempts (guarded like any fenced write); return the abandoned."""
        if not workflows or limit <= 0:
            return ReclaimResult()
        q = self._q
        rows = self._tx.fetch(*q.expired(lease_now, sorted(workflows), limit))
        requeued = 0
        abandoned: list[ExpiredAttempt] = []
        for step in map(ExpiredStep.from_row, rows):
            if step.lease_token is None:
                continue
            if step.reclaims >= max_reclaims:
                abandoned.append(
                    ExpiredAttempt(
                        token=token(step.id, step.lease_token),
                        run_id=step.run_id,
                        workflow=step.workflow,
                        step=step.name,
                        attempt=step.attempt,
                        failures=step.failures,
                        reclaims=step.reclaims,
                    )
                )
                continue
            values = (now, step.id, step.lease_token, lease_now)
            if step.key is None:
                requeued += self._tx.change(q.requeue_expired, values)
                continue

            def requeue(cur: Cursor, values: tuple[Any, ...] = values, key: str = step.key) -> int:
                # The key is released only if this requeue ended the lease (joined to it).
                if self._execute(cur, q.requeue_expired, values).rowcount != 1:
                    return 0
                self._keys.release(cur, {key: 1})
                return 1

            requeued += self._tx.run(requeue)
        return ReclaimResult(requeued, tuple(abandoned))
