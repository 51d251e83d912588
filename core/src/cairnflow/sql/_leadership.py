"""The ``Leadership`` facet in SQL: one lease row per role, claimed in one transaction.

Two nodes never both hold an unexpired lease of a role because every claim of
the role reads its row locked (``SELECT ... FOR UPDATE``; SQLite has one
writer) and decides from what it read: the holder renews, an expired or
resigned lease goes to the caller with its term grown by one, and an unexpired
lease of another node is returned as it is, nothing written. The decision is
:func:`_decide`, the rule of the memory store's claim; the SQL around it only
locks, reads and writes.

The first claim of a role finds no row to lock, so two first claimers both
insert: the primary key refuses the second, whose claim then runs again and
meets the first's row, locked like any other. Once more is enough, since no
statement ever deletes a lease row (a resignation sets its lease to 0).
"""

from __future__ import annotations

from ..store import Leader
from ._dialect import Cursor
from ._parts import Part
from ._rows import LeaderRow

__all__ = ["Leadership"]


class Leadership(Part):
    """``claim_leadership``, ``read_leadership``, ``resign_leadership``."""

    def claim_leadership(self, role: str, node: str, *, lease_now: int, lease_until: int) -> Leader:
        """Take or extend the lease of ``role`` for ``node``; return who holds it now."""
        q = self._q

        def work(cur: Cursor) -> Leader:
            row = self._execute(cur, q.lock_leader, (role,)).fetchone()
            held = None if row is None else LeaderRow.from_row(row).record()
            leader = _decide(held, role, node, lease_now=lease_now, lease_until=lease_until)
            if leader is held:
                return leader  # another node's lease still holds: nothing to write
            if held is None:
                self._execute(cur, q.insert_leader, (role, node, leader.term, lease_until))
            else:
                self._execute(cur, q.hold_leader, (node, leader.term, lease_until, role))
            return leader

        return self._tx.upsert(work)  # a first claimer that loses the insert claims again

    def read_leadership(self, role: str) -> Leader | None:
        """The lease of ``role`` as it stands (read, not locked)."""
        rows = self._tx.fetch(self._q.read_leader, (role,))
        return LeaderRow.from_row(rows[0]).record() if rows else None

    def resign_leadership(self, role: str, node: str) -> None:
        """End ``node``'s lease of ``role`` now (a lease of 0), if it holds it."""
        self._tx.change(self._q.resign_leader, (role, node))


def _decide(
    held: Leader | None, role: str, node: str, *, lease_now: int, lease_until: int
) -> Leader:
    """Who holds ``role`` after ``node``'s claim: ``held`` itself when it stays another's."""
    if held is not None and held.node != node and held.lease_until >= lease_now:
        return held
    if held is None:
        term = 1
    elif held.node == node and held.lease_until >= lease_now:
        term = held.term  # a renewal
    else:
        term = held.term + 1  # expired or resigned: a handover, even back to the same node
    return Leader(role, node, term, lease_until)
