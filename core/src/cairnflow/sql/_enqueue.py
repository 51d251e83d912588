"""Creating runs: every run of an enqueue with its steps, in one transaction, or none.

The rows are built in Python first (JSON, statuses; the ids are the client's,
given with the runs), then written with one statement per table whatever the
number of runs (:meth:`Dialect.batch_insert`; one per table per chunk of runs
where the engine pipelines, :attr:`Dialect.batch_chunk`, so the server writes a
chunk while the client encodes the next). An idempotency key is guarded by a
unique index on the runs' ``active_key`` (cleared when a run ends), not by a read before the write:
two enqueues racing on one key cannot both pass, and the loser learns who won
from :meth:`Enqueue.duplicate`.

A write refused by a unique index may also be the client's retry of a write
whose COMMIT outcome it never learned (the connection died during it): the
runs' own ids are in the way, or a key their earlier attempt holds. Only then,
after the refusal, :meth:`Enqueue.landed` reads which of the ids exist: all of
them is the earlier attempt, landed, and its ids are returned with nothing
written. The write itself never reads first.

In the application's transaction (``create_runs_in``, ``Cap.TRANSACTIONAL_ENQUEUE``)
the same inserts run on the application's connection, which the dialect checks
first (:meth:`Dialect.application_connection`), inside a savepoint
(:meth:`Dialect.savepoint`), so a refused key leaves the application's
transaction usable; nothing there is committed here, and nothing is retried
(the client never sends those runs twice). A store with a notifier
asks the dialect to queue its wake-up in that transaction
(:meth:`Dialect.notify_in_transaction`), so it is sent at commit, never before.

The store's own enqueue does the same with the first wake-up of a quiet spell
when its notifier is an :class:`~cairnflow.notify.InlineNotifier` (Postgres's):
the ``pg_notify`` goes in the one statement of a one-run enqueue, or in the
pipeline of a batch, so the listeners wake at the commit that makes the runs
visible instead of one round trip after it; the client's hint that follows is
then covered (:meth:`InlineNotifier.sent_inline`). Later hints inside the
notifier's debounce window are coalesced, and the first enqueue after the window
carries them (Postgres's notifier: ``cairnflow_postgres._notify``).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from .._errors import CairnError, DuplicateRun, PayloadTooLarge
from .._models import StepKind
from ..notify import InlineNotifier
from ..store import NewRun, NewStep, RunStream, landed
from ._dialect import Commit, Cursor, Statement
from ._keys import Keys
from ._limits import check_statement
from ._parts import Context, Part, chunks
from ._rows import ExistingRun, to_text
from ._transactions import UniqueViolation

__all__ = ["Enqueue", "EnqueueRows"]

log = logging.getLogger("cairnflow.sql")


class EnqueueRows(NamedTuple):
    """The rows of one enqueue (:meth:`Enqueue.prepare`), in the runs' order."""

    run_ids: list[str]
    runs: list[tuple[Any, ...]]
    steps: list[tuple[Any, ...]]
    """Every run's step rows, one run after the other (``steps_per_run`` says how many)."""
    labels: list[tuple[Any, ...]]
    keys: list[tuple[str, bool]]
    """The concurrency keys ``(name, fifo)`` the runs' steps hold."""
    steps_per_run: list[int]


_StepShape = tuple[str, str, int, str, str, int]
"""What a step row takes from its workflow: name, kind, position, parents and children as
JSON, the number of parents."""

_NO_LABELS = json.dumps({})
"""The labels of a run without any, as every run stores them: ``{}``."""

_SHAPES = 1024
"""Workflows whose step shapes are kept (all are dropped when more come: rebuilt on use).

Before the shapes were kept, ``json.dumps`` of every step's parents and children and of
the empty labels took 0.8 s of the 3.7 s a profile of 20,000 runs enqueued in batches of
1,000 spent (SQLite, 2026-12-01, #20): constant per workflow, made per run."""


_COMPENSATION = StepKind.COMPENSATION.value


def _chunks(
    rows: EnqueueRows, chunk: int | None
) -> Iterator[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """The run rows and step rows of ``rows``, ``chunk`` runs at a time (all at once: None)."""
    if chunk is None or len(rows.runs) <= chunk:
        yield rows.runs, rows.steps
        return
    first_step = 0
    for start in range(0, len(rows.runs), chunk):
        end_step = first_step + sum(rows.steps_per_run[start : start + chunk])
        yield rows.runs[start : start + chunk], rows.steps[first_step:end_step]
        first_step = end_step


def _counted(steps: tuple[NewStep, ...]) -> int:
    """A new run's ``steps_left``: its steps but its compensations, which run only once it
    failed (``Cap.COMPENSATION``)."""
    if not any(step.kind is StepKind.COMPENSATION for step in steps):
        return len(steps)
    return sum(1 for step in steps if step.kind is not StepKind.COMPENSATION)


class Enqueue(Part):
    """``create_runs``, ``create_runs_streamed`` and ``create_runs_in``."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self._keys = Keys(context)
        notifier = context.notifier
        self._inline = notifier if isinstance(notifier, InlineNotifier) else None
        self._shapes: dict[int, tuple[tuple[NewStep, ...], tuple[_StepShape, ...]]] = {}

    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:
        """Insert every run with its steps in one transaction, or none of them."""
        if not runs:
            return []
        rows = self.prepare(runs)
        notifier = self._inline_notifier(runs)
        write = functools.partial(self.write, notify=notifier is not None)
        try:
            run_ids = self._tx.committing(lambda cur, commit: write(cur, commit, rows))
        except UniqueViolation:
            return self._refused(runs)
        if notifier is not None:
            notifier.sent_inline(self.context.channel)
        return run_ids

    def create_runs_streamed(self, runs: RunStream) -> list[str]:
        """:meth:`create_runs` of a batch whose runs are made as the chunks are sent.

        Where the engine pipelines (:attr:`Dialect.batch_chunk`), each chunk of
        runs is made, prepared and sent before the next one is made, so the
        client's Python overlaps the server's writing (:mod:`cairnflow.store._stream`).
        A run that cannot be made raises inside the transaction, which rolls back
        what was sent: nothing of the batch is written. A transaction run again
        reads the runs the first attempt made. Elsewhere the batch is made whole
        and written as :meth:`create_runs` writes it.
        """
        chunk = self._dialect.batch_chunk
        if chunk is None or len(runs) <= chunk:
            return self.create_runs(runs.all())
        wake: list[InlineNotifier | None] = []  # decided once, by the first attempt

        def work(cur: Cursor, commit: Commit) -> list[str]:
            dialect = self._dialect
            seen: set[tuple[str, str]] = set()
            keys: list[tuple[str, bool]] = []
            with dialect.pipelined_transaction(cur, commit) as writing:
                for new_runs in runs.chunks(chunk):
                    rows = self.prepare(new_runs, seen)
                    self._insert_rows(writing, rows)
                    keys.extend(rows.keys)
                if keys:  # last, in name order, as insert() creates them
                    self._keys.create(writing, keys)
                if not wake:
                    wake.append(self._inline_notifier(runs.all()))
                if wake[0] is not None:
                    dialect.notify_in_transaction(writing, self.context.channel)
            return list(runs.ids)

        try:
            run_ids = self._tx.committing(work)
        except UniqueViolation:
            return self._refused(runs.all())
        if wake and wake[0] is not None:
            wake[0].sent_inline(self.context.channel)
        return run_ids

    def _refused(self, runs: Sequence[NewRun]) -> list[str]:
        """After a unique index refused ``runs``: their ids if an earlier attempt wrote
        them (read only now: the write never reads first), else who holds which key."""
        found = self.landed(runs)
        if found is None:
            raise self.duplicate(runs) from None
        self._tx.stats.count(landed=1)
        log.info(
            "%d run(s) were written by an earlier attempt whose commit outcome was lost: %s",
            len(found),
            ", ".join(found),
        )
        return found

    def _inline_notifier(self, runs: Sequence[NewRun]) -> InlineNotifier | None:
        """The notifier, when this enqueue carries its wake-up (module docstring): runs due
        now (the client hints for those only), and a hint that would go out now."""
        notifier = self._inline
        if notifier is None or not any(new.run_at <= new.created_at for new in runs):
            return None
        return notifier if notifier.reserve_inline(self.context.channel) else None

    def create_runs_in(self, tx: Any, runs: Sequence[NewRun]) -> list[str]:
        """Insert the runs in the application's open transaction ``tx`` (never committed here)."""
        if not runs:
            return []
        rows = self.prepare(runs)
        dialect, context = self._dialect, self.context
        conn = dialect.application_connection(tx)

        def work(cur: Cursor) -> list[str]:
            with dialect.savepoint(cur):
                run_ids = self.insert(cur, rows)
                if context.notifier is not None:
                    dialect.notify_in_transaction(cur, context.channel)
            return run_ids

        try:
            return self._tx.in_application(conn, work)
        except UniqueViolation:
            raise self.duplicate(runs) from None

    def prepare(
        self, runs: Sequence[NewRun], seen: set[tuple[str, str]] | None = None
    ) -> EnqueueRows:
        """The rows of ``runs``: everything but the writing, which may fail here (a key
        given twice, a callable) before any transaction begins.

        ``seen``: the ``(workflow, key)`` pairs of the batch's earlier chunks (a
        streamed batch, :meth:`create_runs_streamed`), to which this chunk's are added.
        """
        if seen is None:
            seen = set()
        for new in runs:
            if new.closure is not None:
                raise TypeError("a SQL store cannot keep a Python callable (Cap.CLOSURE)")
            if new.key is not None:
                if (new.workflow, new.key) in seen:
                    raise DuplicateRun(new.workflow, new.key)
                seen.add((new.workflow, new.key))
        run_ids = [new.id for new in runs]
        run_rows = []
        step_rows = []
        label_rows = []
        keys: list[tuple[str, bool]] = []
        steps_per_run = [len(new.steps) for new in runs]
        for new in runs:
            run_id, workflow, queue, priority = new.id, new.workflow, new.queue, new.priority
            run_at = new.run_at
            labels = new.labels
            run_rows.append(
                (
                    run_id,
                    workflow,
                    queue,
                    priority,
                    new.payload,
                    new.key,
                    new.key,
                    json.dumps(dict(labels), ensure_ascii=False) if labels else _NO_LABELS,
                    _counted(new.steps),
                    new.created_at,
                    run_at,
                    json.dumps(dict(new.headers), ensure_ascii=False) if new.headers else None,
                    new.tenant,
                )
            )
            for name, value in labels.items():  # the label index (Cap.LABEL_PREFIX)
                label_rows.append((run_id, name, value, new.created_at))
            root_status = "ready" if run_at <= new.created_at else "scheduled"
            for step_id, (name, kind, position, parents, children, parents_left) in zip(
                new.step_ids, self._shape(new.steps), strict=True
            ):
                root = not parents_left
                status = root_status if root else "blocked"
                if kind == _COMPENSATION:  # until its run fails (Cap.COMPENSATION)
                    status = "skipped"
                step_rows.append(
                    (
                        step_id,
                        run_id,
                        workflow,
                        queue,
                        priority,
                        name,
                        kind,
                        position,
                        parents,
                        children,
                        parents_left,
                        status,
                        run_at if root else None,
                    )
                )
        if any(new.keys for new in runs):
            self._add_keys(runs, run_rows, step_rows, keys)
        return EnqueueRows(run_ids, run_rows, step_rows, label_rows, keys, steps_per_run)

    @staticmethod
    def _add_keys(
        runs: Sequence[NewRun],
        run_rows: list[tuple[Any, ...]],
        step_rows: list[tuple[Any, ...]],
        keys: list[tuple[str, bool]],
    ) -> None:
        """Give every row of an enqueue with concurrency keys its key columns (#16).

        Only such an enqueue writes them (:meth:`insert` then sends the keyed
        statements); one without keys writes the rows it always did.
        """
        steps = iter(range(len(step_rows)))
        for index, new in enumerate(runs):
            run_rows[index] = (*run_rows[index], new.fifo_key)
            for key in new.keys or (None,) * len(new.steps):
                at = next(steps)
                if key is None:
                    step_rows[at] = (*step_rows[at], None, None)
                else:
                    step_rows[at] = (*step_rows[at], key.name, key.limit)
                    keys.append((key.name, key.fifo))

    def _shape(self, steps: tuple[NewStep, ...]) -> tuple[_StepShape, ...]:
        """What the step rows of every run of a workflow share, made once per workflow.

        A client gives every run of a workflow the same ``steps`` tuple, so the
        shape is kept by that tuple's identity (and the tuple with it, so the
        identity cannot be reused while kept); steps made anew each time (a
        schedule's) are shaped each time, as they were before.
        """
        found = self._shapes.get(id(steps))
        if found is not None and found[0] is steps:
            return found[1]
        shape = tuple(
            (
                step.name,
                step.kind.value,
                position,
                json.dumps(list(step.parents)),
                json.dumps(list(step.children)),
                len(step.parents),
            )
            for position, step in enumerate(steps)
        )
        if len(self._shapes) >= _SHAPES:
            self._shapes.clear()
        self._shapes[id(steps)] = (steps, shape)
        return shape

    def write(
        self, cur: Cursor, commit: Commit, rows: EnqueueRows, *, notify: bool = False
    ) -> list[str]:
        """:meth:`insert` ``rows`` between the transaction's BEGIN and COMMIT, sent together.

        On Postgres the BEGIN, the inserts and the COMMIT go out in one round trip
        (:meth:`Dialect.pipelined_transaction`), for one run or a batch: 4 before
        #20 (BEGIN, the run, its steps, COMMIT), then 3 (psycopg's own BEGIN and
        closing syncs). A unique index refusing a row raises at the end of the
        trip, and the transaction, aborted, is rolled back. Elsewhere: the inserts,
        then the COMMIT. ``notify``: the wake-up goes with them
        (:meth:`Dialect.notify_in_transaction`; in the one statement, its last part).
        """
        dialect, channel = self._dialect, self.context.channel
        together = self._together(cur, rows, notify=notify)
        if together is not None and dialect.commit_alone(cur, commit, together):
            self._tx.stats.count(statements=1)
            return rows.run_ids
        with dialect.pipelined_transaction(cur, commit) as writing:
            run_ids = self.insert(writing, rows)
            if notify:
                dialect.notify_in_transaction(writing, channel)
            return run_ids

    def _together(self, cur: Cursor, rows: EnqueueRows, *, notify: bool) -> Statement | None:
        """A one-run enqueue without labels or keys as one statement (:meth:`Dialect.together`),
        checked against the statement limit; None where the dialect does not write inserts
        together, for any other enqueue, or where the one statement would not fit.

        The run's row and its steps' rows, each as one statement (the run's the one-row
        ``INSERT``, the steps' a batch insert where there are several). When the one
        statement is too large, each is checked as the transaction would send it, so a
        row too large is refused as it always was.
        """
        dialect, step_rows = self._dialect, rows.steps
        if not dialect.writes_together or len(rows.run_ids) != 1 or rows.labels or rows.keys:
            return None
        q = self._q
        statements = [(dialect.sql(q.insert_runs.single), tuple(rows.runs[0]))]
        if len(step_rows) == 1 or not dialect.batch_inserts:
            statements.extend((dialect.sql(q.insert_steps.single), tuple(r)) for r in step_rows)
        else:
            statements.append(dialect.batch_insert(q.insert_steps, step_rows))
        if notify:
            statements.append(dialect.notify_statement(self.context.channel))
        together = dialect.together(statements)
        try:
            check_statement(dialect, cur, *together)
        except PayloadTooLarge:
            # Too large as one: refused here if a part is too large alone (as the
            # transaction would refuse it), else the transaction sends them one by one.
            for sql, params in statements:
                check_statement(dialect, cur, sql, params)
            return None
        return together

    def insert(self, cur: Cursor, rows: EnqueueRows) -> list[str]:
        """Write ``rows`` in the transaction open on ``cur``; return the run ids.

        A key held by an unfinished run fails the insert, which the transaction
        runner reports as :class:`UniqueViolation`: the caller raises :meth:`duplicate`
        for it. ``fire_ticks`` creates a schedule's runs through here, in its own
        transaction.
        """
        # Each statement is checked against the server's statement limit before it is
        # sent: an oversized payload refuses the whole enqueue, and nothing is written.
        # A batch goes out as few statements as the dialect makes (Dialect.batch_insert),
        # in chunks of runs where the engine pipelines (Dialect.batch_chunk).
        self._insert_rows(cur, rows)
        if rows.keys:
            # Last, in name order: a key row is the last lock a transaction takes (._keys).
            self._keys.create(cur, rows.keys)
        return rows.run_ids

    def _insert_rows(self, cur: Cursor, rows: EnqueueRows) -> None:
        """Write the run, step and label rows of ``rows`` (not their concurrency keys)."""
        q, tx = self._q, self._tx
        insert_runs, insert_steps = (
            (q.insert_runs_keyed, q.insert_steps_keyed)
            if rows.keys
            else (q.insert_runs, q.insert_steps)
        )
        for runs, steps in _chunks(rows, self._dialect.batch_chunk):
            tx.insert_many(cur, insert_runs, runs)
            tx.insert_many(cur, insert_steps, steps)
        if rows.labels:  # a run without labels costs no statement more
            tx.insert_many(cur, q.insert_labels, rows.labels)

    def landed(self, runs: Sequence[NewRun]) -> list[str] | None:
        """The ids of ``runs`` if an earlier attempt wrote them all, None if it wrote none.

        Read after a unique index refused ``runs``, never before (see the module
        docstring); :func:`cairnflow.store.landed` decides, and refuses ids that collided.
        """
        run_ids = [new.id for new in runs]
        q = self._q

        def work(cur: Cursor) -> list[ExistingRun]:
            return [
                ExistingRun.from_row(row)
                for chunk in chunks(run_ids)
                for row in self._execute(cur, *q.runs_named(chunk)).fetchall()
            ]

        existing = self._tx.read(work)
        return landed(runs, {run.id: run.workflow for run in existing})

    def duplicate(self, runs: Sequence[NewRun]) -> CairnError:
        """What to raise after a unique index refused ``runs``: who holds which key."""
        by_workflow: dict[str, list[str]] = {}
        for new in runs:
            if new.key is not None:
                by_workflow.setdefault(new.workflow, []).append(new.key)
        for workflow, keys in by_workflow.items():
            rows = self._tx.fetch(*self._q.holder_of_key(workflow, keys))
            if rows:
                run_id, key = rows[0]
                return DuplicateRun(workflow, to_text(key), to_text(run_id))
        if by_workflow:
            workflow, keys = next(iter(by_workflow.items()))
            return DuplicateRun(workflow, keys[0])
        return CairnError(
            "an id given to create_runs (a run's or a step's) exists already: the id generator "
            "made ids that collided; nothing was written"
        )
