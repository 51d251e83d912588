"""Enqueue rules: IDEMPOTENCY (under a race), DELAYED_START, BATCH_ENQUEUE, PAYLOAD_LIMIT,
HEADERS, and ``create_runs`` sent again after an unknown commit outcome (every store)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, cast

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import NewRun, RunStream, StoreFacets

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_tokens

__all__ = [
    "BatchEnqueueTests",
    "DelayedStartTests",
    "HeadersTests",
    "IdempotencyTests",
    "PayloadLimitTests",
    "RetriedEnqueueTests",
]


def _echo(name: str = "kit-echo") -> cf.Workflow:
    return cf.Workflow(name, steps=[cf.Step("echo", lambda c, d: d)])


def _make(ctx: cf.StepContext, n: int) -> str:
    """A string of ``n`` characters (``n + 2`` bytes encoded); a short one after 50 ms of I/O."""
    if n < 100:
        time.sleep(0.05)
    return "x" * n


def _sized() -> cf.Workflow:
    """``kit-sized``: one step, :func:`_make`, retried on failure (a refused output must not be)."""
    retry = cf.RetryPolicy(max_attempts=3, backoff=cf.Backoff(initial=0.01, factor=1.0, max=0.01))
    return cf.Workflow("kit-sized", steps=[cf.Step("make", _make, retry=retry)])


def _beside(kit: Kit, big: int, limit: int) -> tuple[cf.RunInfo, list[cf.RunInfo]]:
    """A run making a ``big`` output and 7 small ones, all enqueued before a client with 8
    workers starts (so one claim takes them all), all finished; the client is stopped then,
    so that it takes none of the next call's runs."""
    client = kit.client(_sized(), payload_limit=limit, workers=8, start=False)
    refs = [client.enqueue("kit-sized", n) for n in (big, *[10] * 7)]
    client.start()
    infos = [client.wait(ref, timeout=TIMEOUT) for ref in refs]
    client.stop()
    return infos[0], infos[1:]


def _once(info: cf.RunInfo) -> tuple[int, int, int]:
    """``(attempts, failures, reclaims)`` of a run's one step, as the store recorded them."""
    step = info.steps["make"]
    return step.attempts, step.failures, step.reclaims


class IdempotencyTests:
    """``Cap.IDEMPOTENCY``: a key is held by at most one unfinished run of a workflow."""

    @proves(Cap.IDEMPOTENCY)
    def test_a_key_is_held_until_its_run_finishes(self, cairnflow_kit: Kit) -> None:
        gate = threading.Event()
        wf = cf.Workflow("kit-keyed")
        wf.step(lambda ctx, d: gate.wait(TIMEOUT), name="hold")
        client = cairnflow_kit.client(wf, _echo())
        first = client.enqueue("kit-keyed", None, key="order-1")
        with pytest.raises(cf.DuplicateRun, match="order-1") as caught:
            client.enqueue("kit-keyed", None, key="order-1")
        assert caught.value.run_id in (None, first.id)
        assert (caught.value.workflow, caught.value.key) == ("kit-keyed", "order-1")
        other = client.enqueue("kit-keyed", None, key="order-2")
        same_key_other_workflow = client.enqueue("kit-echo", None, key="order-1")
        gate.set()
        for ref in (first, other, same_key_other_workflow):
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert client.info(first).key == "order-1"
        again = client.enqueue("kit-keyed", None, key="order-1")
        assert again.id != first.id
        assert cairnflow_kit.run_count() == 4

    @proves(Cap.IDEMPOTENCY)
    def test_a_failed_run_releases_its_key(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-keyed-fail")
        wf.step(lambda ctx, d: 1 / 0, name="boom")
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-keyed-fail", key="k")
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        assert client.enqueue("kit-keyed-fail", key="k").id != ref.id

    @proves(Cap.IDEMPOTENCY)
    def test_a_race_of_concurrent_enqueuers_makes_exactly_one_run(self, cairnflow_kit: Kit) -> None:
        racers = 20
        # Separate store objects (connections) when the store shares state across them.
        stores = cairnflow_kit.peer_stores(racers)
        clients = [cairnflow_kit.client(_echo(), start=False, store=s) for s in stores]
        barrier = threading.Barrier(racers, timeout=TIMEOUT)
        won: list[cf.RunRef] = []
        lost: list[cf.DuplicateRun] = []
        other: list[BaseException] = []
        lock = threading.Lock()

        def enqueue(client: cf.Client, n: int) -> None:
            barrier.wait()
            try:
                ref = client.enqueue("kit-echo", n, key="the-key")
            except cf.DuplicateRun as error:
                with lock:
                    lost.append(error)
            except BaseException as error:  # noqa: BLE001 - asserted on below
                with lock:
                    other.append(error)
            else:
                with lock:
                    won.append(ref)

        threads = [
            threading.Thread(target=enqueue, args=(client, n)) for n, client in enumerate(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT * 2)
        assert not other, other
        assert len(won) == 1, f"{len(won)} runs won the key"
        assert len(lost) == racers - 1
        assert {e.run_id for e in lost} <= {won[0].id, None}
        assert cairnflow_kit.run_count() == 1


class DelayedStartTests:
    """``Cap.DELAYED_START``: a run enqueued with a delay starts once it is due."""

    @proves(Cap.DELAYED_START)
    def test_a_delayed_run_is_pending_until_the_clock_reaches_it(self, cairnflow_kit: Kit) -> None:
        clock = cf.clock.Fake()
        ran: list[int] = []
        wf = cf.Workflow("kit-later", steps=[cf.Step("a", lambda c, d: ran.append(d))])
        client = cairnflow_kit.client(wf, clock=clock)
        ref = client.enqueue("kit-later", 1, delay=timedelta(minutes=5))
        now_ref = client.enqueue("kit-later", 2)
        info = client.info(ref)
        assert info.status is cf.Status.PENDING
        assert info.run_at_ns == info.created_at_ns + 300 * 10**9
        # Due later: scheduled, out of the claim's way until advance_due promotes it.
        assert info.steps["a"].status is cf.StepStatus.SCHEDULED
        assert client.wait(now_ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        clock.advance(299)
        time.sleep(0.3)
        assert client.info(ref).status is cf.Status.PENDING
        assert ran == [2]
        clock.advance(1)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert ran == [2, 1]


class BatchEnqueueTests:
    """``Cap.BATCH_ENQUEUE``: several runs in one transaction, all or none."""

    @proves(Cap.BATCH_ENQUEUE)
    def test_a_batch_creates_every_run_in_order(self, cairnflow_kit: Kit) -> None:
        seen: list[int] = []
        wf = cf.Workflow("kit-batch", steps=[cf.Step("a", lambda c, d: seen.append(d))])
        client = cairnflow_kit.client(wf)
        refs = client.enqueue_many([cf.Job("kit-batch", n, labels={"n": str(n)}) for n in range(5)])
        assert len({r.id for r in refs}) == 5
        for n, ref in enumerate(refs):
            info = client.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED
            assert info.payload == n
            assert dict(info.labels) == {"n": str(n)}
        assert sorted(seen) == list(range(5))
        assert client.enqueue_many([]) == []

    @proves(Cap.BATCH_ENQUEUE)
    def test_runs_alike_and_unlike_in_one_batch_each_keep_their_own_values(
        self, cairnflow_kit: Kit
    ) -> None:
        # A store may send what every row of a batch shares once (the Postgres driver folds
        # such a column into one parameter). Runs alike in all but their ids, then runs of
        # two workflows of other shapes, payloads and labels, interleaved: each run and each
        # step row must keep its own values. Every step returns what it was given, its
        # parents' outputs with it, so a chain's last output shows the whole chain ran in order.
        def record(ctx: cf.StepContext, data: Any) -> list[Any]:
            return [ctx.workflow, ctx.step, ctx.payload, dict(ctx.labels), dict(ctx.parents)]

        one = cf.Workflow("kit-batch-one", steps=[cf.Step("only", record)])
        chain = cf.Workflow(
            "kit-batch-chain",
            steps=[
                cf.Step("a", record),
                cf.Step("b", record, after=["a"]),
                cf.Step("c", record, after=["b"]),
            ],
        )
        client = cairnflow_kit.client(one, chain)
        alike = client.enqueue_many([cf.Job("kit-batch-one", {"same": 1}) for _ in range(4)])
        unlike = client.enqueue_many(
            [
                cf.Job("kit-batch-chain", n, labels={"n": str(n)})
                if n % 2
                else cf.Job("kit-batch-one", n)
                for n in range(6)
            ]
        )
        assert len({ref.id for ref in [*alike, *unlike]}) == 10
        for ref in alike:
            info = client.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info
            assert (info.workflow, info.payload, dict(info.labels)) == (
                "kit-batch-one",
                {"same": 1},
                {},
            )
            assert info.steps["only"].output == ["kit-batch-one", "only", {"same": 1}, {}, {}]
            assert set(info.steps) == {"only"}
        for n, ref in enumerate(unlike):
            info = client.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info
            assert info.payload == n
            if n % 2:
                labels = {"n": str(n)}
                a = ["kit-batch-chain", "a", n, labels, {}]
                b = ["kit-batch-chain", "b", n, labels, {"a": a}]
                c = ["kit-batch-chain", "c", n, labels, {"b": b}]
                assert (info.workflow, dict(info.labels)) == ("kit-batch-chain", labels)
                assert {name: step.output for name, step in info.steps.items()} == {
                    "a": a,
                    "b": b,
                    "c": c,
                }
            else:
                assert (info.workflow, dict(info.labels)) == ("kit-batch-one", {})
                assert {name: step.output for name, step in info.steps.items()} == {
                    "only": ["kit-batch-one", "only", n, {}, {}]
                }

    @proves(Cap.BATCH_ENQUEUE, requires=[Cap.IDEMPOTENCY])
    def test_a_batch_keeps_every_text_exactly(self, cairnflow_kit: Kit) -> None:
        # What a store that writes a batch as array literals or multi-row VALUES must quote:
        # quotes, backslashes, braces, commas, the word NULL, empty strings, non-ASCII text.
        texts = ['"', "\\", '\\"', "{a,b}", "NULL", "", " x ", "é", "\u2603", "a'b", "\\x00"]
        client = cairnflow_kit.client(_echo(), start=False)
        jobs = [
            cf.Job(
                "kit-echo",
                {"text": text, "n": n},
                key=f"{text}|{n}",
                labels={"text": text or "-"},
            )
            for n, text in enumerate(texts)
        ]
        refs = client.enqueue_many(jobs)
        for n, (ref, text) in enumerate(zip(refs, texts, strict=True)):
            info = client.info(ref)
            assert info.payload == {"text": text, "n": n}, (text, info.payload)
            assert dict(info.labels) == {"text": text or "-"}, (text, info.labels)
        # The keys were stored as given: each refuses its own text again.
        for n, text in enumerate(texts):
            with pytest.raises(cf.DuplicateRun):
                client.enqueue("kit-echo", None, key=f"{text}|{n}")

    @proves(Cap.BATCH_ENQUEUE, requires=[Cap.IDEMPOTENCY])
    def test_a_batch_with_a_conflict_writes_nothing(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client(_echo(), start=False)
        client.enqueue("kit-echo", 0, key="taken")
        with pytest.raises(cf.DuplicateRun):
            client.enqueue_many(
                [
                    cf.Job("kit-echo", 1, key="a"),
                    cf.Job("kit-echo", 2),
                    cf.Job("kit-echo", 3, key="taken"),
                ]
            )
        with pytest.raises(cf.DuplicateRun):
            client.enqueue_many([cf.Job("kit-echo", 1, key="b"), cf.Job("kit-echo", 2, key="b")])
        assert cairnflow_kit.run_count() == 1
        # Nothing of the refused batches holds a key: "a" and "b" are free.
        refs = client.enqueue_many([cf.Job("kit-echo", 1, key="a"), cf.Job("kit-echo", 2, key="b")])
        assert len(refs) == 2
        assert cairnflow_kit.run_count() == 3

    @proves(Cap.BATCH_ENQUEUE, requires=[Cap.IDEMPOTENCY, Cap.RUN_QUERY, Cap.LABEL_PREFIX])
    def test_a_large_batch_refused_by_one_key_writes_none_of_its_rows(
        self, cairnflow_kit: Kit
    ) -> None:
        # A batch a SQL store sends as one statement per table (its runs, their steps, their
        # labels): one key, last in the batch, refuses every row of every table.
        wf = cf.Workflow("kit-pair")
        wf.step(lambda c, d: d, name="first")
        wf.step(lambda c, d: d, name="second", after=["first"])
        client = cairnflow_kit.client(wf, start=False)
        held = client.enqueue("kit-pair", -1, key="held")  # unfinished: nothing runs it
        jobs = [cf.Job("kit-pair", n, key=f"k{n}", labels={"batch": f"b{n}"}) for n in range(300)]
        with pytest.raises(cf.DuplicateRun) as caught:
            client.enqueue_many([*jobs, cf.Job("kit-pair", 300, key="held")])
        assert caught.value.run_id in (None, held.id)
        with pytest.raises(cf.DuplicateRun):  # a key given twice in the batch
            client.enqueue_many([*jobs, cf.Job("kit-pair", 300, key="k0")])
        assert cairnflow_kit.run_count() == 1
        assert client.runs(label_prefix=("batch", "b"), count=True).total == 0
        assert [step.status for step in cairnflow_kit.stored(held).steps] == [
            cf.StepStatus.READY,
            cf.StepStatus.BLOCKED,
        ]
        # Every key of the refused batches is free, and the batch is written whole now.
        refs = client.enqueue_many(jobs)
        assert len({ref.id for ref in refs}) == 300
        assert cairnflow_kit.run_count() == 301
        assert client.runs(label_prefix=("batch", "b"), count=True).total == 300
        assert len(cairnflow_kit.stored(refs[-1]).steps) == 2

    @proves(Cap.BATCH_ENQUEUE)
    def test_a_batch_whose_late_run_cannot_be_made_writes_nothing(self, cairnflow_kit: Kit) -> None:
        # The engine makes a batch's runs as the store writes them (cairnflow.store.RunStream):
        # a store that pipelines has sent the first chunks before a late run is made. A run
        # that cannot be made (a payload its codec refuses, a workflow not registered) far
        # into a large batch must leave nothing of the batch written, and the store usable.
        client = cairnflow_kit.client(_echo(), start=False)
        jobs = [cf.Job("kit-echo", n, labels={"n": str(n)}) for n in range(300)]
        with pytest.raises(TypeError, match="cannot be encoded"):
            client.enqueue_many([*jobs[:280], cf.Job("kit-echo", object()), *jobs[280:]])
        with pytest.raises(cf.UnknownWorkflow):
            client.enqueue_many([*jobs, cf.Job("kit-not-registered", 0)])
        assert cairnflow_kit.run_count() == 0, "a refused batch wrote some of its runs"
        refs = client.enqueue_many(jobs)
        assert cairnflow_kit.run_count() == 300
        for n in (0, 150, 299):
            info = client.info(refs[n])
            assert (info.payload, dict(info.labels)) == (n, {"n": str(n)})


class HeadersTests:
    """``Cap.HEADERS``: headers kept with a run, read by every step and by ``info()``."""

    @proves(Cap.HEADERS)
    def test_headers_reach_every_step_and_are_shown(self, cairnflow_kit: Kit) -> None:
        seen: list[tuple[str, int, dict[str, str]]] = []

        def look(ctx: cf.StepContext, data: object) -> object:
            seen.append((ctx.step, ctx.attempt, dict(ctx.headers)))
            if ctx.step == "b" and ctx.attempt == 1:
                raise RuntimeError("once more: a retry reads the headers again")
            return data

        retry = cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01, max=0.01))
        wf = cf.Workflow("kit-headers")
        wf.step(look, name="a")
        wf.step(look, name="b", after=["a"], retry=retry)

        def tenant(workflow: str, headers: dict[str, str]) -> None:
            headers["tenant"] = f"acme/{workflow}"
            headers["traceparent"] = "from-the-hook"

        client = cairnflow_kit.client(wf, enqueue_hooks=[tenant])
        given = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        ref = client.enqueue("kit-headers", 1, headers=given)
        plain = client.enqueue("kit-headers", 2)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        expected = {"tenant": "acme/kit-headers", **given}  # the caller's win over the hook's
        assert dict(info.headers) == expected
        assert client.wait(plain, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        hooked = {"tenant": "acme/kit-headers", "traceparent": "from-the-hook"}
        assert dict(client.info(plain).headers) == hooked
        mine = [(step, attempt) for step, attempt, headers in seen if headers == expected]
        assert sorted(mine) == [("a", 1), ("b", 1), ("b", 2)]
        # A client without hooks stores none, and reads what another client stored.
        bare = cairnflow_kit.client(_echo(), start=False)
        assert dict(bare.info(ref).headers) == expected
        none = bare.enqueue("kit-echo", 3)
        assert dict(bare.info(none).headers) == {}

    @proves(Cap.HEADERS)
    def test_bad_headers_are_refused_before_any_write(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client(_echo(), start=False)
        for bad in ({"": "x"}, {"a b": "x"}, {"k": 1}, {"k": "\x00"}, {"k": "x" * 1025}):
            with pytest.raises(cf.InvalidName):
                client.enqueue("kit-echo", 1, headers=cast(Any, bad))  # a wrong type on purpose
        with pytest.raises(cf.InvalidName):
            client.enqueue_many([cf.Job("kit-echo", 1), cf.Job("kit-echo", 2, headers={"?": ""})])
        assert cairnflow_kit.run_count() == 0


class PayloadLimitTests:
    """``Cap.PAYLOAD_LIMIT``: payloads over the configured size are refused before any write."""

    @proves(Cap.PAYLOAD_LIMIT)
    def test_an_oversized_payload_is_refused_before_any_write(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client(_echo(), payload_limit=64, start=False)
        client.enqueue("kit-echo", "x" * 10)
        with pytest.raises(cf.PayloadTooLarge, match="102 bytes encoded, over the limit of 64"):
            client.enqueue("kit-echo", "x" * 100)
        assert cairnflow_kit.run_count() == 1

    @proves(Cap.PAYLOAD_LIMIT, requires=[Cap.BATCH_ENQUEUE])
    def test_one_oversized_payload_refuses_the_whole_batch(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client(_echo(), payload_limit=64, start=False)
        with pytest.raises(cf.PayloadTooLarge):
            client.enqueue_many([cf.Job("kit-echo", 1), cf.Job("kit-echo", "y" * 100)])
        assert cairnflow_kit.run_count() == 0

    @proves(Cap.PAYLOAD_LIMIT, requires=[Cap.RESULT])
    def test_an_oversized_output_fails_its_step_at_once_while_the_runs_beside_it_flow(
        self, cairnflow_kit: Kit
    ) -> None:
        limit = 64 * 1024
        # First an output just under the limit, written and read back beside the same small runs.
        kept, baseline = _beside(cairnflow_kit, limit - 1024, limit)
        assert kept.status is cf.Status.SUCCEEDED, kept.error
        assert kept.result == "x" * (limit - 1024)
        assert all(info.status is cf.Status.SUCCEEDED for info in baseline)

        refused, others = _beside(cairnflow_kit, 2 * limit, limit)
        assert refused.status is cf.Status.FAILED
        step = refused.steps["make"]
        # Failed by the attempt that made it, once: the same output would be refused again,
        # so it is not retried, and it is never retaken after its lease.
        assert _once(refused) == (1, 1, 0)
        assert step.error is not None
        assert step.error.type == "PayloadTooLarge"
        assert step.error.message == (
            f"the output of step 'make' is {2 * limit + 2} bytes encoded, "
            f"over the limit of {limit} bytes"
        )
        # The runs beside it ran while it was refused and were written as they ended: each
        # succeeded on its first attempt, none retaken after its lease (an outcome held up by
        # the refused one, or lost with it, would show as a reclaim or a second attempt).
        ended = refused.finished_at_ns
        assert ended is not None
        assert any((info.steps["make"].started_at_ns or ended) < ended for info in others)
        assert all(info.status is cf.Status.SUCCEEDED for info in others)
        assert [_once(info) for info in others] == [(1, 0, 0)] * len(others)
        assert [info.result for info in others] == ["x" * 10] * len(others)

    @proves(Cap.PAYLOAD_LIMIT, requires=[Cap.SIGNAL])
    def test_an_oversized_signal_payload_is_refused(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-gated")
        wf.wait("gate", signal="go")
        client = cairnflow_kit.client(wf, payload_limit=64, start=False)
        ref = client.enqueue("kit-gated")
        with pytest.raises(cf.PayloadTooLarge):
            client.signal(ref, "go", "z" * 100)
        assert client.signal(ref, "go", "small") is cf.SignalResult.STORED


class RetriedEnqueueTests:
    """``create_runs`` sent again with the same runs, as a client does when a commit's outcome
    was lost: runs whose ids exist landed before, and are returned with nothing written.

    At the SPI, so nothing but the store decides: the same :class:`NewRun` objects
    (same ids) are given twice, and the kit counts what the store holds after.
    """

    @staticmethod
    def _new_runs(kit: Kit, jobs: Sequence[cf.Job]) -> tuple[cf.Client, list[NewRun]]:
        workflow = cf.Workflow("kit-twice")
        workflow.step(lambda c, d: d, name="first")
        workflow.step(lambda c, d: d, name="second", after=["first"])
        client = kit.client(workflow, start=False)
        now = time.time_ns()
        return client, [client._new_run(job, now) for job in jobs]

    @classmethod
    def _batch(cls, kit: Kit, count: int) -> tuple[list[NewRun], list[str]]:
        """``count`` new runs of ``kit-twice`` and their ids."""
        _, batch = cls._new_runs(kit, [cf.Job("kit-twice", n) for n in range(count)])
        return batch, [new.id for new in batch]

    @staticmethod
    def _step_count(kit: Kit, run_ids: Sequence[str]) -> int:
        return sum(len(kit.stored(run_id).steps) for run_id in run_ids)

    @proves()
    def test_a_run_whose_id_exists_is_returned_and_not_written_again(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        _, (new,) = self._new_runs(kit, [cf.Job("kit-twice", 1)])
        assert kit.store.create_runs([new]) == [new.id]
        tokens = claim_tokens(kit.store, "kit-twice")  # the run moves on: "first" is running
        assert set(tokens) == {new.id}
        assert kit.store.create_runs([new]) == [new.id], "the retry must return the landed run"
        assert kit.run_count() == 1, "the retry wrote a second run"
        stored = kit.stored(new.id)
        assert [(s.name, s.status) for s in stored.steps] == [
            ("first", cf.StepStatus.RUNNING),
            ("second", cf.StepStatus.BLOCKED),
        ], "the retry wrote over the landed run's steps"
        assert stored.steps[0].attempt == 1

    @proves(Cap.BATCH_ENQUEUE)
    def test_a_batch_whose_ids_exist_is_returned_and_not_written_again(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        batch, ids = self._batch(kit, 3)
        assert kit.store.create_runs(batch) == ids
        assert kit.store.create_runs(batch) == ids, "the retry must return the landed batch"
        assert kit.run_count() == 3, "the retry wrote runs again"
        assert self._step_count(kit, ids) == 6
        # All or none: a call of which some ids exist and others do not is no retry of a
        # landed call. It is refused, and its new run is not written either.
        _, (fresh,) = self._new_runs(kit, [cf.Job("kit-twice", 3)])
        with pytest.raises(cf.CairnError):
            kit.store.create_runs([batch[0], fresh])
        assert kit.run_count() == 3, "a call with an existing id wrote its other runs"
        assert kit.store.get_run(fresh.id) is None

    @proves(Cap.BATCH_ENQUEUE)
    def test_a_streamed_batch_whose_ids_exist_is_returned_and_not_written_again(
        self, cairnflow_kit: Kit
    ) -> None:
        # The engine's batch write (StoreFacets.enqueue: the store's StreamedEnqueue, or
        # create_runs of every run): a batch large enough to go as several chunks, sent
        # twice with the same runs, as a client does after a lost commit.
        kit = cairnflow_kit
        batch, ids = self._batch(kit, 250)
        made: list[int] = []

        def make(at: int) -> NewRun:
            made.append(at)
            return batch[at]

        runs = RunStream(ids, make)
        enqueue = StoreFacets.of(kit.store).enqueue
        assert enqueue.create_runs_streamed(runs) == ids
        assert enqueue.create_runs_streamed(runs) == ids, "the retry must return the batch"
        assert kit.run_count() == 250, "the retry wrote runs again"
        assert self._step_count(kit, ids[::50]) == 10
        assert sorted(made) == list(range(250)), "the stream kept what it made: each run once"

    @proves(Cap.BATCH_ENQUEUE)
    def test_a_streamed_batch_whose_run_cannot_be_made_writes_nothing(
        self, cairnflow_kit: Kit
    ) -> None:
        # Making a run raises the client's error (RunStream): the store writes nothing of
        # the batch, raises that very error, and writes the next batch as usual.
        kit = cairnflow_kit
        batch, ids = self._batch(kit, 250)
        refusal = LookupError("kit: run 230 of the batch cannot be made")

        def make(at: int) -> NewRun:
            if at == 230:
                raise refusal
            return batch[at]

        enqueue = StoreFacets.of(kit.store).enqueue
        with pytest.raises(LookupError) as caught:
            enqueue.create_runs_streamed(RunStream(ids, make))
        assert caught.value is refusal, "the error of the run was not raised as it came"
        assert kit.run_count() == 0, "a batch whose run could not be made wrote some runs"
        assert all(kit.store.get_run(run_id) is None for run_id in ids[::25])
        assert enqueue.create_runs_streamed(RunStream(ids, batch.__getitem__)) == ids
        assert kit.run_count() == 250

    @proves(Cap.IDEMPOTENCY)
    def test_a_keyed_run_whose_id_exists_is_returned_and_its_key_stays_guarded(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        _, (keyed, other) = self._new_runs(
            kit, [cf.Job("kit-twice", 1, key="k1"), cf.Job("kit-twice", 2, key="k1")]
        )
        assert kit.store.create_runs([keyed]) == [keyed.id]
        # The key is held by the very run being created: its earlier attempt landed.
        assert kit.store.create_runs([keyed]) == [keyed.id], "the retry must return the run"
        assert kit.run_count() == 1, "the retry wrote a second run"
        assert self._step_count(kit, [keyed.id]) == 2
        # Another run (another id) with the key is still refused, naming the holder.
        with pytest.raises(cf.DuplicateRun) as caught:
            kit.store.create_runs([other])
        assert caught.value.run_id in (None, keyed.id)
        assert kit.run_count() == 1
