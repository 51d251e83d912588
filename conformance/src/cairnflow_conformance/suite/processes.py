"""Several processes on one store (MULTI_PROCESS), and leases across real processes (LEASE).

Workers are ``python -m cairnflow_conformance._worker`` processes built with the
target's ``worker_factory``. A worker killed with SIGKILL plays a crashed
machine; one paused with SIGSTOP plays a stalled one (every thread stops, its
leases run out, then it resumes as if nothing happened). What a step did is
counted from :class:`~cairnflow_conformance.traces.Traces`; what was written,
from the store.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import ClaimedAttempt, ClaimRequest

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

NUDGE_AFTER = 4.0
"""Seconds a stalled worker stays paused with its step not yet rescued before it is nudged:
its 1 s lease, the rescuer's start and first claim, with room for a slow machine."""

__all__ = ["MultiProcessTests"]

_GROUP = pytest.mark.xdist_group("cairnflow-conformance-processes")


def _payload(kit: Kit, **extra: Any) -> dict[str, Any]:
    return {"traces": str(kit.traces.directory), **extra}


class MultiProcessTests:
    """``Cap.MULTI_PROCESS``, and ``Cap.LEASE`` with real crashed and stalled processes."""

    @_GROUP
    @proves(Cap.MULTI_PROCESS)
    def test_eight_processes_migrating_at_once_apply_each_version_once(
        self, cairnflow_kit: Kit
    ) -> None:
        # Deploys start many processes at once, each calling migrate(): the store must
        # serialise them (a lock taken before the ledger is read), so each version is
        # applied by exactly one of them and none fails.
        kit = cairnflow_kit
        fresh = kit.fresh_namespace()
        applied = kit.processes.migrate_at_once(fresh, 8)
        labels = [label for one in applied for label in one]
        assert len(labels) == len(set(labels)), f"a version was applied twice: {applied}"
        store = kit.open_store(fresh)
        store.check_schema()
        assert store.migrate() == [], "every version was applied already"

    @_GROUP
    @proves(Cap.MULTI_PROCESS)
    def test_worker_processes_complete_every_run_with_each_step_once(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        nodes = [f"kit-worker-{n}" for n in range(3)]
        processes = [kit.processes.spawn(node, workers=2) for node in nodes]
        client = kit.client(workflows.fanout(), start=False)
        refs = [client.enqueue(workflows.FANOUT, _payload(kit, work=0.02)) for _ in range(24)]
        for ref in refs:
            info = client.wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        used: set[str] = set()
        for ref in refs:
            stored = kit.stored(ref)
            assert stored.state == cf.Status.SUCCEEDED.value
            for step in stored.steps:
                assert step.status is cf.StepStatus.SUCCEEDED
                assert (step.attempt, step.reclaims) == (1, 0), f"{ref.id}/{step.name} ran twice"
                output = kit.stored_output(ref, step.name)
                assert output["step"] == step.name
                used.add(output["node"])
                executions = kit.traces.count("exec", run=ref.id, step=step.name)
                assert executions == 1, f"{ref.id}/{step.name} executed {executions} times"
        assert used <= set(nodes)
        assert len(used) >= 2, f"one process did all the work ({used}): nothing was shared"
        for process in processes:
            assert process.alive, kit.processes.logs()
            assert process.stop() == 0, process.log()

    @proves(Cap.MULTI_PROCESS)
    def test_a_claim_takes_the_ready_steps_another_claim_holds_no_lock_on(
        self, cairnflow_kit: Kit
    ) -> None:
        # Many workers claim at once: a claim must not queue behind another claim's
        # transaction. While one claim holds the two steps it took (its transaction
        # still open: FOR UPDATE SKIP LOCKED has them locked), a claim on another store
        # object returns the two other ready steps, and none of the held ones.
        kit = cairnflow_kit
        name = "kit-skip-locked"
        client = kit.client(cf.Workflow(name, steps=[cf.Step("a", lambda c, d: d)]), start=False)
        runs = {client.enqueue(name, n).id for n in range(4)}
        holder, peer = kit.peer_stores(2)
        now = time.time_ns()

        def request(limit: int, node: str) -> ClaimRequest:
            return ClaimRequest(frozenset({name}), limit, now, now + 600 * 10**9, node)

        got: list[ClaimedAttempt] = []
        errors: list[BaseException] = []

        def claim_beside() -> None:
            try:
                got.extend(peer.claim(request(10, "kit-peer")))
            except BaseException as error:  # noqa: BLE001 - asserted on below
                errors.append(error)

        hold = kit.claim_holder(holder)
        if hold is None:
            # The store's claims never overlap (one writer): one after the other, then.
            holder.claim(request(2, "kit-holder"))
            claim_beside()
            waited = False
        else:
            beside = threading.Thread(target=claim_beside, name="kit-claim-beside", daemon=True)
            with hold(holder, request(2, "kit-holder")):
                beside.start()
                beside.join(TIMEOUT)
                waited = beside.is_alive()
            beside.join(TIMEOUT)
        assert not errors, errors
        assert not waited, (
            "a claim waited for the steps another claim's open transaction holds: claims "
            "must skip the rows other claims locked (FOR UPDATE SKIP LOCKED), not queue "
            "behind them"
        )
        nodes = {run: kit.stored_step(run, "a") for run in runs}
        by_node: dict[str | None, set[str]] = {}
        for run, step in nodes.items():
            assert (step.status, step.attempt) == (cf.StepStatus.RUNNING, 1), (run, step)
            by_node.setdefault(step.node, set()).add(run)
        assert {a.run_id for a in got} == by_node.get("kit-peer"), by_node
        assert len(by_node.get("kit-holder", ())) == 2, by_node
        assert len(got) == 2, "the claim beside the held one missed ready steps"

    @_GROUP
    @proves(Cap.LEASE, Cap.MULTI_PROCESS)
    def test_a_killed_workers_step_is_retaken_after_its_lease_and_the_run_completes(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.hold(), start=False)
        ref = client.enqueue(workflows.HOLD, _payload(kit))
        doomed = kit.processes.spawn("kit-doomed", lease=1.0)
        wait_until(
            lambda: kit.traces.count("exec", run=ref.id, step="hold", phase="started") == 1,
            timeout=TIMEOUT,
            what="the doomed worker to start the step",
        )
        doomed.kill()
        assert doomed.returncode == -signal.SIGKILL
        # Only the doomed worker's lease is short: the survivor's own must not lapse
        # between its renewals on a loaded machine (its attempt would be retaken too).
        survivor = kit.processes.spawn("kit-survivor", lease=5.0)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        hold = kit.stored_step(ref, "hold")
        assert (hold.attempt, hold.reclaims) == (2, 1)
        assert kit.stored_output(ref, "hold")["node"] == "kit-survivor"
        assert kit.stored_output(ref, "first")["node"] == "kit-doomed"
        assert kit.stored_output(ref, "last")["node"] == "kit-survivor"
        for name in ("first", "last"):
            assert kit.stored_step(ref, name).attempt == 1
            assert kit.traces.count("exec", run=ref.id, step=name) == 1
        started = kit.traces.read("exec", run=ref.id, step="hold", phase="started")
        assert [(t["attempt"], t["node"]) for t in started] == [
            (1, "kit-doomed"),
            (2, "kit-survivor"),
        ]
        assert kit.traces.count("exec", run=ref.id, step="hold", phase="returned") == 1
        assert survivor.stop() == 0, survivor.log()

    @_GROUP
    @proves(Cap.COMPENSATION, requires=[Cap.LEASE, Cap.MULTI_PROCESS])
    def test_a_worker_killed_mid_compensation_is_replaced_and_the_run_ends_failed(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.saga(), start=False)
        ref = client.enqueue(workflows.SAGA, _payload(kit))
        doomed = kit.processes.spawn("kit-doomed", lease=1.0)
        wait_until(
            lambda: kit.traces.count("exec", run=ref.id, step="refund", phase="started") == 1,
            timeout=TIMEOUT,
            what="the doomed worker to start the compensation",
        )
        doomed.kill()
        assert doomed.returncode == -signal.SIGKILL
        survivor = kit.processes.spawn("kit-survivor", lease=5.0)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED, (info.error, kit.processes.logs())
        assert info.error is not None
        assert info.error.step == "ship"
        refund = kit.stored_step(ref, "refund")
        assert refund.status is cf.StepStatus.SUCCEEDED
        assert (refund.attempt, refund.reclaims) == (2, 1)
        assert kit.stored_output(ref, "refund")["node"] == "kit-survivor"
        started = kit.traces.read("exec", run=ref.id, step="refund", phase="started")
        assert [(t["attempt"], t["node"], t["charged_on"]) for t in started] == [
            (1, "kit-doomed", "kit-doomed"),
            (2, "kit-survivor", "kit-doomed"),
        ]
        assert kit.traces.count("exec", run=ref.id, step="refund", phase="returned") == 1
        for name in ("charge", "ship"):
            assert kit.traces.count("exec", run=ref.id, step=name) == 1
        assert survivor.stop() == 0, survivor.log()

    @_GROUP
    @proves(Cap.LEASE, Cap.MULTI_PROCESS)
    def test_a_stalled_workers_late_outcome_is_fenced_out(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.hold(), start=False)
        ref = client.enqueue(workflows.HOLD, _payload(kit))
        # A long poll: the stalled worker claims at start, then sits quiet,
        # so the pause almost never lands inside one of its transactions.
        stalled = kit.processes.spawn("kit-stalled", lease=1.0, poll=5.0, interrupt=False)
        wait_until(
            lambda: kit.traces.count("exec", run=ref.id, step="hold", phase="started") == 1,
            timeout=TIMEOUT,
            what="the worker to start the step",
        )
        stalled.pause()
        rescuer = kit.processes.spawn("kit-rescuer", lease=5.0)  # only the stalled lease lapses
        # A pause that lands inside one of the stalled worker's transactions (a lease renewal,
        # every third of its 1 s lease) holds that transaction's locks until it resumes: on
        # SQLite the database's write lock, which no other process can then take. Such a
        # stall proves nothing about leases, so it is nudged (resumed for an instant, paused
        # again) until the rescuer starts the step; its lease then lapses again.
        ends = time.monotonic() + TIMEOUT
        nudged = time.monotonic()
        while kit.traces.count("exec", run=ref.id, step="hold", phase="started") < 2:
            assert time.monotonic() < ends, f"no rescue in {TIMEOUT}s: {kit.processes.logs()}"
            if time.monotonic() - nudged > NUDGE_AFTER:
                stalled.resume()
                time.sleep(0.02)
                stalled.pause()
                nudged = time.monotonic()
            time.sleep(0.05)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, (info.error, kit.processes.logs())
        winner = kit.stored_output(ref, "hold")
        assert (winner["node"], winner["attempt"]) == ("kit-rescuer", 2)
        finished_at = kit.stored(ref).finished_at
        # The stalled worker wakes up, finishes its attempt and offers the outcome.
        kit.traces.flag(workflows.RELEASE)
        stalled.resume()
        wait_until(
            lambda: (
                kit.traces.count("exec", run=ref.id, step="hold", attempt=1, phase="returned") == 1
            ),
            timeout=TIMEOUT,
            what="the stalled attempt to return",
        )
        # A clean stop waits for its workers: whatever it was going to write is written.
        assert stalled.stop() == 0, stalled.log()
        assert kit.stored_output(ref, "hold") == winner
        after = kit.stored(ref)
        assert after.state == cf.Status.SUCCEEDED.value
        assert after.finished_at == finished_at
        assert kit.stored_step(ref, "hold").attempt == 2
        assert kit.stored_step(ref, "last").attempt == 1
        assert kit.traces.count("exec", run=ref.id, step="last") == 1
        assert rescuer.stop() == 0, rescuer.log()

    @_GROUP
    @proves(Cap.LEASE, Cap.MULTI_PROCESS)
    def test_a_step_that_kills_every_worker_is_abandoned_after_max_reclaims(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        client = kit.client(workflows.poison(), start=False)
        processes = [
            kit.processes.spawn(f"kit-victim-{n}", workers=1, lease=1.0, max_reclaims=1)
            for n in range(3)
        ]
        ref = client.enqueue(workflows.POISON, _payload(kit))
        info = client.wait(ref, timeout=TIMEOUT * 2)
        assert info.status is cf.Status.FAILED, kit.processes.logs()
        assert info.error is not None
        assert info.error.type == "Abandoned", info.error
        assert "abandoned by 2 worker(s)" in info.error.message
        assert kit.stored_step(ref, "poison").reclaims == 1
        assert kit.traces.count("exec", run=ref.id, step="poison") == 2
        dead = [p for p in processes if not p.alive]
        assert len(dead) == 2, processes
        assert all(p.returncode == -signal.SIGKILL for p in dead)
        survivor = next(p for p in processes if p.alive)
        assert survivor.stop() == 0, survivor.log()
