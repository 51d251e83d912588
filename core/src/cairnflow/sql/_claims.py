"""Claiming: lease the most urgent ready steps, and hand them out with their inputs.

A claim names its queues, highest priority first, and each queue is claimed
by its own statement in the claim's one transaction (docs/claim.md). How a
queue is claimed is the dialect's (:meth:`Dialect.send_claim`: one
``UPDATE ... RETURNING``, or a locking read and an update by id); this part
renders the claim's statements, and turns the rows it leased into
:class:`~cairnflow.store.ClaimedAttempt`\\ s: the run's payload and labels
(read only when the claim did not return them) and the outputs of each step's
parents. Those reads see rows no transaction changes anymore (a run's payload,
a succeeded step's output), so inside a pipeline they may run after COMMIT.

A queue asked with a global limit (``Cap.QUEUE_LIMIT_GLOBAL``) first has its
limiter row locked and its running steps counted, in the same transaction,
and its statement takes at most the room left (:mod:`._limiters`); a queue
without one sends exactly its statement, as before. A rate-limited queue
(``Cap.RATE_LIMIT``) has its bucket locked too and asks for at most the tokens
the bucket holds; what it leased is charged in the same transaction.

A claim that honours concurrency keys (``ClaimRequest.keys``, docs/claim.md, 4)
reads each queue's candidates with the keyed ready subquery (full keys and
fifo keys whose turn is another run's skipped, without locks), locked; then
admits them under their keys' locks, taken in name order (:mod:`._keys`), and
leases exactly those admitted by id. Where the engine takes arrays (Postgres), a
claim of one queue reads its candidates and locks their keys in one statement
(READY_KEYED_WITH_KEYS); where it also runs data-modifying ``WITH`` clauses
(``Dialect.claims_keyed_in_one``, Postgres), a claim of one queue without a rate
limit is one statement, those rules in SQL (CLAIM_KEYED), sent as a plain claim's.
A plain claim never sees these statements.

One lease secret is drawn per claim; each attempt's token is
``<step id>:<secret>``, and every later write of the attempt is fenced by it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .. import _faults, ids
from ..store import ClaimedAttempt, ClaimRequest, QueueClaim
from ._dialect import ClaimedRow, ClaimPlan, Commit, Cursor
from ._keys import Keys
from ._limiters import Buckets, Limiters, global_limits, queue_rates
from ._parts import Context, Part, chunks, token
from ._rows import ClaimedRun, ClaimedStep, KeyCandidate, KeyRow, split_keyed, to_bytes, to_text
from ._transactions import CountingCursor, Transactions

__all__ = ["Claims"]


class Claims(Part):
    """``claim``, and the claim half of ``finish_and_claim``."""

    def __init__(self, context: Context, *, claim_tx: Transactions | None = None) -> None:
        super().__init__(context)
        self.limiters = Limiters(context)
        self.keys = Keys(context)
        self._claim_tx = claim_tx or context.tx
        """What :meth:`claim` runs its transactions on (the store's claim connections, where
        its driver has them: ``SQLStore(claim_connections=)``); an outcome batch claims in
        its own transaction."""

    def prepare(self, request: ClaimRequest | None) -> None:
        """What a claim needs before its transaction: the rows of its limited queues."""
        self.limiters.prepare(request)

    def claim(self, request: ClaimRequest) -> list[ClaimedAttempt]:
        """Lease the most urgent due, ready steps, queue by queue (see the dialect for how)."""
        if request.limit <= 0 or not request.workflows:
            return []
        self.prepare(request)
        dialect = self._dialect

        def work(cur: Cursor, commit: Commit) -> list[ClaimedAttempt]:
            # A claim of one statement, where the connection can send it as a transaction
            # of its own (Dialect.claims_alone; on Postgres the store's claims pool):
            # one message, no BEGIN, no COMMIT. An idle server wakes once for it, where it
            # woke for each statement of the pipeline below (docs/claim.md, 7).
            if dialect.claims_alone(cur) and (single := self._single(request)) is not None:
                secret, plan = single
                if _faults.plan is not None:
                    _faults.fire(_faults.CLAIM_BEFORE_COMMIT)  # nothing sent yet
                counting = CountingCursor(cur, self._tx.stats)
                return self._claimed(cur, secret, dialect.claim_alone(counting, commit, plan))
            # BEGIN, the claim and COMMIT sent together where the engine pipelines: on
            # Postgres one round trip (the span's first pipeline carries the BEGIN,
            # Dialect.transaction), where psycopg's own transaction took three (its BEGIN
            # and a sync, the claim, the COMMIT), which an idle worker waits out between a
            # run's NOTIFY and its start. A claim that must read before its last statement
            # (a second queue, a rate, concurrency keys) reads inside the transaction; the
            # inputs of the steps it leased are read after the COMMIT (on Postgres outside
            # any transaction: no BEGIN and no COMMIT of their own).
            with dialect.pipeline(cur) as cursors:
                fetch = self.send(cursors, request)
                if dialect.pipelines:
                    dialect.commit_in_pipeline(cursors(), commit)
            return fetch()

        # Sent as one trip, a claim's COMMIT is on its way whenever its connection is lost:
        # claimed again at once (repeatable), as a claim lost before COMMIT always was.
        return self._claim_tx.committing(work, repeatable=True)

    def _single(self, request: ClaimRequest) -> tuple[str, ClaimPlan] | None:
        """The secret and the one statement of a claim that is one statement (one queue
        asked, no global limit, rate or concurrency keys: the common claim); None for
        any other, which :meth:`send` sends as its several statements."""
        asks = [q for q in request.queues if q.limit is None or q.limit > 0]
        if len(asks) != 1 or request.keys or global_limits(request) or queue_rates(request):
            return None
        (ask,) = asks
        secret = ids.new_token()
        plan = self._q.claim_plan(
            workflows=sorted(request.workflows),
            queue=ask.name,
            limit=_queue_limit(request, ask, {}),
            claimed=(secret, request.lease_until, request.node_id, request.now),
        )
        return secret, plan

    def send(
        self,
        cursors: Callable[[], Cursor],
        request: ClaimRequest,
        released: Mapping[str, int] | None = None,
    ) -> Callable[[], list[ClaimedAttempt]]:
        """Send the claim; return how to read what it leased.

        One statement (or the dialect's few) per queue, in the request's order,
        each for at most ``min(the queue's limit, what the request still wants)``
        (docs/claim.md, section 2). How many the next queue may take depends on
        what the previous ones took, so every queue's rows but the last are read
        at once; the last queue's (in the common claim of one queue, the only
        one's) are read when the caller asks: inside a pipeline, after the block,
        maybe after its COMMIT. The reads they need then (runs a claim did not
        return, parents' outputs) see rows no transaction changes anymore.

        Queues with a global limit are locked and counted first, all of them,
        and each then asks for no more than its room; one without room sends no
        statement. The caller ran :meth:`prepare` before the transaction.

        Where the engine takes an expression as a ``LIMIT``
        (:attr:`Dialect.limit_expressions`), a limited queue's statement counts
        its running attempts itself (``ROOM_LIMIT``): its lock is sent, not read,
        before it, and in a pipeline the whole claim is one round trip. A keyed
        claim, and other engines, read each queue's room first.

        ``cursors``: cursors on the transaction's connection (a pipeline's: one
        per statement whose answer is read later; otherwise the same cursor).
        ``released``: attempts per concurrency key whose leases the same
        transaction ended (an outcome batch's); their keys' counts are moved
        here, with the claim's, so key rows are locked once, in name order.
        """
        released = released or {}
        cur = cursors()
        asks = [q for q in request.queues if q.limit is None or q.limit > 0]
        if request.limit <= 0 or not request.workflows or not asks:
            self.keys.release(cur, released)
            return lambda: []
        secret = ids.new_token()
        workflows = sorted(request.workflows)
        claimed = (secret, request.lease_until, request.node_id, request.now)
        counting = CountingCursor(cur, self._tx.stats)
        limits = global_limits(request)
        counted = limits if self._dialect.limit_expressions and not request.keys else {}
        locked = self.limiters.lock(cursors, counted) if counted else None
        room = self.limiters.room(cur, limits) if limits and not counted else {}
        rates = queue_rates(request)
        buckets = self.limiters.lock_buckets(cur, rates, request.now) if rates else None
        if buckets is not None:
            for name in rates:
                room[name] = min(room.get(name, request.limit), buckets.room(name))
        asks = [ask for ask in asks if room.get(ask.name, 1) > 0]
        if not asks:
            self.keys.release(cur, released)
            return lambda: []
        if request.keys:
            leased = self._send_keyed(cur, request, asks, room, claimed, released, buckets)
            if _faults.plan is not None:
                _faults.fire(_faults.CLAIM_BEFORE_COMMIT)
            return lambda: self._claimed(cur, secret, leased())
        self.keys.release(cur, released)  # after the limiters: key rows are locked last

        def send_queue(ask: QueueClaim, left: int) -> Callable[[], list[ClaimedRow]]:
            limit = left if ask.limit is None else min(ask.limit, left)
            if ask.name in room:
                limit = min(limit, room[ask.name])
            plan = self._q.claim_plan(
                workflows=workflows,
                queue=ask.name,
                limit=limit,
                claimed=claimed,
                global_limit=counted.get(ask.name),
            )
            fetch = self._dialect.send_claim(counting, plan)
            if buckets is None or ask.name not in rates:
                return fetch
            # A rate-limited queue's bucket is charged for what it leased, before COMMIT:
            # its rows are read now, not after a pipeline's block.
            got = fetch()
            self.limiters.charge(cur, buckets, ask.name, len(got))
            return lambda: got

        def claimed_rows(fetch: Callable[[], list[ClaimedRow]]) -> list[ClaimedAttempt]:
            got = fetch()
            if locked is not None:
                locked()
            return self._claimed(cur, secret, got)

        rows: list[ClaimedRow] = []
        for ask in asks[:-1]:
            rows.extend(send_queue(ask, request.limit - len(rows))())
            if len(rows) >= request.limit:
                if _faults.plan is not None:
                    _faults.fire(_faults.CLAIM_BEFORE_COMMIT)
                return lambda: claimed_rows(lambda: rows)
        fetch = send_queue(asks[-1], request.limit - len(rows))
        if _faults.plan is not None:
            _faults.fire(_faults.CLAIM_BEFORE_COMMIT)
        return lambda: claimed_rows(lambda: [*rows, *fetch()])

    def _send_keyed(
        self,
        cur: Cursor,
        request: ClaimRequest,
        asks: Sequence[QueueClaim],
        room: Mapping[str, int],
        claimed: tuple[object, ...],
        released: Mapping[str, int],
        buckets: Buckets | None = None,
    ) -> Callable[[], list[ClaimedRow]]:
        """A claim honouring concurrency keys; how to read the rows it leased (docs/claim.md, 4).

        Each queue's candidates are read and locked first (skipping full keys
        without locking them), then admitted under their keys' locks, all keys
        at once in name order, up to the request's limit in queue order; only
        the admitted are leased. A candidate over its key's free count is left
        ready, never leased and handed back. The lease is sent, not read: in a
        pipeline its rows come back with the COMMIT.
        """
        q = self._q
        counting = CountingCursor(cur, self._tx.stats)  # what the dialect sends, counted
        workflows = sorted(request.workflows)
        if len(asks) == 1 and buckets is None and self._dialect.claims_keyed_in_one:
            # One queue, no rate to charge: the whole claim is one statement (CLAIM_KEYED),
            # sent, not read, as a plain claim's (in a pipeline, with the COMMIT).
            ask = asks[0]
            statement = q.claim_keyed(
                workflows=workflows,
                queue=ask.name,
                limit=_queue_limit(request, ask, room),
                released=released,
                claimed=claimed,
            )
            return self._dialect.send_claim_keyed(counting, statement)
        candidates: list[KeyCandidate] = []
        queue_of: dict[str, str] = {}
        locked: dict[str, KeyRow] | None = None  # the keys' rows, when read with the candidates
        # One queue, where the names go as an array: its candidates and their keys, locked by
        # one statement (READY_KEYED_WITH_KEYS), one round trip less.
        with_keys = len(asks) == 1 and self._dialect.key_arrays
        for ask in asks:
            limit = _queue_limit(request, ask, room)
            if with_keys:
                statement = q.ready_keyed_with_keys(
                    workflows=workflows, queue=ask.name, limit=limit, released=sorted(released)
                )
                found, locked = split_keyed(
                    self._dialect.lock_candidates_and_keys(counting, statement)
                )
            else:
                ready = q.ready_keyed(workflows=workflows, queue=ask.name, limit=limit)
                rows = self._dialect.lock_candidates(counting, ready, q.still_ready)
                found = [KeyCandidate.from_row(row) for row in rows]
            for candidate in found:
                candidates.append(candidate)
                queue_of[candidate.id] = ask.name
        admitted = self.keys.admit(cur, candidates, released, limit=request.limit, locked=locked)
        if not admitted:
            return lambda: []
        leased = [c.id for c in candidates if c.id in admitted]
        if buckets is not None:
            for name in buckets.rate:
                taken = sum(1 for step_id in leased if queue_of[step_id] == name)
                self.limiters.charge(cur, buckets, name, taken)
        plan = q.claim_plan(workflows=workflows, queue=asks[0].name, limit=0, claimed=claimed)
        return self._dialect.send_lease_ids(counting, plan, leased)

    def _claimed(
        self, cur: Cursor, secret: str, rows: Sequence[ClaimedRow]
    ) -> list[ClaimedAttempt]:
        """The attempts a claim's rows describe, with their runs' payloads and their inputs."""
        if not rows:
            return []
        q = self._q
        steps = [ClaimedStep.from_row(row) for row in rows]
        run_ids = sorted({step.run_id for step in steps})
        # The claim returned the runs' columns too (where it could join them), or not at all.
        runs = {step.run.id: step.run for step in steps if step.run is not None}
        for chunk in chunks([r for r in run_ids if r not in runs]):
            for row in self._execute(cur, *q.claim_runs(chunk)).fetchall():
                run = ClaimedRun.from_row(row)
                runs[run.id] = run
        names = sorted({parent for step in steps for parent in step.parents})
        outputs: dict[tuple[str, str], bytes] = {}
        if names:
            for chunk in chunks(run_ids):
                sql, params = q.claim_inputs(chunk, names)
                for run_id, name, output in self._execute(cur, sql, params).fetchall():
                    outputs[(to_text(run_id), to_text(name))] = to_bytes(output) or b""
        claimed = []
        for step in steps:
            # Each attempt gets labels of its own (a step may change its context's): a row's
            # run is its own; a run read by claim_runs is shared by its steps.
            run = step.run or runs[step.run_id]
            labels = run.labels if run is step.run else dict(run.labels)
            headers = run.headers if run is step.run or not run.headers else dict(run.headers)
            claimed.append(
                ClaimedAttempt(
                    token=token(step.id, secret),
                    run_id=step.run_id,
                    workflow=run.workflow,
                    queue=run.queue,
                    step=step.name,
                    kind=step.kind,
                    attempt=step.attempt,
                    failures=step.failures,
                    reclaims=step.reclaims,
                    payload=run.payload,
                    # The parents that succeeded: a branch's wait timed out (Cap.WAIT_BRANCH).
                    inputs={
                        p: outputs[(step.run_id, p)]
                        for p in step.parents
                        if (step.run_id, p) in outputs
                    },
                    labels=labels,
                    headers=headers,
                    tenant=run.tenant,
                )
            )
        return claimed


def _queue_limit(request: ClaimRequest, ask: QueueClaim, room: Mapping[str, int]) -> int:
    """How many a claim of queue ``ask`` asks for (a keyed claim: the candidates it reads):
    the request's limit, within the queue's own limit and the room its global limit leaves."""
    limit = request.limit if ask.limit is None else min(ask.limit, request.limit)
    return min(limit, room[ask.name]) if ask.name in room else limit
