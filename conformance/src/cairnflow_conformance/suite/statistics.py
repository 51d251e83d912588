"""``Cap.STATS`` (#17): the counts a dashboard draws, read back from the store.

Runs in known states on the test's own tables, then every number of
``Client.stats()`` checked against them: runs and steps by queue and status,
the per-queue figures, and throughput buckets that hold every run that ended.
"""

from __future__ import annotations

import threading

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import StatusCount

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["StatsTests"]


class StatsTests:
    """``Cap.STATS``: counts by queue and status, queue figures, throughput."""

    @proves(Cap.STATS)
    def test_a_dashboard_reads_counts_queues_and_throughput(self, cairnflow_kit: Kit) -> None:
        release = threading.Event()
        started = threading.Event()
        wf = cf.Workflow("kit-stats")

        @wf.step
        def work(ctx: cf.StepContext, n: int) -> int:
            if n < 0:
                started.set()
                release.wait(TIMEOUT)
            if n % 2:
                raise cf.Permanent("odd")
            return n

        idle = cf.Workflow("kit-stats-idle", steps=[cf.Step("a", lambda c, d: d)])
        worker = cairnflow_kit.client(wf)
        enqueuer = cairnflow_kit.client(idle, start=False)
        try:
            done = [worker.enqueue("kit-stats", n) for n in range(5)]  # 3 succeed, 2 fail
            for ref in done:
                worker.wait(ref, timeout=TIMEOUT)
            held = worker.enqueue("kit-stats", -2)
            assert started.wait(TIMEOUT), "the held step never started"
            queued = [enqueuer.enqueue("kit-stats-idle", n) for n in range(2)]
            elsewhere = None
            if cairnflow_kit.declares(Cap.QUEUE_OVERRIDE):
                elsewhere = enqueuer.enqueue("kit-stats-idle", 9, queue="kit-side")
            stats = enqueuer.stats(hours=1, bucket=60)
        finally:
            release.set()
        worker.wait(held, timeout=TIMEOUT)
        runs = set(stats.runs)
        assert StatusCount("default", "succeeded", 3) in runs
        assert StatusCount("default", "failed", 2) in runs
        assert StatusCount("default", "active", 3) in runs  # 2 queued and 1 running
        steps = set(stats.steps)
        assert StatusCount("default", "ready", 2) in steps
        assert StatusCount("default", "running", 1) in steps
        (default,) = [q for q in stats.queues if q.queue == "default"]
        first = enqueuer.info(queued[0])
        assert (default.queued, default.running, default.waiting, default.failed) == (2, 1, 0, 2)
        assert default.oldest_queued_at == first.run_at_ns
        if elsewhere is not None:
            (side,) = [q for q in stats.queues if q.queue == "kit-side"]
            assert (side.queued, side.running, side.failed) == (1, 0, 0)
            assert StatusCount("kit-side", "active", 1) in runs
        assert len(stats.throughput) == 60
        width = 60 * 10**9
        assert all(b.start == stats.since + i * width for i, b in enumerate(stats.throughput))
        assert sum(b.succeeded for b in stats.throughput) == 3
        assert sum(b.failed for b in stats.throughput) == 2
        for ref in done:
            ended = worker.info(ref).finished_at_ns
            assert ended is not None
            (bucket,) = [b for b in stats.throughput if b.start <= ended < b.start + width]
            assert bucket.succeeded + bucket.failed >= 1
        after = enqueuer.stats(hours=1)
        assert StatusCount("default", "succeeded", 4) in set(after.runs)
        assert sum(b.succeeded for b in after.throughput) == 4
