"""Concurrency keys and fifo keys in SQL: a counter per key, changed under its lock.

``Cap.CONCURRENCY_KEY``: at most ``limit`` attempts per key run at once across
every client. Keys are many and short-lived, so unlike a queue's global limit
(:mod:`._limiters`, a count recomputed under the queue's lock) each key keeps
its count in its row of ``limits`` (``kind = 'key'``, docs/claim.md, 4):

- **+1** for every step a claim leases, in the claim's transaction, under the
  key row's lock (:meth:`Keys.admit`);
- **-1** for every lease a write ends (an outcome, a hand back, a reclaim, a
  cancel), in that write's transaction and only when its fenced ``UPDATE``
  changed the step (its row count, or a lock held on the step): never beside
  the change, so a count moves exactly once per lease (:meth:`Keys.release`).

A count that drifted would hold its key forever, which is why every path that
ends a lease collects its releases here and nowhere else; the kit proves it
with a worker killed (SIGKILL) while holding a key.

``Cap.KEY_FIFO``: a fifo run keeps its key in ``runs.fifo_key`` until it ends
(cleared with the idempotency key). Its key's row records the run whose turn it
is (``head``): admission checks it is still unfinished, else takes the key's
oldest unfinished run (one probe of the runs' fifo index) and records it. Only
the head's steps are admitted, so runs sharing the key start in enqueue order,
one after the other.

Lock order. A key row is always the last lock a transaction takes: after run
rows, step rows and queue limiters; and key rows are locked in name order, all
at once (on Postgres, by the statement that reads a one-queue claim's candidates,
READY_KEYED_WITH_KEYS, or by LOCK_KEYS_ARRAY; one statement for all, in name
order, elsewhere). On Postgres a claim of one queue without a rate limit is one
statement that carries :meth:`Keys.admit`'s rules in SQL, locks included, in the
same order (CLAIM_KEYED); :meth:`Keys.admit` is its reference. An outcome batch that
also claims hands its releases to the claim, which locks the union of both in
name order: two committers never wait on each other's keys crosswise.

Key rows are created at enqueue, in the enqueue's transaction, by an insert
that leaves an existing row alone (:attr:`Dialect.keep_existing`); a claim that
finds a row missing (deleted by hand) leaves that key's candidates unclaimed
and creates the row for the next claim.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ._dialect import Cursor
from ._parts import Part
from ._rows import KeyCandidate, KeyRow, to_text

__all__ = ["Keys"]


class Keys(Part):
    """The counters of concurrency keys: created at enqueue, moved by claims and lease ends."""

    def create(self, cur: Cursor, keys: Iterable[tuple[str, bool]]) -> None:
        """Make sure each key ``(name, fifo)`` has its row (in the enqueue's transaction)."""
        rows = sorted(dict(keys).items())
        if rows:
            self._tx.execute_many(cur, self._q.insert_key, [(n, int(f)) for n, f in rows])

    def release(self, cur: Cursor, released: Mapping[str, int]) -> None:
        """Take ``released[key]`` attempts off each key's count, in name order."""
        self._move(cur, [(-count, name) for name, count in sorted(released.items()) if count])

    def _move(self, cur: Cursor, moves: Sequence[tuple[int, str]]) -> None:
        """Add each ``(count, name)``'s count to its key (in the order given: name order).

        One statement for every key: with the names and counts as arrays where
        the engine takes them (MOVE_KEYS_ARRAY, Postgres: sent with the claim's
        lease, not read), else MOVE_KEYS (PyMySQL would send an ``UPDATE`` per
        row of an ``executemany``); one ``executemany`` where the engine
        pipelines without arrays.
        """
        if not moves:
            return
        if self._dialect.key_arrays and len(moves) > 1:
            arrays = ([name for _, name in moves], [count for count, _ in moves])
            self._execute(cur, self._q.move_keys_array, arrays)
        elif self._dialect.pipelines or len(moves) == 1:
            self._tx.execute_many(cur, self._q.move_key, moves)
        else:
            self._execute(cur, *self._q.move_keys(moves))

    def _lock(self, cur: Cursor, names: Sequence[str]) -> dict[str, KeyRow]:
        """Lock the rows of the keys ``names`` (ascending), read them; a missing one is absent.

        Where the engine takes the names as an array (Postgres), one statement
        joining them to the key rows (LOCK_KEYS_ARRAY); where it pipelines, one
        primary-key lookup per key, all sent together (one round trip; see
        LOCK_KEY); elsewhere one statement for every key (LOCK_KEYS).
        """
        q = self._q
        if self._dialect.key_arrays:
            found = list(self._execute(cur, q.lock_keys_array, (list(names),)).fetchall())
        elif self._dialect.pipelines:
            with self._dialect.pipeline(cur) as cursors:
                sent = [self._execute(cursors(), q.lock_key, (name,)) for name in names]
                found = [result.fetchone() for result in sent]
        else:
            found = list(self._execute(cur, *q.lock_keys(names)).fetchall())
        rows = [KeyRow.from_row(row) for row in found if row is not None]
        return {row.name: row for row in rows}

    def admit(
        self,
        cur: Cursor,
        candidates: Sequence[KeyCandidate],
        released: Mapping[str, int],
        *,
        limit: int,
        locked: Mapping[str, KeyRow] | None = None,
    ) -> set[str]:
        """Lock the keys of ``candidates`` and ``released`` (name order); the ids to lease.

        At most ``limit`` candidates are admitted, in their order. A candidate
        without a key is admitted. One with a key is admitted while
        its key's count (less what ``released`` gives back) is under the
        candidate's limit, and, for a fifo key, only if its run holds the key's
        turn. Each key's count is moved by what was admitted less what was
        released, in the same statement. The caller leases exactly the ids
        returned, in this transaction. ``locked``: the keys' rows, when the
        caller read and locked them with the candidates (READY_KEYED_WITH_KEYS,
        the same name order); they are not locked again.
        """
        names = sorted({c.key for c in candidates if c.key is not None} | set(released))
        if not names:
            return {c.id for c in candidates[:limit]}
        rows = dict(locked) if locked is not None else self._lock(cur, names)  # name order
        missing = [
            name for name in names if name not in rows and any(c.key == name for c in candidates)
        ]
        if missing:  # deleted by hand: left unclaimed now, there for the next claim
            self.create(cur, ((name, False) for name in missing))
        heads = {name: self._head(cur, row) for name, row in rows.items() if row.fifo}
        taken: Counter[str] = Counter()
        admitted: set[str] = set()
        for candidate in candidates:
            if len(admitted) >= limit:
                break
            key = candidate.key
            if key is None:
                admitted.add(candidate.id)
                continue
            row = rows.get(key)
            if row is None:
                continue
            if row.fifo and heads.get(key) != candidate.run_id:
                continue
            if row.running - released.get(key, 0) + taken[key] >= candidate.limit:
                continue
            taken[key] += 1
            admitted.add(candidate.id)
        # Only rows that were there to lock move: a row created just now (its key's row was
        # deleted by hand) starts from nothing, and the attempts counted in the deleted row
        # are not taken off the new one.
        moves = [
            (taken[name] - released.get(name, 0), name)
            for name in names
            if name in rows and taken[name] != released.get(name, 0)
        ]
        self._move(cur, moves)
        return admitted

    def _head(self, cur: Cursor, row: KeyRow) -> str | None:
        """The run whose turn it is on the fifo key ``row`` (locked); recorded if it moved."""
        q = self._q
        head_sql = q.head_unfinished
        if row.head is not None and self._execute(cur, head_sql, (row.head, row.name)).fetchone():
            return row.head
        found = self._execute(cur, q.fifo_head, (row.name,)).fetchone()
        head = None if found is None else to_text(found[0])
        if head != row.head:
            self._execute(cur, q.set_head, (head, row.name))
        return head
