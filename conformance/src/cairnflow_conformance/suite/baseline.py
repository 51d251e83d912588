"""What every store must do, whatever it declares: schema, identity, plain runs, fan-in, claims.

These tests prove no capability (``@proves()``), so they run on every store and
a failure fails the session whatever the store declares.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.drivers import check_spi_version
from cairnflow.store import (
    AttemptState,
    BatchOutcomes,
    ClaimRequest,
    Failed,
    Store,
    StoreFacets,
    StoreInfo,
    Succeeded,
    check_store,
)

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_tokens, enqueue_and_claim, wait_until

__all__ = ["BaselineTests"]


class BaselineTests:
    """Baseline behaviour of every store."""

    @proves()
    def test_migrate_applies_nothing_twice_and_the_schema_checks(self, cairnflow_kit: Kit) -> None:
        store = cairnflow_kit.store
        assert store.migrate() == [], "a second migrate() must apply nothing"
        store.check_schema()

    @proves()
    def test_an_unmigrated_namespace_is_refused_until_migrated(self, cairnflow_kit: Kit) -> None:
        fresh = cairnflow_kit.open_store(cairnflow_kit.fresh_namespace())
        try:
            fresh.check_schema()
        except cf.SchemaNotReady as error:
            refused: cf.SchemaNotReady | None = error
        else:
            refused = None
        if refused is not None:
            assert str(refused), "SchemaNotReady must say what is missing"
            wf = cf.Workflow("kit-unmigrated", steps=[cf.Step("a", lambda c, d: d)])
            client = cairnflow_kit.client(wf, start=False, store=fresh)
            with pytest.raises(cf.SchemaNotReady):
                client.start()
            applied = fresh.migrate()
            assert applied, "migrate() on a fresh namespace must apply (and return) versions"
            fresh.check_schema()
        else:
            # A store without a schema (memory://) must then have nothing to migrate.
            assert fresh.migrate() == []

    @proves()
    def test_the_store_describes_itself(self, cairnflow_kit: Kit) -> None:
        store = cairnflow_kit.store
        assert isinstance(store, Store)
        check_spi_version(store.spi_version, f"store {type(store).__qualname__}")
        assert isinstance(store.capabilities, frozenset)
        assert all(isinstance(c, cf.Cap) for c in store.capabilities)
        info = store.describe()
        assert isinstance(info, StoreInfo)
        for field in ("driver", "distribution", "version", "url"):
            value = getattr(info, field)
            assert isinstance(value, str), f"StoreInfo.{field} must be a str"
            assert value, f"StoreInfo.{field} must not be empty"
        assert info.durable == (cf.Cap.DURABLE in store.capabilities), (
            "StoreInfo.durable must say the same as declaring Cap.DURABLE"
        )
        assert isinstance(store.channel, str)
        assert store.channel

    @proves()
    def test_the_store_implements_every_facet_it_declares(self, cairnflow_kit: Kit) -> None:
        # Each declared capability is carried by a facet (cairnflow.store.FACETS) whose
        # methods the store has; check_store names each one that is missing.
        check_store(cairnflow_kit.store)

    @proves()
    def test_a_plain_run_succeeds(self, cairnflow_kit: Kit) -> None:
        ran: list[Any] = []
        wf = cf.Workflow("kit-plain", steps=[cf.Step("only", lambda c, d: ran.append(d))])
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-plain", {"n": 1, "text": "žluťoučký kůň"})
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert info.payload == {"n": 1, "text": "žluťoučký kůň"}
        assert ran == [{"n": 1, "text": "žluťoučký kůň"}]
        step = info.steps["only"]
        assert (step.status, step.attempts, step.failures) == (cf.StepStatus.SUCCEEDED, 1, 0)
        assert info.finished_at_ns is not None
        assert info.finished_at_ns >= info.created_at_ns

    @proves()
    def test_parents_finishing_at_once_make_the_child_ready_exactly_once(
        self, cairnflow_kit: Kit
    ) -> None:
        # Eight parents leave a barrier together and finish at the same moment
        # on eight workers: the join must become ready once, never zero times.
        width = 8
        barrier = threading.Barrier(width, timeout=TIMEOUT)
        joins: list[str] = []
        wf = cf.Workflow("kit-fan-in")
        wf.step(lambda c, d: d, name="root")
        for n in range(width):
            wf.step(lambda c, d: barrier.wait(), name=f"p{n}", after=["root"])
        wf.step(
            lambda c, d: joins.append(c.run_id), name="join", after=[f"p{n}" for n in range(width)]
        )
        client = cairnflow_kit.client(wf, workers=width)
        ref = client.enqueue("kit-fan-in", 1)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert joins == [ref.id]
        assert info.steps["join"].attempts == 1
        assert all(s.status is cf.StepStatus.SUCCEEDED for s in info.steps.values())

    @proves()
    def test_a_join_waits_for_its_slowest_parent(self, cairnflow_kit: Kit) -> None:
        # Parents that do not finish together: the join must stay blocked until the last
        # one succeeded, and then run once with every parent's output.
        slow_may_finish = threading.Event()
        wf = cf.Workflow("kit-staggered")
        wf.step(lambda c, d: "fast", name="fast")
        wf.step(lambda c, d: slow_may_finish.wait(TIMEOUT) and "slow", name="slow")
        wf.step(lambda c, d: d, name="join", after=["fast", "slow"])
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-staggered")
        wait_until(
            lambda: client.info(ref).steps["fast"].status is cf.StepStatus.SUCCEEDED,
            timeout=TIMEOUT,
            what="the fast parent",
        )
        # The fast parent's own transaction decided the join: still one parent to go.
        assert client.info(ref).steps["join"].status is cf.StepStatus.BLOCKED
        slow_may_finish.set()
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.result == {"fast": "fast", "slow": "slow"}
        assert info.steps["join"].attempts == 1

    @proves()
    def test_a_failed_step_fails_the_run_and_cancels_every_other_step(
        self, cairnflow_kit: Kit
    ) -> None:
        sibling_started = threading.Event()
        run_failed = threading.Event()
        sibling_returned = threading.Event()
        wf = cf.Workflow("kit-fails")

        def boom(ctx: cf.StepContext, data: Any) -> None:
            assert sibling_started.wait(TIMEOUT)
            raise ValueError("no such order")

        def sibling(ctx: cf.StepContext, data: Any) -> str:
            sibling_started.set()
            run_failed.wait(TIMEOUT)
            sibling_returned.set()
            return "too late"

        wf.step(boom, name="boom")
        wf.step(sibling, name="sibling")
        wf.step(lambda c, d: d, name="after", after=["boom"])
        # interrupt=False: the sibling returns normally after the run failed, so
        # its outcome is offered to the store, unless its client already learnt
        # of the cancellation at a renewal; either way it must not be written.
        client = cairnflow_kit.client(wf, interrupt=False)
        ref = client.enqueue("kit-fails")
        info = client.wait(ref, timeout=TIMEOUT)
        run_failed.set()
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert (info.error.type, info.error.step, info.error.attempt) == ("ValueError", "boom", 1)
        assert info.error.message == "no such order"
        assert info.steps["boom"].status is cf.StepStatus.FAILED
        assert info.steps["after"].status is cf.StepStatus.CANCELLED
        assert sibling_returned.wait(TIMEOUT)
        client.stop(timeout=TIMEOUT)  # the sibling's outcome has been offered to the store now
        stored = cairnflow_kit.stored_step(ref, "sibling")
        assert stored.status is cf.StepStatus.CANCELLED
        assert stored.output is None, "a cancelled step's late outcome must not be written"
        assert cairnflow_kit.stored(ref).state == cf.Status.FAILED.value

    @proves()
    def test_concurrent_claims_never_hand_out_one_attempt_twice(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-many", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        total = 120
        for n in range(total):
            client.enqueue("kit-many", n)
        claimed: list[str] = []
        errors: list[BaseException] = []
        lock = threading.Lock()
        peers = cairnflow_kit.peer_stores(6)
        start = threading.Barrier(len(peers), timeout=TIMEOUT)

        def claim(store: Store, node: str) -> None:
            try:
                start.wait()
                while True:
                    now = time.time_ns()
                    request = ClaimRequest(frozenset({"kit-many"}), 5, now, now + 60 * 10**9, node)
                    got = store.claim(request)
                    if not got:
                        return
                    with lock:
                        claimed.extend(f"{a.run_id}/{a.step}" for a in got)
            except BaseException as error:  # noqa: BLE001 - asserted on below, with the others
                errors.append(error)

        threads = [
            threading.Thread(target=claim, args=(store, f"kit-claimer-{n}"))
            for n, store in enumerate(peers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT * 2)
        assert not errors, errors
        assert len(claimed) == total, f"{len(claimed)} claims for {total} ready steps"
        assert len(set(claimed)) == total, "an attempt was handed to two claimers"

    @proves()
    def test_finish_many_fences_each_outcome_by_its_own_token(self, cairnflow_kit: Kit) -> None:
        # Through the batch-outcomes facet where the store has it (one transaction),
        # else the kernel default: either way each item is fenced alone, in order.
        store = cairnflow_kit.store
        finish_many = _outcomes(store).finish_many
        refs, first = enqueue_and_claim(cairnflow_kit, "kit-group", 3)
        assert store.hand_back([first[refs[1].id]], time.time_ns()) == 1
        second = claim_tokens(store, "kit-group")
        stale, fresh = first[refs[1].id], second[refs[1].id]
        failure = Failed(cf.ErrorInfo("ValueError", "no"), retry_at=None)
        results = finish_many(
            [
                (first[refs[0].id], Succeeded(b'"zero"')),
                (stale, Succeeded(b'"stale"')),
                (first[refs[2].id], failure),
            ],
            time.time_ns(),
        )
        assert [r.state for r in results] == [
            AttemptState.HELD,
            AttemptState.LOST,
            AttemptState.HELD,
        ]
        assert [r.run_status for r in results] == [cf.Status.SUCCEEDED, None, cf.Status.FAILED]
        assert cairnflow_kit.stored_output(refs[0], "a") == "zero"
        assert cairnflow_kit.stored_step(refs[1], "a").status is cf.StepStatus.RUNNING
        assert cairnflow_kit.stored_output(refs[1], "a") is None
        assert cairnflow_kit.stored(refs[2]).state == cf.Status.FAILED.value
        (late,) = finish_many([(fresh, Succeeded(b'"one"'))], time.time_ns())
        assert late.applied
        assert cairnflow_kit.stored_output(refs[1], "a") == "one"

    @proves()
    def test_finish_many_writes_every_success_of_a_batch_byte_for_byte(
        self, cairnflow_kit: Kit
    ) -> None:
        # The batch a busy client writes most: only successes, all still held. Stores
        # may write them in one statement; every output must come back as it went in,
        # whatever its bytes and its size, and each run must end.
        finish_many = _outcomes(cairnflow_kit.store).finish_many
        refs, token_of = enqueue_and_claim(cairnflow_kit, "kit-batch", 6)
        outputs = [b"", b"\x00\xff\xfe'\"\\;--", b"x" * 70_000, b"null", b"[1, 2]", b'"six"']
        results = finish_many(
            [(token_of[r.id], Succeeded(out)) for r, out in zip(refs, outputs, strict=True)],
            time.time_ns(),
        )
        assert [r.state for r in results] == [AttemptState.HELD] * len(refs)
        assert [r.run_status for r in results] == [cf.Status.SUCCEEDED] * len(refs)
        for ref, out in zip(refs, outputs, strict=True):
            assert cairnflow_kit.stored_step(ref, "a").output == out
            assert cairnflow_kit.stored(ref).state == cf.Status.SUCCEEDED.value

    @proves()
    def test_a_large_batch_of_successes_fences_each_by_its_own_token(
        self, cairnflow_kit: Kit
    ) -> None:
        # More successes than a store writes in one statement (the SQL store: 64 a
        # statement), the first one's lease gone: whatever statements carry them, what
        # held must be counted statement by statement. Two statements of 64 rows, one of
        # which changed 63, must not read as 128 changed (one cursor's last count, twice).
        store = cairnflow_kit.store
        finish_many = _outcomes(store).finish_many
        client = cairnflow_kit.client(
            cf.Workflow("kit-big-batch", steps=[cf.Step("a", lambda c, d: d)]), start=False
        )
        refs = [client.enqueue("kit-big-batch", n) for n in range(128)]
        now = time.time_ns()
        request = ClaimRequest(frozenset({"kit-big-batch"}), 128, now, now + 60 * 10**9, "kit")
        token_of = {a.run_id: a.token for a in store.claim(request)}
        assert set(token_of) == {r.id for r in refs}
        stale = token_of[refs[0].id]
        assert store.hand_back([stale], time.time_ns()) == 1
        (fresh,) = claim_tokens(store, "kit-big-batch").values()
        results = finish_many(
            [(token_of[r.id], Succeeded(b'"done"')) for r in refs], time.time_ns()
        )
        assert [r.state for r in results] == [AttemptState.LOST] + [AttemptState.HELD] * 127
        assert cairnflow_kit.stored_step(refs[0], "a").status is cf.StepStatus.RUNNING
        assert cairnflow_kit.stored_output(refs[0], "a") is None
        for ref in refs[1:]:
            assert cairnflow_kit.stored(ref).state == cf.Status.SUCCEEDED.value
        (late,) = finish_many([(fresh, Succeeded(b'"late"'))], time.time_ns())
        assert late.applied
        assert cairnflow_kit.stored_output(refs[0], "a") == "late"

    @proves()
    def test_finish_and_claim_claims_what_its_outcomes_made_ready(self, cairnflow_kit: Kit) -> None:
        # finish_and_claim is optional (the committer refills the slots a batch frees with
        # one commit): the claim runs after the outcomes, in their transaction, so it sees
        # the child a success made ready, with its parent's output as input; an outcome
        # whose lease is gone is fenced and changes nothing, and the claim still happens.
        store = cairnflow_kit.store
        finish_and_claim = _outcomes(store).finish_and_claim
        wf = cf.Workflow(
            "kit-refill",
            steps=[cf.Step("a", lambda c, d: d), cf.Step("b", lambda c, d: d, after=["a"])],
        )
        client = cairnflow_kit.client(wf, start=False)
        chained, stale_run = client.enqueue("kit-refill", 1), client.enqueue("kit-refill", 2)
        tokens = claim_tokens(store, "kit-refill")
        assert store.hand_back([tokens[stale_run.id]], time.time_ns()) == 1
        now = time.time_ns()
        request = ClaimRequest(frozenset({"kit-refill"}), 5, now, now + 60 * 10**9, "kit-node")
        results, claimed = finish_and_claim(
            [
                (tokens[chained.id], Succeeded(b'"from a"')),
                (tokens[stale_run.id], Succeeded(b'"stale"')),
            ],
            now,
            request,
        )
        assert [r.state for r in results] == [AttemptState.HELD, AttemptState.LOST]
        assert results[0].ready == 1
        by_run = {(a.run_id, a.step): a for a in claimed}
        assert set(by_run) == {(chained.id, "b"), (stale_run.id, "a")}
        assert by_run[(chained.id, "b")].inputs == {"a": b'"from a"'}
        assert cairnflow_kit.stored_output(stale_run, "a") is None
        child = by_run[(chained.id, "b")].token
        (last,), nothing = finish_and_claim([(child, Succeeded(b"2"))], now, None)
        assert last.run_status is cf.Status.SUCCEEDED
        assert nothing == []

    @proves()
    def test_a_stopping_client_hands_its_running_steps_back(self, cairnflow_kit: Kit) -> None:
        started = threading.Event()
        saw_stop = threading.Event()
        ran_on: list[str] = []
        wf = cf.Workflow("kit-handback")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            ran_on.append(ctx.node_id)
            if ctx.node_id == "kit-leaving":
                started.set()
                if ctx.cancel_event.wait(TIMEOUT):
                    saw_stop.set()
                return "from the stopped client"
            return "from the next client"

        leaving = cairnflow_kit.client(wf, node_id="kit-leaving", lease=60, interrupt=False)
        ref = leaving.enqueue("kit-handback")
        assert started.wait(TIMEOUT)
        leaving.stop()
        assert saw_stop.is_set()
        # Handed back: ready at once, not waiting out a 60 s lease.
        assert leaving.info(ref).steps["work"].status is cf.StepStatus.READY
        cairnflow_kit.client(wf, node_id="kit-next", lease=60)
        info = leaving.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert ran_on == ["kit-leaving", "kit-next"]
        assert info.steps["work"].attempts == 2
        assert cairnflow_kit.stored_output(ref, "work") == "from the next client"

    @proves()
    def test_unknown_runs_are_reported_as_such(self, cairnflow_kit: Kit) -> None:
        assert cairnflow_kit.store.get_run("run_kitnosuchrun") is None
        client = cairnflow_kit.client(start=False)
        with pytest.raises(cf.RunNotFound, match="run_kitnosuchrun"):
            client.info("run_kitnosuchrun")
        assert cairnflow_kit.run_count() == 0


def _outcomes(store: Store) -> BatchOutcomes:
    """How the engine writes outcomes on ``store``: its batch-outcomes facet, or the
    kernel default (one ``finish`` per outcome, then the claim)."""
    return StoreFacets.of(store).outcomes
