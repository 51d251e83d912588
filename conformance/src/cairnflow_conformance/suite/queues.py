"""Queues: a client runs only the queues it serves, each within its workers, the higher
priority first (QUEUE); a run put on another queue than its workflow's (QUEUE_OVERRIDE); a
queue's global limit held across clients and processes (QUEUE_LIMIT_GLOBAL).

Who ran what is read from what the steps returned (each client's step returns its
node id and the queue it was claimed from) and from what the store recorded (a
run's queue, a step's attempts). Concurrency is counted from inside the steps.
No assertion is on time: a run that must wait is checked once the runs that
must not wait have all finished, by a client that claimed them after it was
enqueued. How many ran at once across processes is computed from the start and end
each step body recorded (``workflows.limited``), never from the wall clock around calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import ClaimRequest, QueueClaim

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

__all__ = ["GlobalLimitTests", "QueueTests"]

_PROCESSES = pytest.mark.xdist_group("cairnflow-conformance-processes")


def _reports(ctx: cf.StepContext, data: Any) -> dict[str, Any]:
    """A step that says who ran it, and from which queue."""
    return {"node": ctx.node_id, "queue": ctx.queue, "data": data}


def _workflow(name: str, queue: str, step: Callable[..., Any] = _reports, **options: Any) -> Any:
    return cf.Workflow(name, queue=queue, steps=[cf.Step("a", step)], **options)


def _attempts(kit: Kit, run: cf.RunRef) -> int:
    return kit.stored_step(run, "a").attempt


class Concurrency:
    """How many steps of each queue run at once, counted from inside the steps."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._seconds = seconds
        self._now: dict[str, int] = {}
        self.most: dict[str, int] = {}

    def step(self, ctx: cf.StepContext, data: Any) -> str:
        """Count this step in its queue while it sleeps a little."""
        queue = ctx.queue
        with self._lock:
            self._now[queue] = self._now.get(queue, 0) + 1
            self.most[queue] = max(self.most.get(queue, 0), self._now[queue])
        try:
            time.sleep(self._seconds)
        finally:
            with self._lock:
                self._now[queue] -= 1
        return queue


class QueueTests:
    """``Cap.QUEUE`` and ``Cap.QUEUE_OVERRIDE``."""

    @proves(Cap.QUEUE)
    def test_a_client_runs_only_the_queues_it_serves(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        # Both clients know both workflows; each serves one queue. The "other" runs are
        # enqueued first and at a higher priority: a claim that ignored the queue would
        # take them first.
        both = [_workflow("kit-mine", "kit-q-mine"), _workflow("kit-other", "kit-q-other")]
        mine = kit.client(*both, queues=["kit-q-mine"], node_id="kit-mine-node", workers=2)
        others = [mine.enqueue("kit-other", n) for n in range(4)]
        own = [mine.enqueue("kit-mine", n) for n in range(6)]
        for n, ref in enumerate(own):
            info = mine.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert info.result == {"node": "kit-mine-node", "queue": "kit-q-mine", "data": n}
        for ref in others:
            assert _attempts(kit, ref) == 0, "a run of a queue the client does not serve ran"
            assert mine.info(ref).status is cf.Status.QUEUED
        theirs = kit.client(*both, queues=["kit-q-other"], node_id="kit-other-node")
        for ref in others:
            info = theirs.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert info.result["node"] == "kit-other-node"
            assert info.result["queue"] == "kit-q-other"

    @proves(Cap.QUEUE)
    def test_a_run_waits_in_the_table_until_a_client_serves_its_queue(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        # Without queues a client serves its workflows' queues: this one serves kit-q-plain
        # only, and nothing serves kit-q-later until a client for it starts.
        enqueuer = kit.client(
            _workflow("kit-plain", "kit-q-plain"),
            _workflow("kit-later", "kit-q-later"),
            start=False,
        )
        later = [enqueuer.enqueue("kit-later", n) for n in range(3)]
        plain = kit.client(_workflow("kit-plain", "kit-q-plain"), node_id="kit-plain-node")
        done = [plain.enqueue("kit-plain", n) for n in range(3)]
        for ref in done:
            assert plain.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        for ref in later:
            assert _attempts(kit, ref) == 0
            assert kit.stored(ref).queue == "kit-q-later"
        server = kit.client(_workflow("kit-later", "kit-q-later"), node_id="kit-later-node")
        for ref in later:
            info = server.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert info.result["node"] == "kit-later-node"

    @proves(Cap.QUEUE)
    def test_a_queue_never_runs_more_than_its_workers_on_a_client(self, cairnflow_kit: Kit) -> None:
        counter = Concurrency(seconds=0.05)
        client = cairnflow_kit.client(
            _workflow("kit-narrow", "kit-q-narrow", counter.step),
            _workflow("kit-wide", "kit-q-wide", counter.step),
            queues=[
                cf.QueueConfig("kit-q-narrow", workers=2),
                cf.QueueConfig("kit-q-wide", workers=4),
            ],
            start=False,
        )
        refs = [client.enqueue("kit-narrow", n) for n in range(16)]
        refs += [client.enqueue("kit-wide", n) for n in range(16)]
        client.start()
        for ref in refs:
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert counter.most["kit-q-narrow"] <= 2, counter.most
        assert counter.most["kit-q-wide"] <= 4, counter.most

    @proves(Cap.QUEUE)
    def test_the_higher_priority_queue_is_drained_first_when_workers_are_short(
        self, cairnflow_kit: Kit
    ) -> None:
        started: list[str] = []
        lock = threading.Lock()

        def records(ctx: cf.StepContext, data: Any) -> None:
            with lock:
                started.append(ctx.queue)

        # One worker, no claim ahead: each claim takes one attempt, asking "urgent" first.
        client = cairnflow_kit.client(
            _workflow("kit-routine", "kit-q-routine", records),
            _workflow("kit-urgent", "kit-q-urgent", records),
            queues=[
                cf.QueueConfig("kit-q-routine", priority=0),
                cf.QueueConfig("kit-q-urgent", priority=10),
            ],
            workers=1,
            prefetch=0,
            start=False,
        )
        # The routine runs are older: within one queue they would go first.
        refs = [client.enqueue("kit-routine", n) for n in range(5)]
        refs += [client.enqueue("kit-urgent", n) for n in range(5)]
        client.start()
        for ref in refs:
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert started == ["kit-q-urgent"] * 5 + ["kit-q-routine"] * 5

    @proves(Cap.QUEUE)
    def test_a_queue_configuration_is_checked_at_construction_naming_the_entry(
        self, cairnflow_kit: Kit
    ) -> None:
        store = cairnflow_kit.store
        bad: list[tuple[list[Any], type[Exception], str]] = [
            (["kit-a", "kit-a"], ValueError, r"queues\[1\] \('kit-a'\): .*configured twice"),
            ([cf.QueueConfig("kit-a", workers=0)], ValueError, r"queues\[0\] .*workers must be"),
            ([cf.QueueConfig("kit-a", limit=0)], ValueError, r"queues\[0\] .*limit must be"),
            ([cf.QueueConfig("kit-a", priority=True)], ValueError, r"queues\[0\] .*priority"),
            (["kit-a", "bad name!"], cf.InvalidName, r"queues\[1\] \('bad name!'\)"),
            ([42], TypeError, r"queues\[0\] \(42\)"),
            ([], ValueError, "at least one queue"),
        ]
        for queues, error, message in bad:
            with pytest.raises(error, match=message):
                cf.Client(store, queues=queues)
        assert cairnflow_kit.run_count() == 0

    @proves(Cap.QUEUE_OVERRIDE, requires=[Cap.QUEUE, Cap.BATCH_ENQUEUE])
    def test_an_override_puts_one_run_on_another_queue(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        main = kit.client(
            _workflow("kit-routed", "kit-q-main"), queues=["kit-q-main"], node_id="kit-main"
        )
        moved = main.enqueue("kit-routed", "moved", queue="kit-q-side")
        stays = main.enqueue("kit-routed", "stays")
        batch = main.enqueue_many(
            [cf.Job("kit-routed", "batch-side", queue="kit-q-side"), cf.Job("kit-routed", "batch")]
        )
        for ref in (stays, batch[1]):
            info = main.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert info.result["queue"] == "kit-q-main"
        for ref in (moved, batch[0]):
            assert kit.stored(ref).queue == "kit-q-side"
            assert main.info(ref).queue == "kit-q-side"
            assert _attempts(kit, ref) == 0, "a run moved to another queue ran on its old one"
        side = kit.client(
            _workflow("kit-routed", "kit-q-main"), queues=["kit-q-side"], node_id="kit-side"
        )
        for ref in (moved, batch[0]):
            info = side.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, info.error
            assert (info.result["node"], info.result["queue"]) == ("kit-side", "kit-q-side")


def _limited_runs(kit: Kit, count: int, **payload: Any) -> list[cf.RunRef]:
    """``count`` runs of ``workflows.limited`` enqueued by a client that runs nothing."""
    enqueuer = kit.client(workflows.limited(), start=False)
    body = {"traces": str(kit.traces.directory), **payload}
    return [enqueuer.enqueue(workflows.LIMITED, body) for _ in range(count)]


def _probe(kit: Kit, global_limit: int) -> list[Any]:
    """Claim the limited queue through the SPI with ``global_limit``: what it would take now."""
    now = time.time_ns()
    request = ClaimRequest(
        frozenset({workflows.LIMITED}),
        10,
        now,
        now + 600 * 10**9,
        "kit-probe",
        (QueueClaim(workflows.LIMITED_QUEUE, None, global_limit),),
    )
    return list(kit.store.claim(request))


class GlobalLimitTests:
    """``Cap.QUEUE_LIMIT_GLOBAL``: a queue's limit holds across every client of the store."""

    @proves(Cap.QUEUE_LIMIT_GLOBAL, requires=[Cap.QUEUE])
    def test_two_clients_never_run_more_than_the_global_limit(self, cairnflow_kit: Kit) -> None:
        # Two clients of four workers each could run eight at once: the limit lets three.
        counter = Concurrency(seconds=0.05)
        clients = [
            cairnflow_kit.client(
                _workflow("kit-capped", "kit-q-capped", counter.step),
                queues=[cf.QueueConfig("kit-q-capped", limit=3)],
                workers=4,
                node_id=f"kit-capped-{n}",
                start=False,
            )
            for n in range(2)
        ]
        refs = [clients[0].enqueue("kit-capped", n) for n in range(24)]
        for client in clients:
            client.start()
        for ref in refs:
            info = clients[0].wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, info.error
        assert counter.most["kit-q-capped"] <= 3, counter.most

    @proves(Cap.QUEUE_LIMIT_GLOBAL, requires=[Cap.QUEUE])
    def test_a_limited_queue_does_not_hold_back_an_unlimited_one(self, cairnflow_kit: Kit) -> None:
        # The tight queue's one allowed run is held until the free queue's runs have all
        # finished: a claim that waited on the tight queue's limit would never get there.
        release = threading.Event()
        started: list[str] = []
        lock = threading.Lock()
        counter = Concurrency(seconds=0.02)

        def tight(ctx: cf.StepContext, data: Any) -> None:
            with lock:
                started.append(ctx.run_id)
            assert release.wait(TIMEOUT * 2), "never released"

        client = cairnflow_kit.client(
            _workflow("kit-tight", "kit-q-tight", tight),
            _workflow("kit-free", "kit-q-free", counter.step),
            queues=[cf.QueueConfig("kit-q-tight", limit=1), cf.QueueConfig("kit-q-free")],
            workers=4,
            start=False,
        )
        held = [client.enqueue("kit-tight", n) for n in range(3)]
        free = [client.enqueue("kit-free", n) for n in range(12)]
        client.start()
        try:
            for ref in free:
                assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
            with lock:
                assert len(started) == 1, f"the tight queue ran {len(started)} at once"
        finally:
            release.set()
        for ref in held:
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert counter.most["kit-q-free"] >= 1

    @_PROCESSES
    @proves(Cap.QUEUE_LIMIT_GLOBAL, requires=[Cap.QUEUE, Cap.MULTI_PROCESS])
    def test_worker_processes_never_run_more_than_the_global_limit(
        self, cairnflow_kit: Kit
    ) -> None:
        # Three processes of four workers could run twelve at once; the limit lets five.
        kit = cairnflow_kit
        queue = [cf.QueueConfig(workflows.LIMITED_QUEUE, limit=5)]
        processes = [
            kit.processes.spawn(f"kit-limited-{n}", workers=4, queues=queue) for n in range(3)
        ]
        refs = _limited_runs(kit, 40, work=0.1)  # all three are up: they share the work
        client = kit.client(workflows.limited(), start=False)
        for ref in refs:
            info = client.wait(ref, timeout=TIMEOUT * 3)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        spans = kit.traces.read("span")
        assert sorted(span["run"] for span in spans) == sorted(ref.id for ref in refs)
        assert workflows.max_overlap(spans) <= 5, spans
        assert len({span["node"] for span in spans}) >= 2, "one process did all the work"
        for process in processes:
            assert process.stop() == 0, process.log()

    @_PROCESSES
    @proves(Cap.QUEUE_LIMIT_GLOBAL, requires=[Cap.QUEUE, Cap.MULTI_PROCESS, Cap.LEASE])
    def test_attempts_of_a_killed_worker_count_against_the_limit_until_reclaimed(
        self, cairnflow_kit: Kit
    ) -> None:
        # A worker holding the whole limit is killed mid-step. Its attempts stay 'running'
        # until reclaimed, and count: nothing more of the queue is claimed, even once their
        # leases ran out. Then a worker reclaims them, and every run completes within it.
        kit = cairnflow_kit
        queue = [cf.QueueConfig(workflows.LIMITED_QUEUE, limit=2)]
        held = _limited_runs(kit, 2, hold=True)
        doomed = kit.processes.spawn("kit-limit-doomed", workers=2, lease=1.0, queues=queue)
        wait_until(
            lambda: kit.traces.count("exec", phase="started") == 2,
            TIMEOUT,
            "the doomed worker to start both held runs",
        )
        doomed.kill()
        rest = _limited_runs(kit, 4, work=0.02)
        assert _probe(kit, 2) == [], "a claim took runs past the killed worker's attempts"
        time.sleep(2.0)  # the killed attempts' leases (1 s) have run out: still counted
        assert _probe(kit, 2) == [], "an expired attempt stopped counting before its reclaim"
        beside = _probe(kit, 3)
        assert len(beside) == 1, "a limit of 3 has room for one beside the two"
        assert kit.store.hand_back([beside[0].token], time.time_ns()) == 1
        kit.traces.flag(workflows.RELEASE)
        rescuer = kit.processes.spawn("kit-limit-rescuer", workers=4, lease=30.0, queues=queue)
        client = kit.client(workflows.limited(), start=False)
        for ref in [*held, *rest]:
            info = client.wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        for ref in held:
            assert kit.stored_step(ref, "work").reclaims == 1
        spans = kit.traces.read("span", node="kit-limit-rescuer")
        assert workflows.max_overlap(spans) <= 2, spans
        assert rescuer.stop() == 0, rescuer.log()
