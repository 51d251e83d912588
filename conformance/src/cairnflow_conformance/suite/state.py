"""Durable step state: the journal (JOURNAL) and named locks with a time to live (LOCKS).

What a memoised function did is counted from
:class:`~cairnflow_conformance.traces.Traces` (files, so a call made by a
process that was killed afterwards still counts); what was recorded, and who
holds a lock until when, is read from the store. A crash is a worker process
killed with SIGKILL between the memo and the step's end, or while it holds a
lock. Expiry is tested on a fake clock in-process, and across processes on
the store's own clock with a generous time to live: every assertion is on
what the store holds, never on how long something took.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.clock import Fake
from cairnflow.store import Journaling, StoreFacets

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ..traces import Traces
from ._shared import TIMEOUT, claim_tokens, wait_until

__all__ = ["JournalTests", "LockTests"]

_GROUP = pytest.mark.xdist_group("cairnflow-conformance-processes")


def _payload(kit: Kit, **extra: Any) -> dict[str, Any]:
    return {"traces": str(kit.traces.directory), **extra}


def _journal(kit: Kit) -> Journaling:
    facet = StoreFacets.of(kit.store).journal
    assert facet is not None, "the store declares JOURNAL but StoreFacets found no journal"
    return facet


class JournalTests:
    """``Cap.JOURNAL``: ``ctx.memo`` and ``cf.Journal``, fenced by the attempt's lease."""

    @proves(Cap.JOURNAL)
    def test_a_memo_recorded_by_a_failed_attempt_is_returned_to_its_retry(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        quick = cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01))
        wf = cf.Workflow("kit-memo-retry", retry=quick)

        def charge(traces_dir: str, run_id: str, amount: int) -> dict[str, Any]:
            Traces(traces_dir).record("charge", run=run_id)
            return {"charged": amount, "as": (1, 2)}

        @wf.step
        def pay(ctx: cf.StepContext, data: Any) -> Any:
            charged = ctx.memo("charge", charge, ctx.payload["traces"], ctx.run_id, amount=5)
            if ctx.attempt == 1:
                raise RuntimeError("the step fails after its charge was recorded")
            return {"charged": charged, "attempt": ctx.attempt}

        client = kit.client(wf)
        ref = client.enqueue(wf, _payload(kit))
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert kit.traces.count("charge", run=ref.id) == 1, "the retry called the memo's fn again"
        assert kit.stored_step(ref, "pay").attempt == 2
        # What the retry got is what the first attempt recorded, as the codec reads it back.
        recorded = {"charged": 5, "as": [1, 2]}
        assert kit.stored_output(ref, "pay") == {"charged": recorded, "attempt": 2}
        stored = _journal(kit).read_journal(ref.id, "pay", "charge")
        assert stored is not None
        assert kit.codec.decode(stored) == recorded

    @proves(Cap.JOURNAL)
    def test_only_the_attempt_holding_the_lease_records_and_the_first_record_wins(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        journal = _journal(kit)
        fence = cf.Workflow("kit-memo-fence", steps=[cf.Step("a", lambda c, d: d)])
        client = kit.client(fence, start=False)  # the test claims by hand
        ref = client.enqueue("kit-memo-fence", 1)
        stale = claim_tokens(kit.store, "kit-memo-fence")[ref.id]
        assert kit.store.hand_back([stale], cf.clock.Real().now_ns()) == 1  # retaken later
        held = claim_tokens(kit.store, "kit-memo-fence")[ref.id]
        now = cf.clock.Real().now_ns()
        assert journal.record_journal(ref.id, "a", "m", b'"stale"', lease=stale, now=now) is None
        assert journal.read_journal(ref.id, "a", "m") is None, "a stale attempt recorded"
        assert journal.record_journal(ref.id, "a", "m", b'"first"', lease=held, now=now) == (
            b'"first"'
        )
        assert journal.record_journal(ref.id, "a", "m", b'"again"', lease=held, now=now) == (
            b'"first"'
        )
        assert journal.read_journal(ref.id, "a", "m") == b'"first"'
        # A cancelled run's attempt holds no lease any more: it records nothing either.
        assert client.cancel(ref) is True
        assert journal.record_journal(ref.id, "a", "n", b"1", lease=held, now=now) is None
        assert journal.read_journal(ref.id, "a", "n") is None

    @proves(Cap.JOURNAL)
    def test_a_standalone_journal_runs_fn_once_per_key_across_store_objects(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        calls: list[str] = []

        def fn(tag: str) -> str:
            calls.append(tag)
            return tag

        first, second = (cf.Journal(s) for s in kit.peer_stores(2))
        assert first.memo("kit-order-1", "charge", fn, "one") == "one"
        assert second.memo("kit-order-1", "charge", fn, "two") == "one"
        assert second.memo("kit-order-2", "charge", fn, "three") == "three"
        assert calls == ["one", "three"]
        small = cf.Journal(kit.store, payload_limit=16)
        with pytest.raises(cf.PayloadTooLarge):
            small.memo("kit-order-3", "charge", fn, "x" * 64)
        assert _journal(kit).read_journal("kit-order-3", "", "charge") is None
        with pytest.raises(cf.InvalidName):
            first.memo("kit-order-1", "", fn, "four")
        assert calls == ["one", "three", "x" * 64]

    @_GROUP
    @proves(Cap.JOURNAL, Cap.MULTI_PROCESS)
    def test_a_memo_recorded_before_the_worker_is_killed_is_not_called_again(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.memo(), start=False)
        ref = client.enqueue(workflows.MEMO, _payload(kit))
        doomed = kit.processes.spawn("kit-doomed", lease=1.0)
        wait_until(
            lambda: kit.traces.count("exec", run=ref.id, phase="memoised") == 1,
            timeout=TIMEOUT,
            what="the doomed worker to record the memo",
        )
        doomed.kill()  # between the memo and the step's end
        assert doomed.returncode == -signal.SIGKILL
        kit.processes.spawn("kit-survivor", lease=5.0)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        output = kit.stored_output(ref, "charge")
        assert (output["node"], output["attempt"]) == ("kit-survivor", 2)
        assert output["memo"]["charged_by"] == "kit-doomed"
        charges = kit.traces.read("charge", run=ref.id)
        assert [c["node"] for c in charges] == ["kit-doomed"], charges


class LockTests:
    """``Cap.LOCKS``: named locks with a time to live, across every client and process."""

    @proves(Cap.LOCKS)
    def test_a_lock_is_held_by_its_token_until_it_is_released(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        locks = cf.Locks(kit.store)
        client = kit.client(start=False)  # application code: a client never started
        token = locks.lock("kit-lock", 60)
        assert token is not None
        assert client.lock("kit-lock", 60) is None
        assert locks.lock("kit-lock", 60) is None
        assert client.unlock("kit-lock", "not-the-token") is False
        assert client.extend_lock("kit-lock", "not-the-token", 60) is False
        held = locks.holder("kit-lock")
        assert held is not None
        assert held.token == token
        assert held.expires_at > locks.now()
        assert locks.extend_lock("kit-lock", token, 120) is True
        extended = locks.holder("kit-lock")
        assert extended is not None
        assert extended.expires_at > held.expires_at
        assert locks.unlock("kit-lock", token) is True
        assert locks.unlock("kit-lock", token) is False
        assert locks.holder("kit-lock") is None
        again = client.lock("kit-lock", 60)
        assert again is not None
        assert again != token
        assert locks.extend_lock("kit-lock", token, 60) is False  # the old token holds nothing
        with pytest.raises(ValueError, match="lock ttl"):
            locks.lock("kit-other", 0)
        assert locks.holder("kit-other") is None

    @proves(Cap.LOCKS)
    def test_an_expired_lock_is_free_for_the_next_taker_and_lost_to_its_holder(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake()
        mine, theirs = (cf.Locks(s, clock=clock) for s in kit.peer_stores(2))
        token = mine.lock("kit-expiring", 10)
        assert token is not None
        clock.advance(9)
        assert theirs.lock("kit-expiring", 10) is None  # one second left
        clock.advance(1)  # expired: a lock never outlives its time to live
        assert mine.extend_lock("kit-expiring", token, 10) is False
        other = theirs.lock("kit-expiring", 10)
        assert other is not None
        assert mine.unlock("kit-expiring", token) is False  # cannot release the new holder's
        held = theirs.holder("kit-expiring")
        assert held is not None
        assert held.token == other
        assert held.taken_at == clock.now_ns()

    @proves(Cap.LOCKS)
    def test_takers_racing_for_a_free_or_expired_lock_are_won_by_exactly_one(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        clock = Fake()
        racers = [cf.Locks(s, clock=clock) for s in kit.peer_stores(4)]
        for round_ in range(3):  # a first take (no row), then takeovers of an expired row
            barrier = threading.Barrier(len(racers))
            won: list[str | None] = [None] * len(racers)

            def race(
                n: int, locks: cf.Locks, barrier: threading.Barrier, won: list[str | None]
            ) -> None:
                barrier.wait(TIMEOUT)
                won[n] = locks.lock("kit-raced", 5)

            threads = [
                threading.Thread(target=race, args=(n, locks, barrier, won))
                for n, locks in enumerate(racers)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT)
            winners = [token for token in won if token is not None]
            assert len(winners) == 1, f"round {round_}: {won}"
            held = racers[0].holder("kit-raced")
            assert held is not None
            assert held.token == winners[0]
            clock.advance(6)

    @_GROUP
    @proves(Cap.LOCKS, Cap.MULTI_PROCESS)
    def test_two_processes_racing_for_one_lock_are_won_by_exactly_one(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.locker(), start=False)
        refs = []
        for side in ("a", "b"):  # one run per process: each serves a queue of its own
            queue = f"kit-q-lock-{side}"
            kit.processes.spawn(f"kit-{side}", workers=1, queues=[cf.QueueConfig(queue)])
            refs.append(
                client.enqueue(workflows.LOCKER, _payload(kit, lock="kit-one", ttl=60), queue=queue)
            )
        wait_until(
            lambda: kit.traces.count("exec", phase="ready") == 2,
            timeout=TIMEOUT,
            what="both processes to be ready to take the lock",
        )
        kit.traces.flag("go")
        for ref in refs:
            info = client.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        outputs = [kit.stored_output(ref, "take") for ref in refs]
        assert {o["node"] for o in outputs} == {"kit-a", "kit-b"}, outputs
        winners = [o["token"] for o in outputs if o["token"] is not None]
        assert len(winners) == 1, outputs
        held = cf.Locks(kit.store).holder("kit-one")
        assert held is not None
        assert held.token == winners[0]

    @_GROUP
    @proves(Cap.LOCKS, Cap.MULTI_PROCESS)
    def test_a_lock_of_a_killed_process_is_kept_until_its_ttl_then_taken(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.locker(), start=False)
        ref = client.enqueue(workflows.LOCKER, _payload(kit, lock="kit-dead", ttl=5, hold=True))
        kit.traces.flag("go")
        doomed = kit.processes.spawn("kit-doomed")
        wait_until(
            lambda: kit.traces.count("lock", run=ref.id) == 1,
            timeout=TIMEOUT,
            what="the doomed worker to take the lock",
        )
        doomed.kill()  # its connections drop with it; the lock is a row, and stays
        assert doomed.returncode == -signal.SIGKILL
        token = kit.traces.read("lock", run=ref.id)[0]["token"]
        assert token is not None
        locks = cf.Locks(kit.store)
        dead = locks.holder("kit-dead")
        assert dead is not None
        assert dead.token == token, dead
        if locks.now() < dead.expires_at:  # unless the machine stalled past the TTL already
            assert locks.lock("kit-dead", 30) is None, "a lock was freed by its holder's crash"
        taken: list[str] = []

        def take() -> bool:
            time.sleep(0.2)  # a take is a write transaction: not every 10 ms
            got = locks.lock("kit-dead", 30)
            if got is not None:
                taken.append(got)
            return got is not None

        wait_until(take, timeout=5 + TIMEOUT, what="the dead holder's lock to expire")
        held = locks.holder("kit-dead")
        assert held is not None
        assert held.token == taken[0]
        assert held.taken_at >= dead.expires_at, "the lock was taken before its TTL ran out"
