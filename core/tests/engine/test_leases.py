"""Leases: takeover after a stall, fencing of late outcomes, max reclaims, clean stop.

Stalls are made with :class:`cairnflow.testing.Partition`: a real store behind
a switch that hangs a client's renewals and writes, like a lost network or a
process paused at the worst moment.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import cairnflow as cf
from cairnflow.clock import Real
from cairnflow.store import ClaimRequest, MemoryStore, Succeeded
from cairnflow.testing import Partition, wait_until


class BehindClock:
    """Wall time running ``seconds`` behind: a node whose clock is late."""

    def __init__(self, seconds: float) -> None:
        self._offset = int(seconds * 1e9)

    def now_ns(self) -> int:
        return Real().now_ns() - self._offset


def test_a_stalled_step_is_taken_over_and_the_late_outcome_is_not_written(
    make_client: Any, store: MemoryStore, partitions: list[Partition]
) -> None:
    runs_on: Counter[str] = Counter()
    first_started = threading.Event()
    release_first = threading.Event()
    wf = cf.Workflow("stall")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> str:
        runs_on[ctx.node_id] += 1
        if ctx.node_id == "stalled":
            first_started.set()
            release_first.wait(10)  # the node is stalled here...
            return "from the stalled node"
        return "from the node that took over"

    partition = Partition(store)
    partitions.append(partition)
    stalled = make_client(wf, on=partition, node_id="stalled", lease=0.5, interrupt=False)
    ref = stalled.enqueue("stall")
    assert first_started.wait(5)
    partition.cut()  # ...and cannot renew or write any more
    rescuer = make_client(wf, node_id="rescuer", lease=0.5)
    info = rescuer.wait(ref, timeout=10)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == "from the node that took over"
    assert info.steps["work"].node == "rescuer"
    assert info.steps["work"].reclaims == 1
    release_first.set()
    partition.heal()  # the stalled node wakes up and tries to write
    time.sleep(0.5)
    assert rescuer.info(ref).result == "from the node that took over"
    assert runs_on == {"stalled": 1, "rescuer": 1}


def test_the_store_fences_a_late_outcome_even_when_the_holder_never_noticed(
    make_client: Any, store: MemoryStore
) -> None:
    # The holder's lease clock runs 5 s late, so its leases look expired to
    # everyone else from the start: another node takes the step over while
    # the holder still believes it holds it, and the holder's finish arrives
    # with a stale token.
    holder_started = threading.Event()
    rescuer_started = threading.Event()
    results: list[str] = []
    wf = cf.Workflow("skewed")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> str:
        if ctx.node_id == "holder":
            holder_started.set()
            rescuer_started.wait(10)
            results.append("holder returned")
            return "holder"
        rescuer_started.set()
        time.sleep(0.2)
        results.append("rescuer returned")
        return "rescuer"

    holder = make_client(wf, node_id="holder", lease=3, lease_clock=BehindClock(5), interrupt=False)
    ref = holder.enqueue("skewed")
    assert holder_started.wait(5)
    make_client(wf, node_id="rescuer", lease=3)
    info = holder.wait(ref, timeout=10)
    wait_until(lambda: len(results) == 2, what="both attempts to return")
    time.sleep(0.2)
    info = holder.info(ref)
    assert info.result == "rescuer"
    assert info.steps["work"].node == "rescuer"


def test_an_outcome_stalled_on_its_way_to_the_store_is_fenced_out(
    make_client: Any, store: MemoryStore, partitions: list[Partition]
) -> None:
    # The worst moment: the step has returned and its outcome is being
    # written when the node stalls. Another node takes the step over; when the
    # stalled write finally lands, its token no longer holds the step.
    returned = threading.Event()
    wf = cf.Workflow("late-write")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> str:
        if ctx.node_id == "stalled":
            partition.cut()  # everything this node sends from now on hangs
            returned.set()
            return "written late"
        return "written by the rescuer"

    partition = Partition(store)
    partitions.append(partition)
    stalled = make_client(wf, on=partition, node_id="stalled", lease=0.5)
    ref = stalled.enqueue("late-write")
    assert returned.wait(5)
    rescuer = make_client(wf, node_id="rescuer", lease=0.5)
    assert rescuer.wait(ref, timeout=10).result == "written by the rescuer"
    partition.heal()  # the stalled write goes through now...
    wait_until(
        lambda: (
            "finish_many" in partition.calls
            or "finish" in partition.calls
            or "finish_and_claim" in partition.calls
        ),
        what="the late write",
    )
    time.sleep(0.2)
    info = rescuer.info(ref)
    assert info.result == "written by the rescuer"  # ...and changes nothing
    assert info.steps["work"].node == "rescuer"


def test_a_partitioned_holder_fences_itself_after_a_whole_lease(
    make_client: Any, store: MemoryStore, partitions: list[Partition]
) -> None:
    fenced = threading.Event()
    wf = cf.Workflow("selffence")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> None:
        partition.cut()
        if ctx.cancel_event.wait(10):
            fenced.set()

    partition = Partition(store, blocked={"renew"})
    partitions.append(partition)
    client = make_client(wf, on=partition, lease=0.4, interrupt=False)
    client.enqueue("selffence")
    started = time.monotonic()
    assert fenced.wait(5)
    assert time.monotonic() - started >= 0.3


def test_clean_stop_hands_running_steps_back_at_once(make_client: Any, store: MemoryStore) -> None:
    started = threading.Event()
    saw_stop = threading.Event()
    wf = cf.Workflow("handback")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> str:
        if ctx.node_id == "leaving":
            started.set()
            if ctx.cancel_event.wait(10):
                saw_stop.set()
            return "from the stopped client"
        return "from the next client"

    leaving = make_client(wf, node_id="leaving", lease=60, interrupt=False)
    ref = leaving.enqueue("handback")
    assert started.wait(5)
    before = time.monotonic()
    leaving.stop()
    assert saw_stop.is_set()
    step = leaving.info(ref).steps["work"]
    assert step.status is cf.StepStatus.READY  # handed back, not waiting out a 60 s lease
    make_client(wf, node_id="next", lease=60)
    info = leaving.wait(ref, timeout=10)
    assert time.monotonic() - before < 10
    assert info.result == "from the next client"
    assert info.steps["work"].attempts == 2


def test_stop_with_grace_lets_running_steps_finish(make_client: Any) -> None:
    wf = cf.Workflow("graceful")
    started = threading.Event()

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> str:
        started.set()
        time.sleep(0.3)
        return "done"

    client = make_client(wf)
    ref = client.enqueue("graceful")
    assert started.wait(5)
    client.stop(grace=5)
    assert client.info(ref).status is cf.Status.SUCCEEDED


def test_heartbeat_renews_and_reports_a_lost_lease(make_client: Any, store: MemoryStore) -> None:
    outcomes: list[str] = []
    wf = cf.Workflow("beat")

    @wf.step
    def work(ctx: cf.StepContext, data: Any) -> None:
        if ctx.attempt > 1:
            return  # the attempt after the steal just finishes
        ctx.heartbeat()
        outcomes.append("renewed")
        # Another node steals the step (as if our lease had run out).
        store.reclaim_expired(
            lease_now=time.time_ns() + 10**12,
            now=time.time_ns(),
            workflows={"beat"},
            max_reclaims=9,
            limit=9,
        )
        try:
            ctx.heartbeat()
        except cf.LeaseLost:
            outcomes.append("lost")
            raise

    client = make_client(wf, lease=30)
    ref = client.enqueue("beat")
    wait_until(lambda: outcomes == ["renewed", "lost"], what="the second heartbeat")
    assert client.info(ref).steps["work"].heartbeat_at is not None


def test_claims_never_hand_one_attempt_to_two_workers(store: MemoryStore) -> None:
    wf = cf.Workflow("many", steps=[cf.Step("a", lambda c, d: d)])
    client = cf.Client(store)
    client.register(wf)
    for n in range(300):
        client.enqueue("many", n)
    tokens: list[str] = []
    lock = threading.Lock()

    def claim() -> None:
        while True:
            got = store.claim(
                ClaimRequest(frozenset({"many"}), 7, time.time_ns(), time.time_ns() + 10**10, "n")
            )
            if not got:
                return
            with lock:
                tokens.extend(f"{a.run_id}/{a.step}" for a in got)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(tokens) == 300 == len(set(tokens))


class Outage:
    """A real store whose writes fail as unavailable for a while, like a database restart."""

    def __init__(self, inner: Any, failures: int) -> None:
        self._inner = inner
        self.failures_left = failures

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in {"finish", "finish_many", "finish_and_claim"}:
            return target

        def flaky(*args: Any, **kwargs: Any) -> Any:
            if self.failures_left > 0:
                self.failures_left -= 1
                raise cf.Unavailable("the server is restarting")
            return target(*args, **kwargs)

        return flaky


class Poison:
    """A real store whose server drops the connection over one outcome, every time (MariaDB
    and a packet over ``max_allowed_packet``): each write that carries it is unavailable."""

    def __init__(self, inner: Any, poison: bytes, error: Exception | None = None) -> None:
        self._inner = inner
        self._poison = poison
        self._error = error or cf.Unavailable("MySQL server has gone away")
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in {"finish", "finish_many", "finish_and_claim"}:
            return target

        def write(*args: Any, **kwargs: Any) -> Any:
            items = [(args[0], args[1])] if name == "finish" else args[0]
            if any(isinstance(o, Succeeded) and o.output == self._poison for _, o in items):
                self.refused += 1
                raise self._error
            return target(*args, **kwargs)

        return write


def test_an_outcome_the_server_keeps_dropping_fails_its_attempt_while_the_rest_flow(
    make_client: Any, store: MemoryStore
) -> None:
    poison = Poison(store, b'"poison"')
    wf = cf.Workflow("poison", steps=[cf.Step("echo", lambda ctx, d: d, retry=cf.NO_RETRY)])
    client = make_client(wf, on=poison, lease=2.0)
    bad = client.enqueue("poison", "poison")
    good = [client.enqueue("poison", n) for n in range(20)]
    for ref in good:
        assert client.wait(ref, timeout=10).status is cf.Status.SUCCEEDED
    info = client.wait(bad, timeout=30)
    assert info.status is cf.Status.FAILED
    echo = info.steps["echo"]
    # Failed by the client that ran it, once: not retaken after its lease, again and again.
    assert (echo.attempts, echo.reclaims) == (1, 0)
    assert echo.error is not None and echo.error.type == "OutcomeRefused"
    assert "could not be written after trying for" in echo.error.message
    assert "MySQL server has gone away" in echo.error.message
    assert poison.refused >= 2  # the outage was retried before the attempt was failed
    # The other runs were written while the poison outcome waited out its pauses.
    assert info.finished_at_ns is not None
    assert all(client.info(ref).finished_at_ns < info.finished_at_ns for ref in good)


def test_an_outcome_the_store_refuses_as_too_large_fails_its_attempt_at_once(
    make_client: Any, store: MemoryStore
) -> None:
    too_large = cf.PayloadTooLarge(20 << 20, 16 << 20, "the output (max_allowed_packet)")
    poison = Poison(store, b'"poison"', too_large)
    retry = cf.RetryPolicy(max_attempts=5)
    wf = cf.Workflow("too-large", steps=[cf.Step("echo", lambda ctx, d: d, retry=retry)])
    client = make_client(wf, on=poison)
    info = client.wait(client.enqueue("too-large", "poison"), timeout=10)
    assert info.status is cf.Status.FAILED
    echo = info.steps["echo"]
    assert (echo.attempts, echo.reclaims, poison.refused) == (1, 0, 1)  # no retry can help
    assert echo.error is not None and echo.error.type == "PayloadTooLarge"
    assert "over the limit of 16777216 bytes" in echo.error.message


def test_an_outcome_the_store_refuses_for_what_it_is_fails_its_attempt_for_good(
    make_client: Any, store: MemoryStore
) -> None:
    refusal = cf.ValueRefused("postgres store refused a value: bigint out of range")
    poison = Poison(store, b'"poison"', refusal)
    retry = cf.RetryPolicy(max_attempts=5)
    wf = cf.Workflow("refused", steps=[cf.Step("echo", lambda ctx, d: d, retry=retry)])
    client = make_client(wf, on=poison)
    info = client.wait(client.enqueue("refused", "poison"), timeout=10)
    assert info.status is cf.Status.FAILED
    echo = info.steps["echo"]
    # The same output would be refused again: no retry, whatever the policy says.
    assert (echo.attempts, echo.reclaims, poison.refused) == (1, 0, 1)
    assert echo.error is not None and echo.error.type == "ValueRefused"
    assert echo.error.message == "postgres store refused a value: bigint out of range"


def test_an_outcome_is_written_after_a_short_outage(make_client: Any, store: MemoryStore) -> None:
    outage = Outage(store, failures=3)
    wf = cf.Workflow("outage", steps=[cf.Step("work", lambda ctx, d: "done")])
    client = make_client(wf, on=outage, lease=5)
    info = client.wait(client.enqueue("outage"), timeout=10)
    assert info.result == "done"
    assert info.steps["work"].attempts == 1  # written by the first attempt, not re-run
    assert outage.failures_left == 0


class SlowWrites:
    """A store whose outcome writes take ``seconds``: steps shorter than that are claimed ahead."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self._inner = inner
        self._seconds = seconds

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in {"finish", "finish_many", "finish_and_claim"}:
            return target

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(self._seconds)
            return target(*args, **kwargs)

        return slow


def test_attempts_claimed_ahead_by_a_stalled_client_are_taken_over_and_run_once(
    make_client: Any, store: MemoryStore, partitions: list[Partition]
) -> None:
    # The worst moment for claiming ahead: the client holds more attempts than it has
    # workers, some waiting for a worker that is busy, when it stalls. Every one of them
    # must be taken over after its lease and succeed, and the stalled client's late
    # outcomes must not be written.
    blocking = threading.Semaphore(0)
    release = threading.Event()
    wf = cf.Workflow("ahead")

    @wf.step
    def work(ctx: cf.StepContext, job: str) -> str:
        if job == "block" and ctx.node_id == "stalled":
            blocking.release()
            release.wait(20)  # both workers are stuck here...
        else:
            time.sleep(0.001)
        return ctx.node_id

    partition = Partition(SlowWrites(store, 0.02))
    partitions.append(partition)
    stalled = make_client(
        wf, on=partition, node_id="stalled", workers=2, prefetch=2, lease=0.5, interrupt=False
    )
    state = stalled._state
    # Short steps against 20 ms writes: from here on the client claims ahead.
    for ref in [stalled.enqueue("ahead", "quick") for _ in range(10)]:
        assert stalled.wait(ref, timeout=10).status is cf.Status.SUCCEEDED
    assert state.claim_ahead() == 2
    refs = [stalled.enqueue("ahead", "block") for _ in range(2)]
    refs += [stalled.enqueue("ahead", "quick") for _ in range(6)]
    for _ in range(2):
        assert blocking.acquire(timeout=10)
    # ...while attempts claimed ahead of a free worker wait behind them.
    wait_until(
        lambda: sum(1 for a in state.held_attempts() if not a.finalized) > 2,
        what="attempts claimed ahead of a free worker",
    )
    partition.cut()
    held = {a.claimed.run_id for a in state.held_attempts() if not a.finalized}
    assert len(held) > 2
    rescuer = make_client(wf, node_id="rescuer", lease=0.5)
    for ref in refs:
        assert rescuer.wait(ref, timeout=20).status is cf.Status.SUCCEEDED
    for run_id in held:  # what the stalled client held was finished by the rescuer
        info = rescuer.info(run_id)
        assert info.result == "rescuer"
        assert info.steps["work"].reclaims == 1
    release.set()
    partition.heal()  # the stalled client's late outcomes are fenced out
    time.sleep(0.5)
    for run_id in held:
        assert rescuer.info(run_id).result == "rescuer"
