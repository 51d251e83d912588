"""Concurrency keys (CONCURRENCY_KEY) and fifo keys (KEY_FIFO).

At most ``limit`` attempts per key run at once across every client and process;
a fifo key's runs run one after the other, in enqueue order. How many ran at
once is counted from inside the steps (in-process counters, or the start and
end each step body recorded, ``workflows.keyed``), never from the wall clock
around calls. A count that leaked would hold its key forever, so every test
that ends leases unusually (a kill, a cancel) then proves the key admits
exactly its limit again, through the SPI: a claim of three ready steps of a
key of limit two leases two (a leaked count leases fewer, a count released
twice more).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import ClaimedAttempt, ClaimRequest, QueueClaim

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, step_status_is, wait_until

__all__ = ["ConcurrencyKeyTests", "FifoKeyTests"]

_PROCESSES = pytest.mark.xdist_group("cairnflow-conformance-processes")


class _PerKey:
    """How many step bodies of each key run at once, counted from inside the steps."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._seconds = seconds
        self._now: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.started: list[tuple[str, int]] = []
        """``(key, n)`` of each body, in the order the bodies began."""

    def step(self, ctx: cf.StepContext, data: Any) -> Any:
        key = str(ctx.payload["key"])
        with self._lock:
            self._now[key] = self._now.get(key, 0) + 1
            self.most[key] = max(self.most.get(key, 0), self._now[key])
            self.started.append((key, int(ctx.payload["n"])))
        time.sleep(self._seconds)
        with self._lock:
            self._now[key] -= 1
        return data


def _keyed_runs(kit: Kit, count: int, key: str, **payload: Any) -> list[cf.RunRef]:
    """``count`` runs of ``workflows.keyed`` with ``key``, enqueued by a client running nothing."""
    enqueuer = kit.client(workflows.keyed(), start=False)
    body = {"traces": str(kit.traces.directory), "key": key, **payload}
    return [enqueuer.enqueue(workflows.KEYED, body) for _ in range(count)]


def _probe(kit: Kit, limit: int = 10) -> list[ClaimedAttempt]:
    """Claim the keyed queue through the SPI, honouring keys: what a claim would take now."""
    now = time.time_ns()
    request = ClaimRequest(
        frozenset({workflows.KEYED}),
        limit,
        now,
        now + 600 * 10**9,
        "kit-probe",
        (QueueClaim(workflows.KEYED_QUEUE),),
        keys=True,
    )
    return list(kit.store.claim(request))


def _admits_exactly_its_limit(kit: Kit, key: str) -> None:
    """Three ready runs of ``key`` (limit 2), nothing of it running: a claim leases two."""
    _keyed_runs(kit, workflows.KEYED_LIMIT + 1, key)
    taken = _probe(kit)
    assert len(taken) == workflows.KEYED_LIMIT, (
        f"key {key!r} admitted {len(taken)} of {workflows.KEYED_LIMIT + 1} ready runs with a "
        f"limit of {workflows.KEYED_LIMIT}: its count drifted"
    )
    assert kit.store.hand_back([a.token for a in taken], time.time_ns()) == len(taken)


class ConcurrencyKeyTests:
    """``Cap.CONCURRENCY_KEY``: at most N attempts per key run at once, across every client."""

    @proves(Cap.CONCURRENCY_KEY)
    def test_two_clients_never_run_more_of_a_key_than_its_limit(self, cairnflow_kit: Kit) -> None:
        # Two clients of four workers each could run eight at once; each key lets two.
        counter = _PerKey(seconds=0.05)
        wf = cf.Workflow(
            "kit-per-customer",
            steps=[cf.Step("a", counter.step)],
            concurrency=cf.Concurrency(key=lambda p: p["key"], limit=2),
        )
        clients = [
            cairnflow_kit.client(wf, workers=4, node_id=f"kit-keyed-{n}", start=False)
            for n in range(2)
        ]
        refs = [
            clients[0].enqueue("kit-per-customer", {"key": f"kit-c{n % 3}", "n": n})
            for n in range(24)
        ]
        for client in clients:
            client.start()
        for ref in refs:
            info = clients[0].wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, info.error
        assert set(counter.most) == {"kit-c0", "kit-c1", "kit-c2"}
        assert max(counter.most.values()) <= 2, counter.most

    @proves(Cap.CONCURRENCY_KEY)
    def test_a_step_key_limits_that_step_only(self, cairnflow_kit: Kit) -> None:
        # The key is the "charge" step's; "prepare" has none and runs for every run at once.
        charge = _PerKey(seconds=0.05)
        prepare = _PerKey(seconds=0.2)
        wf = cf.Workflow("kit-step-key")
        wf.add(cf.Step("prepare", prepare.step))
        wf.add(
            cf.Step(
                "charge",
                charge.step,
                after=["prepare"],
                concurrency=cf.Concurrency(key=lambda p: "kit-upstream", limit=1),
            )
        )
        client = cairnflow_kit.client(wf, workers=6, start=False)
        refs = [client.enqueue("kit-step-key", {"key": "all", "n": n}) for n in range(6)]
        client.start()
        for ref in refs:
            assert client.wait(ref, timeout=TIMEOUT * 2).status is cf.Status.SUCCEEDED
        assert charge.most == {"all": 1}, charge.most
        assert prepare.most["all"] >= 2, "steps without the key were held by it"

    @proves(Cap.CONCURRENCY_KEY, requires=[Cap.BATCH_ENQUEUE])
    def test_a_full_key_does_not_hold_back_other_keys(self, cairnflow_kit: Kit) -> None:
        # Ten thousand ready steps of a full key sort ahead of one step of another key: the
        # claim passes over them (without locking them) and leases the runnable one.
        kit = cairnflow_kit
        enqueuer = kit.client(workflows.keyed(), start=False)
        body = {"traces": str(kit.traces.directory)}
        holders = [
            enqueuer.enqueue(workflows.KEYED, {**body, "key": "kit-hot"})
            for _ in range(workflows.KEYED_LIMIT)
        ]
        held = _probe(kit)
        assert sorted(a.run_id for a in held) == sorted(ref.id for ref in holders)
        hot = {**body, "key": "kit-hot"}
        blocked = [cf.Job(workflows.KEYED, {**hot, "n": n}) for n in range(10_000)]
        for start in range(0, len(blocked), 1_000):
            enqueuer.enqueue_many(blocked[start : start + 1_000])
        runnable = enqueuer.enqueue(workflows.KEYED, {**body, "key": "kit-cold"})
        taken = _probe(kit, limit=1)
        assert [a.run_id for a in taken] == [runnable.id], "the runnable step was not claimed"
        assert _probe(kit) == [], "a claim took a step of a full key"

    @proves(Cap.CONCURRENCY_KEY, requires=[Cap.CANCEL])
    def test_cancelling_a_run_frees_its_key(self, cairnflow_kit: Kit) -> None:
        # The only run allowed on the key is stuck in its step; cancelling the run ends its
        # lease, so the next run of the key starts while the cancelled body is still stuck.
        release = threading.Event()

        def stuck(ctx: cf.StepContext, data: Any) -> None:
            if ctx.payload["n"] == 0:
                assert release.wait(TIMEOUT * 2), "never released"

        wf = cf.Workflow(
            "kit-cancel-key",
            steps=[cf.Step("a", stuck)],
            concurrency=cf.Concurrency(key=lambda p: "kit-one", limit=1),
        )
        client = cairnflow_kit.client(wf, workers=4)
        try:
            first = client.enqueue("kit-cancel-key", {"n": 0})
            wait_until(
                lambda: step_status_is(client, first, "a", cf.StepStatus.RUNNING),
                TIMEOUT,
                "the first run to start",
            )
            second = client.enqueue("kit-cancel-key", {"n": 1})
            assert client.cancel(first)
            info = client.wait(second, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
        finally:
            release.set()

    @pytest.mark.parametrize("how", ["cancel_step", "cancel_runs"])
    @proves(Cap.CONCURRENCY_KEY, requires=[Cap.CANCEL_STEP, Cap.CANCEL_ALL])
    def test_an_operators_cancel_frees_the_key_of_the_attempt_it_ends(
        self, cairnflow_kit: Kit, how: str
    ) -> None:
        # As above, by the run administration's cancels, from an operator's client never
        # started: each ends the running attempt's lease, so it releases its key, once.
        release = threading.Event()

        def stuck(ctx: cf.StepContext, data: Any) -> None:
            if ctx.payload["n"] == 0:
                assert release.wait(TIMEOUT * 2), "never released"

        name = f"kit-admin-key-{how.replace('_', '-')}"
        wf = cf.Workflow(
            name,
            steps=[cf.Step("a", stuck)],
            concurrency=cf.Concurrency(key=lambda p: f"kit-one-{name}", limit=1),
        )
        client = cairnflow_kit.client(wf, workers=4)
        operator = cairnflow_kit.client(wf, start=False)
        try:
            first = client.enqueue(name, {"n": 0}, labels={"kit": "first"})
            wait_until(
                lambda: step_status_is(client, first, "a", cf.StepStatus.RUNNING),
                TIMEOUT,
                "the first run to start",
            )
            second = client.enqueue(name, {"n": 1})
            if how == "cancel_step":
                assert operator.cancel_step(first, "a") is True
            else:
                assert operator.cancel_runs(workflow=name, labels={"kit": "first"}) == 1
            info = client.wait(second, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert client.info(first).status is cf.Status.CANCELLED
        finally:
            release.set()

    @proves(Cap.CONCURRENCY_KEY)
    def test_a_key_given_as_a_string_is_refused_at_start(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow(
            "kit-string-key",
            steps=[cf.Step("a", lambda c, d: d)],
            concurrency=cf.Concurrency(key="payload.customer", limit=1),  # type: ignore[arg-type]
        )
        client = cairnflow_kit.client(wf, start=False)
        with pytest.raises(TypeError, match="kit-string-key"):
            client.start()
        assert not client.running
        assert cairnflow_kit.run_count() == 0

    @_PROCESSES
    @proves(Cap.CONCURRENCY_KEY, requires=[Cap.MULTI_PROCESS])
    def test_worker_processes_never_run_more_of_a_key_than_its_limit(
        self, cairnflow_kit: Kit
    ) -> None:
        # Three processes of four workers could run twelve at once; each of two keys lets two.
        kit = cairnflow_kit
        processes = [kit.processes.spawn(f"kit-keyed-{n}", workers=4) for n in range(3)]
        refs = [
            *_keyed_runs(kit, 10, "kit-k0", work=0.1),
            *_keyed_runs(kit, 10, "kit-k1", work=0.1),
        ]
        client = kit.client(workflows.keyed(), start=False)
        for ref in refs:
            info = client.wait(ref, timeout=TIMEOUT * 3)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        spans = kit.traces.read("span")
        assert sorted(span["run"] for span in spans) == sorted(ref.id for ref in refs)
        for key in ("kit-k0", "kit-k1"):
            of_key = [span for span in spans if span["key"] == key]
            assert workflows.max_overlap(of_key) <= workflows.KEYED_LIMIT, (key, of_key)
        assert len({span["node"] for span in spans}) >= 2, "one process did all the work"
        for process in processes:
            assert process.stop() == 0, process.log()
        _admits_exactly_its_limit(kit, "kit-k0")

    @_PROCESSES
    @proves(Cap.CONCURRENCY_KEY, requires=[Cap.MULTI_PROCESS, Cap.LEASE])
    def test_a_key_held_by_a_killed_worker_is_freed_once_reclaimed(
        self, cairnflow_kit: Kit
    ) -> None:
        # A worker holding the key's whole limit is killed (SIGKILL) mid-step. Its attempts
        # stay running, and counted, until their leases lapse and are reclaimed; then the
        # key's count is freed exactly: every run completes, and afterwards the key admits
        # exactly its limit again (a leaked count would hold it forever).
        kit = cairnflow_kit
        held = _keyed_runs(kit, workflows.KEYED_LIMIT, "kit-held", hold=True)
        doomed = kit.processes.spawn("kit-key-doomed", workers=4, lease=1.0)
        wait_until(
            lambda: kit.traces.count("exec", phase="started") == workflows.KEYED_LIMIT,
            TIMEOUT,
            "the doomed worker to start both held runs",
        )
        doomed.kill()
        rest = _keyed_runs(kit, 3, "kit-held", work=0.02)
        assert _probe(kit) == [], "a claim took runs past the killed worker's attempts"
        time.sleep(2.0)  # the killed attempts' leases (1 s) ran out: counted until reclaimed
        assert _probe(kit) == [], "an expired attempt stopped counting before its reclaim"
        kit.traces.flag(workflows.RELEASE)
        rescuer = kit.processes.spawn("kit-key-rescuer", workers=4, lease=30.0)
        client = kit.client(workflows.keyed(), start=False)
        for ref in [*held, *rest]:
            info = client.wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        for ref in held:
            assert kit.stored_step(ref, "work").reclaims == 1
        spans = kit.traces.read("span", node="kit-key-rescuer")
        assert workflows.max_overlap(spans) <= workflows.KEYED_LIMIT, spans
        assert rescuer.stop() == 0, rescuer.log()
        _admits_exactly_its_limit(kit, "kit-held")


class FifoKeyTests:
    """``Cap.KEY_FIFO``: runs sharing a key run one after the other, in enqueue order."""

    @proves(Cap.KEY_FIFO, requires=[Cap.CONCURRENCY_KEY])
    def test_runs_of_a_key_run_one_after_the_other_in_enqueue_order(
        self, cairnflow_kit: Kit
    ) -> None:
        # Two steps per run and eight workers on two clients: without the fifo key the runs
        # of one key would overlap and start in any order. Two keys run side by side.
        lock = threading.Lock()
        events: list[tuple[str, int, str, str]] = []  # (key, n, step, "start" | "end")

        def body(step: str) -> Any:
            def run(ctx: cf.StepContext, data: Any) -> int:
                key, n = str(ctx.payload["key"]), int(ctx.payload["n"])
                with lock:
                    events.append((key, n, step, "start"))
                time.sleep(0.02)
                with lock:
                    events.append((key, n, step, "end"))
                return n

            return run

        wf = cf.Workflow(
            "kit-fifo",
            concurrency=cf.Concurrency(key=lambda p: p["key"], limit=2, fifo=True),
        )
        wf.step(body("first"), name="first")
        wf.step(body("second"), name="second", after=["first"])
        clients = [
            cairnflow_kit.client(wf, workers=4, node_id=f"kit-fifo-{n}", start=False)
            for n in range(2)
        ]
        refs = []
        for n in range(8):
            for key in ("kit-a", "kit-b"):
                refs.append(clients[0].enqueue("kit-fifo", {"key": key, "n": n}))
        for client in clients:
            client.start()
        for ref in refs:
            info = clients[0].wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, info.error
        for key in ("kit-a", "kit-b"):
            mine = [(n, step, what) for k, n, step, what in events if k == key]
            expected = [
                (n, step, what)
                for n in range(8)
                for step in ("first", "second")
                for what in ("start", "end")
            ]
            assert mine == expected, f"key {key!r} ran out of order or overlapping: {mine}"
