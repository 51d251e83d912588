"""The ``Lifecycle`` facet in SQL (``Cap.LIFECYCLE``): an outbox of events, leased to clients.

The rows are written by the database itself, as the step history's are: each
driver's migration puts triggers on the steps' ``status`` and the runs'
``state`` that insert an event row in the transaction of the ``UPDATE`` that
makes the transition, so a fenced write that changes no row writes no event,
and a transition adds no statement of the engine. The triggers write only
while a row of ``lifecycle_subs`` wants the events of the run's workflow (a
client that subscribes records one when it starts): a store nobody subscribed
to pays one lookup of an empty table per transition and writes nothing. Where
the dialect switches them (:attr:`Dialect.switches_lifecycle`, SQLite), the
triggers exist only while a subscription of their channel does: created in the
transaction that records the first, dropped in the one that removes the last,
and made to match after every ``migrate``, so such a store pays nothing.

Nothing reads the outbox by a cursor over its ids: ids are not given in commit
order on Postgres or MySQL, so a reader that followed them could pass a row
committed late. A client leases rows instead (``claim_lifecycle``: the free
rows of its channel, locked with ``FOR UPDATE SKIP LOCKED`` where the engine
has it, under SQLite's single writer otherwise), hands them to its callbacks
and deletes them with its lease token (``ack_lifecycle``): a row leaves the
table only when a client finished with it, and a row a dead client held is
free again after its lease.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from .._models import LifecycleEvent, LifecycleSubscription
from . import _statements as s
from ._dialect import Cursor
from ._parts import Context, Part, chunks
from ._rows import to_error, to_text

__all__ = ["LifecycleOutbox"]

LIFECYCLE_COLUMNS = "id, kind, run_id, workflow, step, attempt, node, at, error, deliveries"

FIND_SUBSCRIPTION = "SELECT 1 FROM {lifecycle_subs} WHERE channel = ? AND workflow = ?"
INSERT_SUBSCRIPTION = """
            INSERT INTO {lifecycle_subs} (channel, workflow, since) VALUES (?, ?, ?)"""
DELETE_SUBSCRIPTION = "DELETE FROM {lifecycle_subs} WHERE channel = ? AND workflow = ?"
SUBSCRIPTIONS = """
            SELECT s.channel, s.workflow, s.since, COUNT(l.id), MIN(l.at)
            FROM {lifecycle_subs} s
            LEFT JOIN {lifecycle} l
                ON l.channel = s.channel AND (s.workflow = '' OR l.workflow = s.workflow)
            GROUP BY s.channel, s.workflow, s.since
            ORDER BY s.channel, s.workflow"""
"""Every subscription with the rows it covers (an operator's read: it counts them, through
the channel's index, so its cost grows with the backlog it reports)."""
SUBSCRIBED_CHANNELS = "SELECT DISTINCT channel FROM {lifecycle_subs}"
"""The channels with a subscription: which lifecycle triggers a switching dialect keeps."""
DELETE_CHANNEL_EVENTS = """
            DELETE FROM {lifecycle} WHERE channel = ? AND workflow = ?
            AND NOT EXISTS (SELECT 1 FROM {lifecycle_subs} WHERE channel = ? AND workflow = '')"""
"""A dropped subscription's rows, unless the channel's subscription to every workflow wants them."""
DELETE_CHANNEL_ALL_EVENTS = """
            DELETE FROM {lifecycle} WHERE channel = ?
            AND workflow NOT IN (SELECT workflow FROM {lifecycle_subs} WHERE channel = ?)"""
"""The rows of a dropped subscription to every workflow, but those a workflow's own still wants."""
FREE_EVENTS = """
            SELECT id FROM {lifecycle}
            WHERE channel = ? AND (lease_until IS NULL OR lease_until < ?){workflows}
            ORDER BY id LIMIT ?{skip_locked}"""
"""The oldest rows of a channel no lease holds now (locked, skipping those another claim has)."""
LEASE_EVENTS = """
            UPDATE {lifecycle} SET token = ?, lease_until = ?, deliveries = deliveries + 1
            WHERE id IN ({ids})"""
READ_EVENTS = f"SELECT {LIFECYCLE_COLUMNS} FROM {{lifecycle}} WHERE id IN ({{ids}}) ORDER BY id"
RENEW_EVENTS = "UPDATE {lifecycle} SET lease_until = ? WHERE token = ? AND id IN ({ids})"
HELD_EVENTS = "SELECT id FROM {lifecycle} WHERE token = ? AND id IN ({ids})"
RELEASE_EVENT = """
            UPDATE {lifecycle} SET token = NULL, lease_until = ? WHERE id = ? AND token = ?"""
ACK_EVENTS = "DELETE FROM {lifecycle} WHERE token = ? AND id IN ({ids})"


class SubscriptionRow(NamedTuple):
    """One row of ``SUBSCRIPTIONS``."""

    channel: str
    workflow: str
    since: int
    backlog: int
    oldest: int | None

    def record(self) -> LifecycleSubscription:
        """The subscription as the facet returns it."""
        return LifecycleSubscription(
            channel=to_text(self.channel),
            workflow=to_text(self.workflow),
            since_ns=int(self.since),
            backlog=int(self.backlog),
            oldest_ns=None if self.oldest is None else int(self.oldest),
        )


class LifecycleRow(NamedTuple):
    """One row of ``READ_EVENTS``."""

    id: int
    kind: str
    run_id: str
    workflow: str
    step: str | None
    attempt: int
    node: str | None
    at: int
    error: Any
    deliveries: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LifecycleRow:
        """Convert a ``READ_EVENTS`` row."""
        return cls(*row)

    def record(self) -> LifecycleEvent:
        """The event as the facet returns it."""
        return LifecycleEvent(
            id=int(self.id),
            kind=to_text(self.kind),
            run_id=to_text(self.run_id),
            workflow=to_text(self.workflow),
            step=None if self.step is None else to_text(self.step),
            attempt=int(self.attempt),
            node=None if self.node is None else to_text(self.node),
            at_ns=int(self.at),
            error=to_error(self.error),
            deliveries=int(self.deliveries),
        )


def _marks(values: Collection[Any]) -> str:
    return ", ".join(["?"] * len(values))


class LifecycleOutbox(Part):
    """The ``Lifecycle`` facet's operations; statements rendered for the store's namespace."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        values = context.tables.template()
        self._find = s.render(FIND_SUBSCRIPTION, values)
        self._subscribe = s.render(INSERT_SUBSCRIPTION, values)
        self._unsubscribe = s.render(DELETE_SUBSCRIPTION, values)
        self._channels = s.render(SUBSCRIBED_CHANNELS, values)
        self._subscriptions = s.render(SUBSCRIPTIONS, values)
        self._tables = values
        self._drop_events = s.render(DELETE_CHANNEL_EVENTS, values)
        self._drop_all_events = s.render(DELETE_CHANNEL_ALL_EVENTS, values)
        self._free = s.render(FREE_EVENTS, values | {"skip_locked": context.dialect.skip_locked})
        self._lease = s.render(LEASE_EVENTS, values)
        self._read = s.render(READ_EVENTS, values)
        self._renew = s.render(RENEW_EVENTS, values)
        self._held = s.render(HELD_EVENTS, values)
        self._release = s.render(RELEASE_EVENT, values)
        self._ack = s.render(ACK_EVENTS, values)

    def subscribe_lifecycle(self, channel: str, workflow: str, now: int) -> None:
        """Record a subscription of ``channel`` to ``workflow`` (idempotent)."""

        def work(cur: Cursor) -> None:
            if not self._execute(cur, self._find, (channel, workflow)).fetchall():
                self._execute(cur, self._subscribe, (channel, workflow, now))
            # Also for a subscription found: its triggers may have been dropped by a
            # migration applied by hand (migration_scripts), without migrate's switch.
            self._switch(cur)

        self._tx.upsert(work)

    def unsubscribe_lifecycle(self, channel: str, workflow: str) -> int | None:
        """Drop a subscription and its undelivered rows no other subscription covers; how many
        rows went (None: no such subscription, nothing changed)."""

        def work(cur: Cursor) -> int | None:
            if not self._execute(cur, self._unsubscribe, (channel, workflow)).rowcount:
                return None
            self._switch(cur)
            if workflow == "":
                dropped = self._execute(cur, self._drop_all_events, (channel, channel))
            else:
                dropped = self._execute(cur, self._drop_events, (channel, workflow, channel))
            return int(dropped.rowcount)

        return self._tx.run(work)

    def lifecycle_subscriptions(self) -> list[LifecycleSubscription]:
        """Every subscription, by channel then workflow, with the backlog each covers."""

        def work(cur: Cursor) -> list[LifecycleSubscription]:
            rows = self._execute(cur, self._subscriptions).fetchall()
            return [SubscriptionRow(*row).record() for row in rows]

        return self._tx.read(work)

    def switch_lifecycle(self) -> None:
        """Make a switching dialect's triggers match the subscriptions (after ``migrate``:
        a migration that created or dropped them knew nothing of the subscriptions)."""
        if self._dialect.switches_lifecycle:
            self._tx.run(self._switch)

    def _switch(self, cur: Cursor) -> None:
        """:meth:`Dialect.switch_lifecycle` in the transaction open on ``cur``, which just
        changed the subscriptions (nothing where the triggers are permanent)."""
        dialect = self._dialect
        if dialect.switches_lifecycle:
            rows = self._execute(cur, self._channels).fetchall()
            dialect.switch_lifecycle(cur, self._tables, {to_text(row[0]) for row in rows})

    def claim_lifecycle(
        self,
        channel: str,
        workflows: Collection[str] | None,
        *,
        token: str,
        lease_until: int,
        now: int,
        limit: int,
    ) -> list[LifecycleEvent]:
        """Lease up to ``limit`` free rows of ``channel``, oldest first."""
        names = sorted(set(workflows)) if workflows is not None else None
        if names == []:
            return []
        where = "" if names is None else f" AND workflow IN ({_marks(names)})"
        free = self._free.format(workflows=where)
        params: tuple[Any, ...] = (channel, now, *(names or ()), limit)

        def work(cur: Cursor) -> list[LifecycleEvent]:
            ids = [int(i) for (i,) in self._execute(cur, free, params).fetchall()]
            if not ids:
                return []
            marks = _marks(ids)
            self._execute(cur, self._lease.format(ids=marks), (token, lease_until, *ids))
            rows = self._execute(cur, self._read.format(ids=marks), tuple(ids)).fetchall()
            return [LifecycleRow.from_row(row).record() for row in rows]

        return self._tx.run(work)

    def renew_lifecycle(self, ids: Collection[int], token: str, lease_until: int) -> list[int]:
        """Extend the leases ``token`` still holds among ``ids``; return their ids."""
        held: list[int] = []
        for chunk in chunks(sorted(ids)):
            marks = _marks(chunk)

            def work(cur: Cursor, chunk: Sequence[int] = chunk, marks: str = marks) -> list[int]:
                self._execute(cur, self._renew.format(ids=marks), (lease_until, token, *chunk))
                rows = self._execute(cur, self._held.format(ids=marks), (token, *chunk))
                return [int(i) for (i,) in rows.fetchall()]

            held += self._tx.run(work)
        return held

    def release_lifecycle(self, event_id: int, token: str, due_at: int) -> bool:
        """Hand a held row back, claimable again from ``due_at``."""
        return self._tx.change(self._release, (due_at, event_id, token)) == 1

    def ack_lifecycle(self, ids: Collection[int], token: str) -> int:
        """Delete the rows among ``ids`` that ``token`` still holds; how many went."""
        gone = 0
        for chunk in chunks(sorted(ids)):
            gone += self._tx.change(self._ack.format(ids=_marks(chunk)), (token, *chunk))
        return gone
