"""Leases in one process: takeover, fencing, max reclaims (LEASE); HEARTBEAT; PROGRESS.

Stalls are made with :class:`cairnflow.testing.Partition`: a real store behind a
switch that hangs a client's calls, like a lost network or a paused process.
These forms prove LEASE on any store, including ``memory://``, which cannot be
shared between processes; ``processes.py`` proves it again with real processes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import AttemptState, ClaimRequest, Failed, Succeeded

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, BehindClock, enqueue_and_claim, step_status_is, wait_until

__all__ = ["HeartbeatTests", "LeaseTests", "ProgressTests"]

_S = 10**9


class LeaseTests:
    """``Cap.LEASE``: a step whose worker died or stalled is retaken; late outcomes are fenced."""

    @proves(Cap.LEASE)
    def test_a_stalled_step_is_taken_over_and_its_late_outcome_is_not_written(
        self, cairnflow_kit: Kit
    ) -> None:
        runs_on: list[str] = []
        first_started = threading.Event()
        release_first = threading.Event()
        first_returned = threading.Event()
        wf = cf.Workflow("kit-stall")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            runs_on.append(ctx.node_id)
            if ctx.node_id == "kit-stalled":
                first_started.set()
                release_first.wait(TIMEOUT)  # the node is stalled here...
                first_returned.set()
                return "from the stalled node"
            return "from the node that took over"

        partition = cairnflow_kit.partition()
        stalled = cairnflow_kit.client(
            wf, store=partition, node_id="kit-stalled", lease=0.5, interrupt=False
        )
        ref = stalled.enqueue("kit-stall")
        assert first_started.wait(TIMEOUT)
        partition.cut()  # ...and cannot renew or write any more
        # The rescuer's own lease is long: only the stalled node's may run out here (on a
        # loaded machine a 0.5 s lease of the rescuer's could lapse between its renewals).
        rescuer = cairnflow_kit.client(wf, node_id="kit-rescuer", lease=5)
        info = rescuer.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        step = info.steps["work"]
        assert (step.attempts, step.reclaims) == (2, 1)
        finished_at = info.finished_at_ns
        release_first.set()
        partition.heal()  # the stalled node wakes up and tries to write
        assert first_returned.wait(TIMEOUT)
        stalled.stop(timeout=TIMEOUT)  # its worker has offered its outcome by now
        assert cairnflow_kit.stored_output(ref, "work") == "from the node that took over"
        after = rescuer.info(ref)
        assert after.finished_at_ns == finished_at
        assert after.steps["work"].attempts == 2
        assert runs_on == ["kit-stalled", "kit-rescuer"]

    @proves(Cap.LEASE)
    def test_the_store_fences_a_late_outcome_the_holder_never_noticed(
        self, cairnflow_kit: Kit
    ) -> None:
        # The holder's lease clock runs 5 s late, so its leases look expired to
        # everyone else from the start: another node takes the step over while
        # the holder still believes it holds it, and the holder's outcome
        # arrives with a stale token that only the store can refuse.
        holder_started = threading.Event()
        rescuer_started = threading.Event()
        returned: list[str] = []
        wf = cf.Workflow("kit-skewed")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            if ctx.node_id == "kit-holder":
                holder_started.set()
                rescuer_started.wait(TIMEOUT)
                returned.append("holder")
                return "holder"
            rescuer_started.set()
            time.sleep(0.3)
            returned.append("rescuer")
            return "rescuer"

        # One worker, busy with the first attempt: the holder's client must not claim the
        # attempt the rescuer requeued (its leases, too, would look expired from the start).
        holder = cairnflow_kit.client(
            wf,
            node_id="kit-holder",
            lease=3,
            lease_clock=BehindClock(5),
            interrupt=False,
            workers=1,
        )
        ref = holder.enqueue("kit-skewed")
        assert holder_started.wait(TIMEOUT)
        rescuer = cairnflow_kit.client(wf, node_id="kit-rescuer", lease=3)
        info = rescuer.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        # The holder returned first; had its stale outcome been written, the run
        # would have finished before the rescuer's attempt came back.
        assert "rescuer" in returned, "the run finished on the holder's stale outcome"
        wait_until(lambda: len(returned) == 2, timeout=TIMEOUT, what="both attempts to return")
        holder.stop(timeout=TIMEOUT)
        assert cairnflow_kit.stored_output(ref, "work") == "rescuer"
        assert cairnflow_kit.stored_step(ref, "work").attempt == 2

    @proves(Cap.LEASE)
    def test_a_step_that_kills_its_workers_is_abandoned_after_max_reclaims(
        self, cairnflow_kit: Kit
    ) -> None:
        killed: list[str] = []
        dead = threading.Event()  # set at the end, so the "dead" threads can exit
        cut: dict[str, Any] = {}
        wf = cf.Workflow("kit-poison-inproc")

        @wf.step
        def poison(ctx: cf.StepContext, data: Any) -> None:
            killed.append(ctx.node_id)
            cut[ctx.node_id].cut()  # this node "dies": it never renews nor writes again
            dead.wait(TIMEOUT)

        try:
            for node in ("kit-a", "kit-b"):
                cut[node] = cairnflow_kit.partition()
            options: dict[str, Any] = {"lease": 0.4, "max_reclaims": 1, "interrupt": False}
            a = cairnflow_kit.client(wf, store=cut["kit-a"], node_id="kit-a", **options)
            ref = a.enqueue("kit-poison-inproc")
            wait_until(lambda: killed == ["kit-a"], timeout=TIMEOUT, what="node a to die")
            cairnflow_kit.client(wf, store=cut["kit-b"], node_id="kit-b", **options)
            wait_until(
                lambda: killed == ["kit-a", "kit-b"], timeout=TIMEOUT, what="node b to die too"
            )
            watcher = cairnflow_kit.client(wf, node_id="kit-watcher", workers=1, **options)
            info = watcher.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.FAILED
            assert info.error is not None
            assert info.error.type == "Abandoned"
            assert "abandoned by 2 worker(s)" in info.error.message
            assert info.steps["poison"].status is cf.StepStatus.FAILED
            assert killed == ["kit-a", "kit-b"]
        finally:
            dead.set()

    @proves(Cap.LEASE)
    def test_a_holder_cut_off_from_the_store_fences_itself_after_a_whole_lease(
        self, cairnflow_kit: Kit
    ) -> None:
        fenced = threading.Event()
        fenced_at: list[int] = []
        wf = cf.Workflow("kit-selffence")
        partition = cairnflow_kit.partition(blocked={"renew"})
        lease = 0.4

        recorded: list[cf.StepInfo] = []

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> None:
            partition.cut()
            if ctx.cancel_event.wait(TIMEOUT):
                fenced_at.append(time.time_ns())
                # Read now, while this attempt still holds the only worker: nothing can
                # have claimed it again yet.
                recorded.append(client.info(ctx.run_id).steps["work"])
                fenced.set()

        # One worker, never claiming ahead: on a loaded machine the lease may run out
        # before the step starts, and this client must not claim the attempt again
        # (its recorded start would then be the second claim's).
        client = cairnflow_kit.client(
            wf, store=partition, lease=lease, interrupt=False, workers=1, prefetch=0
        )
        client.enqueue("kit-selffence")
        assert fenced.wait(TIMEOUT), "the holder never fenced itself"
        partition.heal()
        # Measured from the attempt's own recorded start (its claim), not from around a
        # call of the test's: the lease began at the claim, and no renewal landed since.
        (step,) = recorded
        started = step.started_at_ns
        assert started is not None
        assert step.attempts == 1, "the attempt was claimed again: its start is not the first"
        assert fenced_at[0] - started >= 0.75 * lease * 1e9, (
            f"the holder fenced itself {(fenced_at[0] - started) / 1e9:.3f}s after its claim, "
            f"before its lease of {lease}s ran out"
        )

    @proves(Cap.LEASE)
    def test_every_transition_is_fenced_by_the_lease_token(self, cairnflow_kit: Kit) -> None:
        # Straight through the SPI: an expired attempt is retaken, and the old
        # token can no longer finish, renew or hand back anything.
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-fence", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-fence", 1)
        now = time.time_ns()
        names = frozenset({"kit-fence"})

        def claim(node: str) -> str:
            claimed = store.claim(ClaimRequest(names, 5, time.time_ns(), now + 60 * _S, node))
            assert [c.run_id for c in claimed] == [ref.id]
            return claimed[0].token

        old = claim("kit-old")
        reclaimed = store.reclaim_expired(
            lease_now=now + 120 * _S, now=time.time_ns(), workflows=names, max_reclaims=5, limit=10
        )
        assert (reclaimed.requeued, reclaimed.abandoned) == (1, ())
        step = cairnflow_kit.stored_step(ref, "a")
        assert (step.status, step.reclaims) == (cf.StepStatus.READY, 1)
        new = claim("kit-new")
        assert new != old
        assert store.finish(old, Succeeded(b'"stale"'), time.time_ns()).state is AttemptState.LOST
        assert old in store.renew([old], now + 600 * _S).lost
        assert store.hand_back([old], time.time_ns()) == 0
        failed = Failed(cf.ErrorInfo("Stale", "stale"), retry_at=None)
        assert store.finish(old, failed, time.time_ns()).state is AttemptState.LOST
        held = store.get_run(ref.id)
        assert held is not None
        assert held.steps[0].status is cf.StepStatus.RUNNING
        assert held.steps[0].output is None
        assert held.steps[0].failures == 0
        assert store.renew([new], now + 60 * _S).lost == frozenset()
        done = store.finish(new, Succeeded(b'"fresh"'), time.time_ns())
        assert done.applied
        assert done.run_status is cf.Status.SUCCEEDED
        # The reclaimer's guard: a finished step is never resurrected.
        again = store.reclaim_expired(
            lease_now=now + 1200 * _S, now=time.time_ns(), workflows=names, max_reclaims=5, limit=10
        )
        assert (again.requeued, again.abandoned) == (0, ())
        finished = cairnflow_kit.stored_step(ref, "a")
        assert (finished.status, finished.reclaims) == (cf.StepStatus.SUCCEEDED, 1)
        assert cairnflow_kit.stored_output(ref, "a") == "fresh"
        assert client.info(ref).status is cf.Status.SUCCEEDED

    @proves(Cap.LEASE)
    def test_a_renewed_lease_is_not_reclaimed_before_its_new_end(self, cairnflow_kit: Kit) -> None:
        # At the SPI, on explicit times: renew() must move lease_until itself.
        store = cairnflow_kit.store
        (ref,), token_of = enqueue_and_claim(cairnflow_kit, "kit-renew-spi", 1)
        names = frozenset({"kit-renew-spi"})
        now = time.time_ns()
        renewed = now + 600 * _S  # far past the claim's own lease (60 s)
        result = store.renew([token_of[ref.id]], renewed)
        assert (result.lost, result.cancelled) == (frozenset(), frozenset())
        early = store.reclaim_expired(
            lease_now=renewed - 1, now=now, workflows=names, max_reclaims=5, limit=10
        )
        assert (early.requeued, early.abandoned) == (0, ()), "reclaimed before the renewed end"
        late = store.reclaim_expired(
            lease_now=renewed + 1, now=now, workflows=names, max_reclaims=5, limit=10
        )
        assert late.requeued == 1

    @proves(Cap.LEASE)
    def test_a_step_running_several_leases_keeps_its_lease_while_a_rescuer_watches(
        self, cairnflow_kit: Kit
    ) -> None:
        # Only the background renewal keeps the attempt: no heartbeat, and another
        # client polls for expired leases the whole time.
        lease = 2.0

        def long(ctx: cf.StepContext, data: Any) -> str:
            time.sleep(3 * lease)
            return "done"

        wf = cf.Workflow("kit-long", steps=[cf.Step("long", long)])
        client = cairnflow_kit.client(wf, lease=lease)
        ref = client.enqueue("kit-long")
        wait_until(
            lambda: step_status_is(client, ref, "long", cf.StepStatus.RUNNING),
            timeout=TIMEOUT,
            what="the long step to start",
        )
        rescuer = cairnflow_kit.client(wf, lease=lease, node_id="kit-rescuer")
        info = rescuer.wait(ref, timeout=TIMEOUT * 2)
        assert info.status is cf.Status.SUCCEEDED, info.error
        step = info.steps["long"]
        assert (step.attempts, step.reclaims) == (1, 0), "taken over while it was renewed"
        assert step.node == client.node_id

    @proves(Cap.LEASE)
    def test_an_attempt_reclaimed_too_often_is_returned_as_abandoned(
        self, cairnflow_kit: Kit
    ) -> None:
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-abandon-spi", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-abandon-spi", 1)
        names = frozenset({"kit-abandon-spi"})
        now = time.time_ns()
        tokens = []
        for round_ in range(3):
            claimed = store.claim(ClaimRequest(names, 1, time.time_ns(), now + _S, f"kit-{round_}"))
            assert len(claimed) == 1
            assert claimed[0].reclaims == round_
            tokens.append(claimed[0].token)
            result = store.reclaim_expired(
                lease_now=now + 10 * _S, now=now, workflows=names, max_reclaims=2, limit=10
            )
            if round_ < 2:
                assert (result.requeued, result.abandoned) == (1, ())
        assert result.requeued == 0
        assert [(a.run_id, a.step, a.token, a.reclaims) for a in result.abandoned] == [
            (ref.id, "a", tokens[-1], 2)
        ]
        # Abandoned attempts stay running under their token until the engine fails them.
        failed = Failed(cf.ErrorInfo("Abandoned", "abandoned"), retry_at=None)
        assert store.finish(tokens[-1], failed, time.time_ns()).run_status is cf.Status.FAILED


class HeartbeatTests:
    """``Cap.HEARTBEAT``: a step renews its lease now and learns whether it lost it."""

    @proves(Cap.HEARTBEAT)
    def test_a_heartbeat_renews_and_reports_a_lost_lease(self, cairnflow_kit: Kit) -> None:
        outcomes: list[str] = []
        beat_at: list[int | None] = []
        first_ended = threading.Event()
        store = cairnflow_kit.store
        wf = cf.Workflow("kit-beat")

        def first_attempt(ctx: cf.StepContext) -> str:
            ctx.heartbeat()
            outcomes.append("renewed")
            beat_at.append(cairnflow_kit.stored_step(ctx.run_id, "work").heartbeat_at)
            # Another node takes the step, as if our lease had run out.
            reclaimed = store.reclaim_expired(
                lease_now=time.time_ns() + 10**12,
                now=time.time_ns(),
                workflows={"kit-beat"},
                max_reclaims=9,
                limit=9,
            )
            outcomes.append(f"reclaimed {reclaimed.requeued}")
            try:
                ctx.heartbeat()
            except cf.LeaseLost:
                outcomes.append("lost")
                raise
            except Exception as error:  # shown by the assertion below, whatever it was
                outcomes.append(f"heartbeat raised {error!r}")
                raise
            return "kept a lease it had lost"

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            if ctx.attempt > 1:
                return "retaken"
            try:
                return first_attempt(ctx)
            finally:
                first_ended.set()

        client = cairnflow_kit.client(wf, lease=30)
        ref = client.enqueue("kit-beat")
        info = client.wait(ref, timeout=TIMEOUT)
        # The retaken attempt may succeed before the first one's last heartbeat returns (seen
        # on a busy machine): the first attempt is judged once its body has ended.
        assert first_ended.wait(TIMEOUT), "the first attempt never ended"
        assert outcomes == ["renewed", "reclaimed 1", "lost"], (info.status, info.steps["work"])
        assert beat_at, "the step never got past its first heartbeat"
        assert beat_at[0] is not None, "the heartbeat time was not recorded"
        assert info.status is cf.Status.SUCCEEDED
        step = info.steps["work"]
        assert (step.attempts, step.reclaims, step.failures) == (2, 1, 0)
        assert cairnflow_kit.stored_output(ref, "work") == "retaken"

    @proves(Cap.HEARTBEAT)
    def test_heartbeats_keep_a_step_whose_renewals_hang(self, cairnflow_kit: Kit) -> None:
        # The client's renewer is cut off; only the step's own heartbeats
        # renew its lease, for more than two leases, while a rescuer watches.
        # Beats every 0.1 s against a 2 s lease: a scheduler stall of up to ~1.9 s between
        # two beats (a loaded CI machine) still leaves the lease held.
        lease = 2.0
        partition = cairnflow_kit.partition(blocked={"renew"})
        beats: list[int] = []
        wf = cf.Workflow("kit-beating")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            partition.cut()
            ends = time.monotonic() + 2.5 * lease
            while time.monotonic() < ends:
                ctx.heartbeat()
                beats.append(ctx.attempt)
                time.sleep(0.1)
            return "kept"

        client = cairnflow_kit.client(wf, store=partition, lease=lease, node_id="kit-beater")
        cairnflow_kit.client(wf, node_id="kit-rescuer", lease=5)
        ref = client.enqueue("kit-beating")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        step = info.steps["work"]
        assert (step.attempts, step.reclaims) == (1, 0), "the step was taken over"
        assert set(beats) == {1}
        assert step.heartbeat_at_ns is not None


class ProgressTests:
    """``Cap.PROGRESS``: a running step reports progress that any client reads."""

    @proves(Cap.PROGRESS)
    def test_progress_is_readable_while_the_step_runs(self, cairnflow_kit: Kit) -> None:
        halfway = threading.Event()
        finish = threading.Event()
        wf = cf.Workflow("kit-progress")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            ctx.progress({"done": 50, "of": 100})
            halfway.set()
            finish.wait(TIMEOUT)
            ctx.progress({"done": 100, "of": 100})
            return "ok"

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-progress")
        assert halfway.wait(TIMEOUT)
        observer_store = cairnflow_kit.peer_stores(1)[0]
        observer = cairnflow_kit.client(wf, start=False, store=observer_store)
        running = observer.info(ref).steps["work"]
        assert running.status is cf.StepStatus.RUNNING
        assert running.progress == {"done": 50, "of": 100}
        finish.set()
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert observer.info(ref).steps["work"].progress == {"done": 100, "of": 100}

    @proves(Cap.PROGRESS)
    def test_progress_after_a_lost_lease_is_refused(self, cairnflow_kit: Kit) -> None:
        store = cairnflow_kit.store
        seen: list[Any] = []
        wf = cf.Workflow("kit-progress-lost")

        @wf.step
        def work(ctx: cf.StepContext, data: Any) -> str:
            if ctx.attempt > 1:
                return "retaken"
            try:
                ctx.progress(1)
                store.reclaim_expired(
                    lease_now=time.time_ns() + 10**12,
                    now=time.time_ns(),
                    workflows={"kit-progress-lost"},
                    max_reclaims=9,
                    limit=9,
                )
                with pytest.raises(cf.LeaseLost):
                    ctx.progress(2)
                raw = cairnflow_kit.stored_step(ctx.run_id, "work").progress
                seen.append(None if raw is None else cairnflow_kit.codec.decode(raw))
                return "kept a lease it had lost"
            finally:
                first_ended.set()

        # The retaken attempt may end the run while the first one still runs (a notifier
        # wakes the client as soon as the lease is taken back): wait for the first one too.
        first_ended = threading.Event()
        client = cairnflow_kit.client(wf, lease=30)
        ref = client.enqueue("kit-progress-lost")
        info = client.wait(ref, timeout=TIMEOUT)
        assert first_ended.wait(TIMEOUT), "the first attempt never ended"
        assert seen == [1], "progress written after the lease was lost"
        assert info.steps["work"].attempts == 2
        assert cairnflow_kit.stored_output(ref, "work") == "retaken"
