"""The ``Locking`` facet in SQL: a named lock is a row with its holder's token and expiry.

Not a session or advisory lock: those are released with their connection, so a
pooled connection that is dropped would free a lock its holder still means to
hold, and one that lingers would keep a lock past its time. A row is released
only by its token (``release_lock``) or by its expiry, which every taker
compares with its ``now``.

A take locks the name's row (``SELECT ... FOR UPDATE``; SQLite has one
writer) and decides from what it read: no row, an expired lock or the taker's
own goes to the taker; another's unexpired lock is left as it is, nothing
written. The first take of a name finds no row to lock, so two first takers
both insert: the primary key refuses the second, whose take runs again and
meets the first's row, locked like any other. A release deletes the row, so
the table holds the names taken and not yet released, not every name ever
used; an expired row stays until the next take of its name writes over it.
"""

from __future__ import annotations

from ..store import HeldLock
from ._dialect import Cursor
from ._parts import Part
from ._rows import LockRow
from ._transactions import UniqueViolation

__all__ = ["Locks"]


class Locks(Part):
    """``take_lock``, ``extend_lock``, ``release_lock``, ``read_lock``."""

    def take_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Take ``name`` for ``token`` until ``until`` unless another holds it at ``now``."""
        q = self._q

        def work(cur: Cursor) -> bool:
            row = self._execute(cur, q.lock_named, (name,)).fetchone()
            if row is None:
                self._execute(cur, q.insert_named, (name, token, now, until))
                return True
            held = LockRow.from_row(row)
            if held.token != token and held.expires_at > now:
                return False  # another's lock holds: nothing to write
            self._execute(cur, q.take_named, (token, now, until, name))
            return True

        try:
            return self._tx.upsert(work)
        except UniqueViolation:
            # Refused twice: another first taker inserted the row, was released and was
            # taken again between our two tries. The name is held by someone else.
            return False

    def extend_lock(self, name: str, token: str, *, now: int, until: int) -> bool:
        """Move the expiry of ``token``'s unexpired lock of ``name`` to ``until``."""
        return self._tx.change(self._q.extend_named, (until, name, token, now)) == 1

    def release_lock(self, name: str, token: str) -> bool:
        """Delete the row of ``name`` if ``token`` holds it."""
        return self._tx.change(self._q.release_named, (name, token)) == 1

    def read_lock(self, name: str) -> HeldLock | None:
        """The row of ``name`` as it stands (read, not locked)."""
        rows = self._tx.fetch(self._q.read_named, (name,))
        return LockRow.from_row(rows[0]).record() if rows else None
