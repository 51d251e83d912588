"""Reading runs back: results (RESULT), listings (RUN_QUERY), nodes (NODE_IDENTITY), CLOSURE."""

from __future__ import annotations

import functools
import operator
import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import Succeeded

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, claim_all, diamond

__all__ = ["ClosureTests", "NodeIdentityTests", "ResultTests", "RunQueryTests"]


class ResultTests:
    """``Cap.RESULT``: outputs and results are read back from the store."""

    @proves(Cap.RESULT)
    def test_data_flows_along_the_dag_and_the_result_is_the_last_output(
        self, cairnflow_kit: Kit
    ) -> None:
        client = cairnflow_kit.client(diamond())
        ref = client.enqueue("kit-diamond", 1)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.result == {"sum": 220, "payload": 1}
        assert client.result(ref) == {"sum": 220, "payload": 1}
        assert {n: s.output for n, s in info.steps.items()} == {
            "start": 2,
            "left": 20,
            "right": 200,
            "join": {"sum": 220, "payload": 1},
        }
        assert all(s.attempts == 1 and s.failures == 0 for s in info.steps.values())

    @proves(Cap.RESULT)
    def test_a_join_is_claimed_only_after_its_last_parent_with_every_input(
        self, cairnflow_kit: Kit
    ) -> None:
        # At the SPI, each parent finished in its own transaction: after the first, the join
        # is still blocked and no claim returns it; after the last, a claim returns it with
        # both parents' outputs as its inputs (the fan-in counter, not "one parent left").
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-join-spi")
        wf.step(lambda c, d: d, name="a")
        wf.step(lambda c, d: d, name="b")
        wf.step(lambda c, d: d, name="join", after=["a", "b"])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-join-spi")
        parents = {a.step: a.token for a in claim_all(store, "kit-join-spi")}
        assert set(parents) == {"a", "b"}
        first = store.finish(parents["a"], Succeeded(b'"from a"'), time.time_ns())
        assert (first.applied, first.ready) == (True, 0), first
        assert cairnflow_kit.stored_step(ref, "join").status is cf.StepStatus.BLOCKED
        assert claim_all(store, "kit-join-spi") == [], "the join was released early"
        last = store.finish(parents["b"], Succeeded(b'"from b"'), time.time_ns())
        assert (last.applied, last.ready) == (True, 1), last
        (join,) = claim_all(store, "kit-join-spi")
        assert (join.step, join.inputs) == ("join", {"a": b'"from a"', "b": b'"from b"'})

    @proves(Cap.RESULT)
    def test_several_last_steps_make_a_dict_result(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-forks")
        wf.step(lambda ctx, d: d, name="a")
        wf.step(lambda ctx, d: f"b:{d}", name="b", after=["a"])
        wf.step(lambda ctx, d: f"c:{d}", name="c", after=["a"])
        client = cairnflow_kit.client(wf)
        result = client.result(client.enqueue("kit-forks", 7), timeout=TIMEOUT)
        assert result == {"b": "b:7", "c": "c:7"}

    @proves(Cap.RESULT)
    def test_outputs_are_read_back_exactly_by_another_client(self, cairnflow_kit: Kit) -> None:
        value = {
            "text": "žluťoučký kůň 🐢 \u2028 'quotes' \"and\" \\ backslashes",
            "big_int": 2**53 + 1,
            "float": 0.1,
            "nested": [1, {"a": None, "b": [True, False]}, []],
            "bulk": "x" * 200_000,
        }
        wf = cf.Workflow("kit-echo", steps=[cf.Step("echo", lambda c, d: d)])
        writer = cairnflow_kit.client(wf)
        ref = writer.enqueue("kit-echo", value)
        writer.wait(ref, timeout=TIMEOUT)
        reader_store = cairnflow_kit.peer_stores(1)[0]
        reader = cairnflow_kit.client(wf, start=False, store=reader_store)
        info = reader.info(ref)
        assert info.status is cf.Status.SUCCEEDED
        assert info.payload == value
        assert info.result == value
        assert reader.result(ref, timeout=TIMEOUT) == value

    @proves(Cap.RESULT)
    def test_a_nul_in_an_output_and_a_message_utf8_cannot_hold_are_kept_as_they_are(
        self, cairnflow_kit: Kit
    ) -> None:
        # A NUL is a byte of an output like any other (a SQL store keeps outputs as bytes,
        # never as text). A message made of undecodable bytes holds a lone surrogate, which
        # no database stores as text: the failure must still be recorded, as it was.
        message = b"bad \xff byte".decode("utf-8", "surrogateescape")
        wf = cf.Workflow("kit-odd")
        wf.step(lambda ctx, d: "a\x00b", name="nul")
        undecodable = cf.Workflow("kit-undecodable")

        @undecodable.step(retry=cf.NO_RETRY)
        def parse(ctx: cf.StepContext, data: Any) -> None:
            raise ValueError(message)

        client = cairnflow_kit.client(wf, undecodable)
        kept = client.wait(client.enqueue("kit-odd", "p\x00q"), timeout=TIMEOUT)
        assert kept.status is cf.Status.SUCCEEDED, kept.error
        assert (kept.payload, kept.result) == ("p\x00q", "a\x00b")
        failed = client.wait(client.enqueue("kit-undecodable"), timeout=TIMEOUT)
        step = failed.steps["parse"]
        assert step.error is not None
        assert (step.error.type, step.error.message) == ("ValueError", message)
        assert (step.attempts, step.failures) == (1, 1)

    @proves(Cap.RESULT)
    def test_the_result_of_a_failed_run_raises_run_failed_with_the_error(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-boom")
        wf.step(lambda ctx, d: 1 / 0, name="divide")
        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-boom")
        with pytest.raises(cf.RunFailed, match=r"ended failed: ZeroDivisionError in step 'divide'"):
            client.result(ref, timeout=TIMEOUT)
        info = client.info(ref)
        assert info.result is None
        assert info.error is not None
        assert info.error.traceback is not None
        assert "1 / 0" in info.error.traceback


class RunQueryTests:
    """``Cap.RUN_QUERY``: runs are listed and filtered by workflow, status and labels."""

    @proves(Cap.RUN_QUERY)
    def test_runs_are_listed_newest_first_filtered_and_paged(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-listed")

        @wf.step
        def check(ctx: cf.StepContext, n: int) -> int:
            if n % 3 == 0:
                raise cf.Permanent("multiple of three")
            return n

        other_wf = cf.Workflow("kit-other", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, other_wf)
        refs = [
            client.enqueue("kit-listed", n, labels={"parity": "even" if n % 2 == 0 else "odd"})
            for n in range(1, 10)
        ]
        other = client.enqueue("kit-other", 1, labels={"parity": "even", "team": "b"})
        for ref in [*refs, other]:
            client.wait(ref, timeout=TIMEOUT)
        everything = client.runs(limit=100)
        assert [r.id for r in everything.runs] == [other.id, *[r.id for r in reversed(refs)]]
        assert everything.cursor is None
        failed = client.runs(workflow="kit-listed", status="failed")
        assert sorted(r.id for r in failed.runs) == sorted(refs[i].id for i in (2, 5, 8))
        assert all(
            r.error is not None and r.error.message == "multiple of three" for r in failed.runs
        )
        succeeded = client.runs(status=[cf.Status.SUCCEEDED])
        assert len(succeeded.runs) == 7
        even = client.runs(labels={"parity": "even"})
        assert sorted(r.id for r in even.runs) == sorted(
            [other.id, *(refs[i].id for i in (1, 3, 5, 7))]
        )
        assert [r.id for r in client.runs(labels={"parity": "even", "team": "b"}).runs] == [
            other.id
        ]
        assert client.runs(labels={"parity": "none"}).runs == ()
        first = everything.runs[0]
        assert (first.workflow, first.queue, first.status) == ("kit-other", "default", "succeeded")
        assert dict(first.labels) == {"parity": "even", "team": "b"}
        assert {k: v for k, v in first.step_counts.items() if v} == {"succeeded": 1}
        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            page = client.runs(workflow="kit-listed", limit=4, cursor=cursor)
            pages.append([r.id for r in page.runs])
            cursor = page.cursor
            if cursor is None:
                break
        assert [len(p) for p in pages] == [4, 4, 1]
        assert functools.reduce(operator.iadd, pages, []) == [r.id for r in reversed(refs)]

    @proves(Cap.RUN_QUERY)
    def test_unfinished_runs_are_listed_by_their_status(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-unstarted", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)  # nothing runs them
        refs = [client.enqueue("kit-unstarted", n) for n in range(3)]
        queued = client.runs(status="queued")
        assert sorted(r.id for r in queued.runs) == sorted(r.id for r in refs)
        assert all(r.finished_at_ns is None for r in queued.runs)
        assert client.runs(status="succeeded").runs == ()
        assert client.runs(workflow="kit-nothing").runs == ()


class NodeIdentityTests:
    """``Cap.NODE_IDENTITY``: each attempt records the node that ran it."""

    @proves(Cap.NODE_IDENTITY)
    def test_each_attempt_records_the_node_that_ran_it(self, cairnflow_kit: Kit) -> None:
        started = threading.Event()
        seen: list[tuple[str, str]] = []
        wf = cf.Workflow("kit-nodes")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> None:
            seen.append((ctx.step, ctx.node_id))
            if ctx.node_id == "kit-node-a":
                started.set()
                ctx.cancel_event.wait(TIMEOUT)  # until node a stops and hands it back

        wf.step(lambda ctx, d: seen.append((ctx.step, ctx.node_id)), name="after", after=[work])
        a = cairnflow_kit.client(wf, node_id="kit-node-a", lease=60, interrupt=False)
        ref = a.enqueue("kit-nodes")
        assert started.wait(TIMEOUT)
        running = a.info(ref).steps["work"]
        assert (running.status, running.node) == (cf.StepStatus.RUNNING, "kit-node-a")
        a.stop()
        b = cairnflow_kit.client(wf, node_id="kit-node-b")
        info = b.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert info.steps["work"].node == "kit-node-b"
        assert info.steps["work"].attempts == 2
        assert info.steps["after"].node == "kit-node-b"
        assert seen == [("work", "kit-node-a"), ("work", "kit-node-b"), ("after", "kit-node-b")]


class ClosureTests:
    """``Cap.CLOSURE``: an unregistered callable is submitted and run (in-process stores)."""

    @proves(Cap.CLOSURE, requires=[Cap.RESULT])
    def test_submit_runs_an_unregistered_callable(self, cairnflow_kit: Kit) -> None:
        client = cairnflow_kit.client()
        ref = client.submit(lambda a, b: a + b, 2, b=3)
        assert client.result(ref, timeout=TIMEOUT) == 5

        async def later(text: str) -> str:
            return text.upper()

        assert client.result(client.submit(later, "async"), timeout=TIMEOUT) == "ASYNC"
        failing = client.submit(lambda: 1 / 0)
        info = client.wait(failing, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.type == "ZeroDivisionError"
