"""Rate limits (RATE_LIMIT): durable leaky buckets, taken from directly and by the claim.

A bucket's promise (``cairnflow._rates``): over any stretch of time ``d``, at most
``burst + d / T`` tokens are admitted, ``T = per / limit``. The tests check it on what
the store recorded, never on how long anything took: takes at one instant of a fake
clock (whatever the threads racing for them, exactly the tokens the bucket holds are
granted), and the claim times a rate-limited queue wrote on its steps (the claim's
``now`` is both what the bucket was charged at and each attempt's ``started_at``), which
must be spaced by the rate whichever client or process claimed them.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.clock import Fake

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["RateLimitTests"]

_NS = 1_000_000_000
_GROUP = pytest.mark.xdist_group("cairnflow-conformance-processes")


def _spacing_holds(started: list[int], rate: cf.Rate) -> None:
    """No window of ``rate.per`` holds more than ``limit + burst - 1`` of ``started``."""
    started = sorted(started)
    most = rate.limit + rate.burst - 1
    for first, later in zip(started, started[most:], strict=False):
        assert later - first >= rate.limit * rate.interval_ns, (
            f"{most + 1} attempts started within {(later - first) / _NS:.3f}s, "
            f"under a rate of {rate.limit} per {rate.per}s (burst {rate.burst})"
        )


class RateLimitTests:
    """``Cap.RATE_LIMIT``: buckets shared by every client, and rate-limited queues."""

    @proves(Cap.RATE_LIMIT)
    def test_a_bucket_admits_its_burst_then_one_token_per_interval(
        self, cairnflow_kit: Kit
    ) -> None:
        clock = Fake(start=1_700_000_000 * _NS)
        rate = cf.Rate(2, per=1.0, burst=2)  # a token every 0.5 s, two at once
        one = cf.RateLimiter(cairnflow_kit.store, clock=clock)
        other = cf.RateLimiter(cairnflow_kit.store, clock=clock)  # another client, one bucket
        assert one.try_take("kit-bucket", rate).granted
        assert other.try_take("kit-bucket", rate).granted
        refused = one.try_take("kit-bucket", rate)
        assert not refused.granted
        assert refused.retry_at == clock.now_ns() + rate.interval_ns
        # A refused take wrote nothing: the next token comes when it said, not later.
        clock.advance(rate.interval_ns / _NS - 0.001)
        assert not other.try_take("kit-bucket", rate).granted
        clock.advance(0.001)
        assert other.try_take("kit-bucket", rate).granted
        assert not one.try_take("kit-bucket", rate).granted
        # Buckets are apart by name; a take larger than the burst could never be granted.
        assert one.try_take("kit-other-bucket", rate, 2).granted
        with pytest.raises(ValueError, match="burst"):
            one.try_take("kit-bucket", rate, 3)
        # After a quiet spell the bucket holds its burst again, never more.
        clock.advance(60)
        assert one.try_take("kit-bucket", rate, 2).granted
        assert not one.try_take("kit-bucket", rate).granted

    @proves(Cap.RATE_LIMIT)
    def test_racing_takers_never_spend_one_token_twice(self, cairnflow_kit: Kit) -> None:
        # Eight threads, each with a limiter of its own, race for a bucket of burst 3 at one
        # instant: exactly three takes are granted, then exactly one per interval.
        clock = Fake(start=1_700_000_000 * _NS)
        rate = cf.Rate(10, per=1.0, burst=3)
        granted: list[int] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def racer(tries: int) -> None:
            limiter = cf.RateLimiter(cairnflow_kit.store, clock=clock)
            start.wait(timeout=TIMEOUT)
            for _ in range(tries):
                if limiter.try_take("kit-race", rate).granted:
                    with lock:
                        granted.append(clock.now_ns())

        for expected in (3, 1, 1):
            granted.clear()
            threads = [threading.Thread(target=racer, args=(4,)) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT)
            assert len(granted) == expected, f"{len(granted)} takes granted, {expected} held"
            clock.advance(rate.interval_ns / _NS)

    @proves(Cap.RATE_LIMIT)
    def test_a_rate_limited_queue_starts_attempts_at_its_rate_across_clients(
        self, cairnflow_kit: Kit
    ) -> None:
        rate = cf.Rate(10, per=1.0)  # one attempt per 100 ms, whichever client claims it
        workflow = cf.Workflow(
            "kit-rated", queue="kit-q-rated", steps=[cf.Step("a", lambda ctx, data: data)]
        )
        clients = [
            cairnflow_kit.client(
                workflow,
                queues=[cf.QueueConfig("kit-q-rated", rate=rate)],
                workers=4,
                node_id=f"kit-rated-{n}",
                start=False,
            )
            for n in range(2)
        ]
        refs = [clients[0].enqueue("kit-rated", n) for n in range(14)]
        for client in clients:
            client.start()
        for ref in refs:
            info = clients[0].wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, info.error
        started = [cairnflow_kit.stored_step(ref, "a").started_at for ref in refs]
        assert None not in started
        _spacing_holds([s for s in started if s is not None], rate)

    @_GROUP
    @proves(Cap.RATE_LIMIT, requires=[Cap.QUEUE, Cap.MULTI_PROCESS])
    def test_worker_processes_claim_a_rate_limited_queue_at_its_rate(
        self, cairnflow_kit: Kit
    ) -> None:
        # Three processes of four workers could start twelve at once; the queue's bucket,
        # one row every process's claim locks and charges, lets them start 5 a second.
        kit = cairnflow_kit
        rate = cf.Rate(5, per=1.0)
        queue = [cf.QueueConfig(workflows.LIMITED_QUEUE, rate=rate)]
        processes = [
            kit.processes.spawn(f"kit-rated-{n}", workers=4, queues=queue) for n in range(3)
        ]
        enqueuer = kit.client(workflows.limited(), start=False)
        body = {"traces": str(kit.traces.directory), "work": 0.05}
        refs = [enqueuer.enqueue(workflows.LIMITED, body) for _ in range(12)]
        for ref in refs:
            info = enqueuer.wait(ref, timeout=TIMEOUT * 3)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        steps = [kit.stored_step(ref, "work") for ref in refs]
        started = [step.started_at for step in steps]
        assert None not in started
        _spacing_holds([s for s in started if s is not None], rate)
        assert len({step.node for step in steps}) >= 2, "one process did all the work"
        for process in processes:
            assert process.stop() == 0, process.log()

    @proves(Cap.RATE_LIMIT)
    def test_steps_draw_from_one_bucket_and_give_up_at_their_timeout(
        self, cairnflow_kit: Kit
    ) -> None:
        once = cf.Rate(1, per=3600.0)  # one token an hour: the second taker finds none

        wf = cf.Workflow("kit-takers")

        @wf.step
        def take(ctx: cf.StepContext, data: Any) -> dict[str, bool]:
            waited = ctx.take("kit-upstream", once, timeout=0.05)
            return {"waited": waited, "now": ctx.try_take("kit-upstream", once)}

        client = cairnflow_kit.client(wf, workers=1)
        first = client.wait(client.enqueue(wf, 1), timeout=TIMEOUT)
        second = client.wait(client.enqueue(wf, 2), timeout=TIMEOUT)
        assert first.status is second.status is cf.Status.SUCCEEDED
        assert first.result == {"waited": True, "now": False}
        assert second.result == {"waited": False, "now": False}
        # Application code draws from the same bucket as the steps.
        assert not cf.RateLimiter(cairnflow_kit.store).try_take("kit-upstream", once).granted
        assert client.try_take("kit-elsewhere", once).granted
        assert not client.take("kit-elsewhere", once, timeout=0)
