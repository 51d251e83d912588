"""Outcomes, and every other transition of a run: due work, signals, cancel.

Each transition locks the run row first, then writes its steps (one lock
order: no two transitions of a run deadlock), so fan-in, signal delivery and
run completion are serialised per run. A batch of outcomes
(:meth:`Outcomes.finish_and_claim`, what the engine's committer sends) locks
all its runs in the order of their ids, so two batches that share runs
cannot deadlock either, and is one transaction with the claim for the slots
it frees.

The common batch, every outcome a success that still holds its lease, is
written with as few statements as the dialect allows: one locking read of the
steps and their runs, one ``UPDATE`` for all the successes (sent behind that
read where the engine pipelines), and the run writes the batch owes counted
per run in a :class:`_RunTally` and flushed once, with the claim and the
COMMIT in the same round trip. A batch in which some lease was lost is redone
one outcome at a time (:class:`_Redo`): nothing of it was written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple, cast

from .._errors import CairnError, RunNotFound, StepTimeout
from .._models import ErrorInfo, Status, StepKind
from ..store import (
    ACTIVE,
    AdvanceResult,
    AttemptState,
    ClaimedAttempt,
    ClaimRequest,
    Failed,
    FinishResult,
    Outcome,
    SignalResult,
    SleepUntil,
    Snoozed,
    Succeeded,
    WaitFor,
)
from ._branches import FailurePaths
from ._claims import Claims
from ._dialect import Commit, Cursor
from ._history import ErrorLog
from ._leases import Leases
from ._parts import Context, Part, chunks, split_token
from ._queries import Queries
from ._rows import DueStep, FinishingStep, LockedRun, to_bytes, to_json, to_text
from ._transactions import Transactions

__all__ = ["Outcomes"]

_HELD = FinishResult(AttemptState.HELD)
_RUN_SUCCEEDED = FinishResult(AttemptState.HELD, run_status=Status.SUCCEEDED)
"""The two most common results, shared (results are immutable)."""

_BATCH_ROWS = 64  # rows per one-statement batch of successes (four values each)


class _Redo(CairnError):
    """A batched write met an attempt whose lease was lost: redo the batch one at a time."""


class _RunTally:
    """The steps left of the runs a transaction locked, and the run writes it owes them.

    Successes are counted here and written once per run at :meth:`flush` (one
    ``executemany`` for all the runs of a batch), rather than once per step.
    """

    @classmethod
    def of(cls, run_id: str, steps_left: int) -> _RunTally:
        """A tally of one locked run."""
        tally = cls()
        tally.left[run_id] = steps_left
        return tally

    def __init__(self) -> None:
        self.left: dict[str, int] = {}
        self._done: Counter[str] = Counter()
        self._finished: list[str] = []
        # Concurrency keys (#16, docs/claim.md, 4): attempts per key whose leases this
        # transaction ended. Moved once, with the claim's keys (Claims.send) or alone
        # (Keys.release), never by flush: key rows are the last locks a transaction takes.
        self.released: Counter[str] = Counter()

    def succeeded(self, run_id: str) -> bool:
        """Count a success of ``run_id``; True when it was the run's last step."""
        self.left[run_id] -= 1
        if self.left[run_id] > 0:
            self._done[run_id] += 1
            return False
        self._done.pop(run_id, None)
        self._finished.append(run_id)
        return True

    def skipped(self, run_id: str, done: int) -> None:
        """Count ``done`` steps of ``run_id`` a failure path settled (skipped, timed out);
        never its last: a branch taken or a wait resolved is still to be counted."""
        if done:
            self.left[run_id] -= done
            self._done[run_id] += done

    def flush(self, tx: Transactions, q: Queries, cur: Cursor, now: int) -> None:
        """Write the counts and end the runs whose every step succeeded."""
        if self._done:
            tx.execute_many(cur, q.count_steps_done, [(n, run) for run, n in self._done.items()])
        for chunk in chunks(self._finished):
            tx.execute(cur, *q.runs_succeeded(now, chunk))
            tx.execute(cur, *q.drop_signals_of(chunk))
        self._done.clear()
        self._finished.clear()


class _Held(NamedTuple):
    """An outcome of a batch whose token parsed: its place in the batch, and its lease."""

    item: int
    step_id: str
    secret: str


def _due_status(due_at: int, now: int) -> str:
    """``ready`` when due by ``now``, ``scheduled`` otherwise (kept out of the claim's index)."""
    return "scheduled" if due_at > now else "ready"


class Outcomes(Part):
    """``finish_and_claim`` (and ``finish``, ``finish_many``), ``advance_due``,
    ``send_signal``, ``cancel_run``, ``time_out_runs``."""

    def __init__(
        self, context: Context, *, claims: Claims, leases: Leases, errors: ErrorLog
    ) -> None:
        super().__init__(context)
        self._claims = claims
        self._leases = leases
        self._errors = errors
        self._paths = FailurePaths(context)  # Cap.WAIT_BRANCH, Cap.COMPENSATION

    def finish_and_claim(
        self, items: Sequence[tuple[str, Outcome]], now: int, claim: ClaimRequest | None
    ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
        """Apply the outcomes, then claim for the slots they freed, in one transaction.

        The runs are locked in the order of their ids, so two batches that
        share runs lock them in the same order and cannot deadlock.
        """
        if not items and claim is None:
            return [], []
        self._claims.prepare(claim)  # the limiter rows its claim locks, before the transaction
        dialect = self._dialect

        def work(
            cur: Cursor, commit: Commit, batched: bool
        ) -> tuple[list[FinishResult], list[ClaimedAttempt]]:
            results, tally = self._finish_in(cur, items, now, batched=batched)
            # The run writes the outcomes owe, the claim and the COMMIT go out together
            # where the engine pipelines: one round trip. The claim's rows are read after.
            with dialect.pipeline(cur) as cursor:
                tally.flush(self._tx, self._q, cursor(), now)
                claiming = None
                if claim is not None:  # the claim moves the keys' counts (#16)
                    claiming = self._claims.send(cursor, claim, tally.released)
                else:
                    self._claims.keys.release(cursor(), tally.released)
                if dialect.pipelines:
                    dialect.commit_in_pipeline(cursor(), commit)
            return results, claiming() if claiming is not None else []

        try:
            return self._tx.committing(lambda cur, commit: work(cur, commit, True))
        except _Redo:
            # Some attempt of the batch had lost its lease: nothing was written; go one by one.
            return self._tx.committing(lambda cur, commit: work(cur, commit, False))

    def _finish_in(
        self, cur: Cursor, items: Sequence[tuple[str, Outcome]], now: int, *, batched: bool
    ) -> tuple[list[FinishResult], _RunTally]:
        """Apply ``items``; the run writes they owe are left in the tally, to flush."""
        results: list[FinishResult] = [FinishResult(AttemptState.LOST)] * len(items)
        tally = _RunTally()
        parsed: list[_Held] = []
        for index, (lease, _outcome) in enumerate(items):
            split = split_token(lease)
            if split is not None:
                parsed.append(_Held(index, *split))
        if not parsed:
            return results, tally
        q = self._q
        # Where the engine can, one statement reads every step and locks their runs in
        # id order; otherwise the steps are read, then their runs locked by one statement
        # on the runs table alone, in id order too.
        joined = self._dialect.lock_runs_joined is not None
        plain = [held for held in parsed if type(items[held.item][1]) is Succeeded]
        batch = batched and bool(plain)
        # An engine that pipelines sends the successes right behind the locking read
        # (the server runs them in that order: runs locked first), in one round trip.
        early = batch and joined and self._dialect.pipelines
        written: Callable[[], int] | None = None
        step_chunks = list(chunks(sorted({held.step_id for held in parsed})))

        def read(chunk: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
            return q.steps_with_runs(chunk) if joined else q.steps_of(chunk)

        if early:
            with self._dialect.pipeline(cur) as cursor:
                pending = [self._execute(cursor(), *read(chunk)) for chunk in step_chunks]
                written = self._send_successes(cursor, items, plain, now)
            # Read after the block: inside it a read waits for its own answer (a flush),
            # and the block's closing sync once more, one round trip for nothing.
            rows = [row for statement in pending for row in statement.fetchall()]
        else:
            rows = [
                row for chunk in step_chunks for row in self._execute(cur, *read(chunk)).fetchall()
            ]
        found: dict[str, FinishingStep] = {}
        for step in (FinishingStep.from_row(row, joined=joined) for row in rows):
            found[step.id] = step
            if step.steps_left is not None:
                tally.left[step.run_id] = step.steps_left
        order = sorted(
            (held for held in parsed if held.step_id in found),
            key=lambda held: (found[held.step_id].run_id, held.step_id),
        )
        unlocked = sorted({found[held.step_id].run_id for held in order} - tally.left.keys())
        for chunk in chunks(unlocked):  # ascending chunks of ascending ids: one lock order
            for run_id, steps_left in self._execute(cur, *q.lock_runs(chunk)).fetchall():
                tally.left[to_text(run_id)] = int(steps_left)
        for run_id in unlocked:
            tally.left.setdefault(run_id, 0)
        if batch:
            # The common case, in one statement: every success still holds its lease.
            if written is None:
                written = self._send_successes(lambda: cur, items, plain, now)
            if written() != len(plain):
                raise _Redo("a lease of the batch was lost")
            succeeded = [(index, found[step_id]) for index, step_id, _secret in plain]
            # The children of every success (a compensation's next step is its own read and
            # write, below) are released together: where the engine pipelines, one round
            # trip for the batch rather than two a success.
            parents = [
                (index, step)
                for index, step in succeeded
                if step.children and step.kind != StepKind.COMPENSATION.value
            ]
            released: dict[int, Callable[[], int]] = {}
            if parents:  # an empty pipeline would still sync: a round trip for nothing
                with self._dialect.pipeline(cur) as cursor:
                    for index, step in parents:
                        released[index] = self._release(cursor, step.run_id, step.children, now)
            for index, step in succeeded:
                if step.key is not None:  # the batch ended every lease of it (#16)
                    tally.released[step.key] += 1
                if step.kind == StepKind.COMPENSATION.value:
                    results[index] = self._after_success(cur, step, tally, now)
                else:
                    ready = released[index]() if index in released else 0
                    results[index] = self._counted(step.run_id, ready, tally)
            done = {held.item for held in plain}
            order = [held for held in order if held.item not in done]
        for index, step_id, secret in order:
            step = found[step_id]
            _lease, outcome = items[index]
            results[index] = self._apply(cur, step, secret, outcome, now, tally)
            if step.key is not None and results[index].applied:  # its fenced write held (#16)
                tally.released[step.key] += 1
        return results, tally

    def _send_successes(
        self,
        cursor: Callable[[], Cursor],
        items: Sequence[tuple[str, Outcome]],
        plain: Sequence[_Held],
        now: int,
    ) -> Callable[[], int]:
        """Write the successes ``plain`` (item index, step id, secret).

        Returns how to count the leases that held, to call once the statements'
        results are in (after the pipeline, where there is one).
        """
        q = self._q
        rows = [
            (step_id, secret, cast(Succeeded, items[index][1]).output)
            for index, step_id, secret in plain
        ]
        if not self._dialect.batch_statements:
            single = [(output, now, step_id, secret) for step_id, secret, output in rows]
            count = self._tx.execute_many(cursor(), q.succeed, single)
            return lambda: count
        counts = [
            self._counter(self._execute(cursor(), *q.succeed_many(now, chunk)))
            for chunk in chunks(rows, _BATCH_ROWS)
        ]
        return lambda: sum(count() for count in counts)

    def _counter(self, sent: Cursor) -> Callable[[], int]:
        """How to read the row count of the statement just ``sent``: after the pipeline
        where the dialect pipelines (each statement has a cursor of its own), at once
        otherwise. There one cursor carries every statement and the next replaces the
        count: read after, two statements of 64 rows that changed 63 counted 128, a lost
        lease taken for a held one (MariaDB)."""
        if self._dialect.pipelines:
            return lambda: int(sent.rowcount)
        count = int(sent.rowcount)
        return lambda: count

    def _apply(
        self,
        cur: Cursor,
        step: FinishingStep,
        secret: str,
        outcome: Outcome,
        now: int,
        tally: _RunTally,
    ) -> FinishResult:
        """One fenced outcome inside an open transaction whose run row is locked.

        ``tally`` holds the runs' steps left, read under that lock, and the run
        writes owed, so several outcomes of one run in a batch count right.
        """
        q = self._q
        step_id, run_id = step.id, step.run_id

        def fenced(sql: str, *values: Any) -> bool:
            return bool(self._execute(cur, sql, (*values, step_id, secret)).rowcount == 1)

        def lost() -> FinishResult:
            return FinishResult(self._leases.state(cur, step_id, secret))

        if isinstance(outcome, Succeeded):
            if not fenced(q.succeed, outcome.output, now):
                return lost()
            return self._after_success(cur, step, tally, now)
        if isinstance(outcome, Failed):
            error = outcome.error.to_json()
            retry_at = outcome.retry_at
            if outcome.judged:
                # The failure policy, judged on the run as stored (its row is locked):
                # two steps failing at once on two clients are counted one after the other.
                row = self._execute(cur, q.run_failures, (run_id,)).fetchone()
                if row is None or not outcome.retry_stands(int(row[0]), int(row[1])):
                    retry_at = None
            if retry_at is not None:
                status = _due_status(retry_at, now)
                if not fenced(q.retry, status, retry_at, error):
                    return lost()
                self._errors.record(cur, run_id, outcome, error, now)
                return FinishResult(AttemptState.HELD, ready=1)
            if not fenced(q.fail, error, now):
                return lost()
            self._errors.record(cur, run_id, outcome, error, now)
            final = outcome.final_status
            if not self._run_failed(cur, run_id, step.kind, final, error, now, tally):
                return FinishResult(AttemptState.HELD, ready=1)  # compensating
            return FinishResult(AttemptState.HELD, run_status=final)
        if isinstance(outcome, Snoozed):
            if not fenced(q.snooze, _due_status(outcome.until, now), outcome.until):
                return lost()
            return FinishResult(AttemptState.HELD, ready=1)
        if isinstance(outcome, SleepUntil):
            if not fenced(q.sleep, outcome.until, outcome.output):
                return lost()
            return FinishResult(AttemptState.HELD)
        if isinstance(outcome, WaitFor):
            stored = self._execute(cur, q.oldest_signal, (run_id, outcome.signal)).fetchone()
            if stored is not None:
                seq, payload = stored
                if not fenced(q.succeed, to_bytes(payload), now):
                    return lost()
                self._execute(cur, q.consume_signal, (seq,))
                tally.skipped(run_id, self._paths.skip_branch(cur, run_id, step_id, now))
                return self._succeeded(cur, run_id, step.children, tally, now)
            if not fenced(q.wait, outcome.deadline, outcome.signal):
                return lost()
            return FinishResult(AttemptState.HELD)
        raise TypeError(f"unknown outcome {outcome!r}")

    def _after_success(
        self, cur: Cursor, step: FinishingStep, tally: _RunTally, now: int
    ) -> FinishResult:
        """After ``step``'s success was written: release its children, or, for a
        compensation, start the next one or end the run failed (``Cap.COMPENSATION``)."""
        if step.kind != StepKind.COMPENSATION.value:
            return self._succeeded(cur, step.run_id, step.children, tally, now)
        if self._paths.start_next_compensation(cur, step.run_id, now):
            return FinishResult(AttemptState.HELD, ready=1)
        error = self._paths.kept_error(cur, step.run_id)
        self._end_run(cur, step.run_id, Status.FAILED.value, error, now, tally)
        return FinishResult(AttemptState.HELD, run_status=Status.FAILED)

    def _run_failed(
        self,
        cur: Cursor,
        run_id: str,
        kind: str,
        final: Status,
        error: str,
        now: int,
        tally: _RunTally,
    ) -> bool:
        """A step of kind ``kind`` failed for good (run row locked): end the run ``final``
        with ``error``, or start its compensations first (False: the run goes on).

        A compensation that fails ends its run failed with the error the run kept; a
        run failing with compensations to run keeps ``error`` and runs them
        (``Cap.COMPENSATION``, :mod:`._branches`). A discarded run runs none.
        """
        if kind == StepKind.COMPENSATION.value:
            kept = self._paths.kept_error(cur, run_id)
            self._end_run(cur, run_id, Status.FAILED.value, kept, now, tally)
            return True
        due = self._paths.compensations_due(cur, run_id) if final is Status.FAILED else []
        if not due:
            self._end_run(cur, run_id, final.value, error, now, tally)
            return True
        self._cancel_unfinished(cur, run_id, now, tally)
        self._paths.start_compensations(cur, run_id, due, error, now)
        return False

    def _succeeded(
        self, cur: Cursor, run_id: str, children: Sequence[str], tally: _RunTally, now: int
    ) -> FinishResult:
        """After a step succeeded (run row locked): release its children, count it.

        The run's own row is written when ``tally`` is flushed.
        """
        return self._counted(run_id, self._release(lambda: cur, run_id, children, now)(), tally)

    def _release(
        self, cursor: Callable[[], Cursor], run_id: str, children: Sequence[str], now: int
    ) -> Callable[[], int]:
        """Send what releases ``children`` of a success (run row locked); return how to count
        those it made ready (inside a :meth:`Dialect.pipeline`: after the block)."""
        if not children:
            return lambda: 0
        q = self._q
        self._execute(cursor(), *q.release_children(run_id, children))
        return self._counter(self._execute(cursor(), *q.ready_children(now, run_id, children)))

    def _counted(self, run_id: str, ready: int, tally: _RunTally) -> FinishResult:
        """A success counted in ``tally`` (its run's last step or not), ``ready`` children
        made ready by it."""
        if tally.succeeded(run_id):
            # The last step: every other step succeeded (or an operator cancelled it, and the
            # flush ends the run cancelled: RUNS_SUCCEEDED reads its kept error; the status
            # reported here is then SUCCEEDED, and the engine reads only that it finished).
            if not ready:
                return _RUN_SUCCEEDED
            return FinishResult(AttemptState.HELD, ready=ready, run_status=Status.SUCCEEDED)
        return FinishResult(AttemptState.HELD, ready=ready) if ready else _HELD

    def _end_run(
        self,
        cur: Cursor,
        run_id: str,
        state: str,
        error: str | None,
        now: int,
        tally: _RunTally,
    ) -> None:
        """Finish the run (row locked), release its key, cancel its unfinished steps.

        Cancelling a running step ends its lease: its concurrency key is released
        into ``tally`` (#16). The keyed steps are locked first, so the status read
        is the one the cancel changes (no reclaim or claim moves them meanwhile).
        """
        self._execute(cur, self._q.end_run, (state, now, error, run_id))
        self._cancel_unfinished(cur, run_id, now, tally)

    def _cancel_unfinished(self, cur: Cursor, run_id: str, now: int, tally: _RunTally) -> None:
        """Cancel the run's unfinished steps (row locked) and forget its kept signals."""
        q = self._q
        rows = self._execute(cur, q.unfinished_steps, (run_id,)).fetchall()
        unfinished = [to_text(step_id) for step_id, _key in rows]
        keyed = [to_text(step_id) for step_id, key in rows if key is not None]
        for chunk in chunks(keyed):
            for _step_id, status, key in self._execute(cur, *q.lock_steps(chunk)).fetchall():
                if to_text(status) == "running":
                    tally.released[to_text(key)] += 1
        for chunk in chunks(unfinished):
            self._execute(cur, *q.cancel_steps(now, chunk))
        self._execute(cur, q.drop_signals, (run_id,))

    # -- due work, signals, cancel -------------------------------------------------------------
    def advance_due(self, *, now: int, workflows: Collection[str], limit: int) -> AdvanceResult:
        """Promote due scheduled steps; end due sleeps and fail overdue waits (one run each)."""
        if not workflows or limit <= 0:
            return AdvanceResult()
        q = self._q
        rows = self._tx.fetch(*q.due(now, sorted(workflows), limit))
        due = [DueStep.from_row(row) for row in rows]
        woken = timed_out = promoted = 0
        # Scheduled steps that fell due become ready; no run state changes, so no run lock.
        scheduled = [step.id for step in due if step.status == "scheduled"]
        for chunk in chunks(scheduled):
            promoted += self._tx.change(*q.promote(chunk))
        for step in due:
            if step.status == "scheduled":
                continue

            def work(cur: Cursor, step_id: str = step.id, status: str = step.status) -> int:
                row = self._execute(cur, q.step_of, (step_id,)).fetchone()
                if row is None:
                    return 0
                raw_run_id, raw_children = row
                run_id, children = to_text(raw_run_id), to_json(raw_children)
                locked = self._lock_run(cur, run_id)
                tally = _RunTally.of(run_id, locked.steps_left if locked is not None else 0)
                if status == "sleeping":
                    if self._execute(cur, q.wake_sleeper, (now, step_id, now)).rowcount != 1:
                        return 0
                    self._succeeded(cur, run_id, children, tally, now)
                    tally.flush(self._tx, q, cur, now)
                    return 1
                signal, attempt, name = self._execute(cur, q.step_signal, (step_id,)).fetchone()
                error = ErrorInfo(
                    type=StepTimeout.__name__,
                    message=f"no signal {to_text(signal)!r} arrived before the wait's deadline",
                    step=to_text(name),
                    attempt=int(attempt),
                ).to_json()
                branched = self._paths.take_branch(cur, run_id, step_id, error, now)
                if branched is not None:  # Cap.WAIT_BRANCH: timed out, not failed
                    tally.skipped(run_id, branched)
                    tally.flush(self._tx, q, cur, now)
                    return 1 if branched else 0
                if self._execute(cur, q.time_out_wait, (error, now, step_id, now)).rowcount != 1:
                    return 0
                self._run_failed(cur, run_id, StepKind.WAIT.value, Status.FAILED, error, now, tally)
                self._claims.keys.release(cur, tally.released)
                return 1

            done = self._tx.run(work)
            if step.status == "sleeping":
                woken += done
            else:
                timed_out += done
        return AdvanceResult(woken, timed_out, promoted)

    def _lock_run(self, cur: Cursor, run_id: str) -> LockedRun | None:
        row = self._execute(cur, self._q.lock_run, (run_id,)).fetchone()
        return None if row is None else LockedRun.from_row(row)

    def send_signal(self, run_id: str, name: str, payload: bytes, now: int) -> SignalResult:
        """Resolve the first step waiting for ``name``, or keep the signal (run row locked)."""
        q = self._q

        def work(cur: Cursor) -> SignalResult:
            locked = self._lock_run(cur, run_id)
            if locked is None:
                raise RunNotFound(run_id)
            if locked.state != ACTIVE:
                return SignalResult.RUN_FINISHED
            waiting = self._execute(cur, q.waiting_for, (run_id, name)).fetchone()
            if waiting is not None:
                raw_step_id, raw_children = waiting
                step_id, children = to_text(raw_step_id), to_json(raw_children)
                if self._execute(cur, q.resolve_wait, (payload, now, step_id)).rowcount == 1:
                    tally = _RunTally.of(run_id, locked.steps_left)
                    tally.skipped(run_id, self._paths.skip_branch(cur, run_id, step_id, now))
                    self._succeeded(cur, run_id, children, tally, now)
                    tally.flush(self._tx, q, cur, now)
                    return SignalResult.DELIVERED
            self._execute(cur, q.insert_signal, (run_id, name, payload, now))
            return SignalResult.STORED

        return self._tx.run(work)

    def time_out_runs(
        self, workflow: str, due_before: int, error: ErrorInfo, now: int, limit: int
    ) -> list[str]:
        """Fail the unfinished runs of ``workflow`` due at or before ``due_before``.

        One indexed read (``OVERDUE_RUNS``: the partial index of unfinished runs
        by workflow and ``run_at``), then one transaction per run that locks it
        and ends it only while it is still active: two clients judging at once
        fail it once (``Cap.RUN_TIMEOUT``).
        """
        rows = self._tx.fetch(self._q.overdue_runs, (workflow, due_before, limit))
        text = error.to_json()

        def fail(run_id: str) -> Callable[[Cursor], bool]:
            return lambda cur: work(cur, run_id)

        def work(cur: Cursor, run_id: str) -> bool:
            locked = self._lock_run(cur, run_id)
            if locked is None or locked.state != ACTIVE:
                return False
            tally = _RunTally()
            self._end_run(cur, run_id, Status.FAILED.value, text, now, tally)
            self._claims.keys.release(cur, tally.released)
            return True

        ended = []
        for (raw,) in rows:
            run_id = to_text(raw)
            if self._tx.run(fail(run_id)):
                ended.append(run_id)
        return ended

    def cancel_run(self, run_id: str, now: int) -> bool:
        """Cancel an unfinished run and its unfinished steps (run row locked)."""

        def work(cur: Cursor) -> bool:
            locked = self._lock_run(cur, run_id)
            if locked is None:
                raise RunNotFound(run_id)
            if locked.state != ACTIVE:
                return False
            tally = _RunTally()
            self._end_run(cur, run_id, Status.CANCELLED.value, None, now, tally)
            self._claims.keys.release(cur, tally.released)
            return True

        return self._tx.run(work)
