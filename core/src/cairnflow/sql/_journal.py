"""The ``Journaling`` facet in SQL: memoised results as rows, the first record of a key kept.

An entry is read and written by its primary key (scope, step, name), so the
journal costs one probe per ``ctx.memo`` that finds its value and a
transaction of three statements per one that records it. A step's record is
fenced by its attempt's lease in the transaction that writes it: the step row
is locked while the lease is still held (``hold_step``), and the entry is
inserted under that lock, so an attempt whose step was reclaimed (or whose run
was cancelled or finished) records nothing, and a reclaim that comes after the
record finds it there for the next attempt. The first record of a key wins:
the primary key refuses a second insert, whose transaction then runs again and
returns the first's value.
"""

from __future__ import annotations

from ._dialect import Cursor
from ._parts import Part, split_token
from ._rows import to_bytes

__all__ = ["Journal"]


class Journal(Part):
    """``read_journal``, ``record_journal``."""

    def read_journal(self, scope: str, step: str, name: str) -> bytes | None:
        """The value recorded under the key; None when nothing is."""
        rows = self._tx.fetch(self._q.read_journal, (scope, step, name))
        return to_bytes(rows[0][0]) if rows else None

    def record_journal(
        self, scope: str, step: str, name: str, value: bytes, *, lease: str | None, now: int
    ) -> bytes | None:
        """Record ``value`` unless the key holds one (fenced by ``lease``); return what it holds."""
        q = self._q
        held = None
        if lease is not None:
            held = split_token(lease)
            if held is None:
                return None

        def work(cur: Cursor) -> bytes | None:
            if held is not None and self._execute(cur, q.hold_step, held).fetchone() is None:
                return None  # the lease is gone: a stale attempt records nothing
            row = self._execute(cur, q.read_journal, (scope, step, name)).fetchone()
            if row is not None:
                return to_bytes(row[0])  # recorded before: the first record wins
            self._execute(cur, q.insert_journal, (scope, step, name, value, now))
            return value

        return self._tx.upsert(work)
