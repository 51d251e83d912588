"""``Cap.DATABASE_CLOCK``: the database server's clock as the one "now" of every node.

A node whose own clock is an hour behind must still stamp due times and
leases with the database's time when it runs with ``database_clock=True``;
``lease_skew`` makes the others wait that much longer before taking a step over.
"""

from __future__ import annotations

import threading
import time

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import ClaimRequest

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

__all__ = ["DatabaseClockTests"]

_HOUR_NS = 3600 * 10**9
_MINUTE_NS = 60 * 10**9


def _database_now(kit: Kit) -> int:
    read = getattr(kit.store, "database_now", None)
    assert callable(read), "a store declaring DATABASE_CLOCK must offer database_now()"
    return int(read())


class DatabaseClockTests:
    """``Cap.DATABASE_CLOCK``."""

    @proves(Cap.DATABASE_CLOCK)
    def test_a_node_whose_clock_is_an_hour_late_still_uses_the_databases_time(
        self, cairnflow_kit: Kit, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        kit = cairnflow_kit
        release = threading.Event()
        wf = cf.Workflow("kit-db-clock")
        wf.step(lambda ctx, d: release.wait(TIMEOUT) and "done", name="hold")
        real_time_ns = time.time_ns
        before = _database_now(kit)
        assert abs(before - real_time_ns()) < _MINUTE_NS, "the server and this machine disagree"
        # From here on, this machine's wall clock runs an hour late.
        monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() - _HOUR_NS)
        local = kit.client(wf, start=False)  # stamps with the late local clock
        late = local.enqueue("kit-db-clock", 1)
        assert kit.stored(late).created_at < before - 50 * _MINUTE_NS, "the local clock is not late"
        client = kit.client(wf, database_clock=True, lease=30)
        ref = client.enqueue("kit-db-clock", 2)
        created = kit.stored(ref).created_at
        assert abs(created - _database_now(kit)) < _MINUTE_NS, "the run was stamped with local time"
        wait_until(
            lambda: kit.stored_step(ref, "hold").status is cf.StepStatus.RUNNING,
            timeout=TIMEOUT,
            what="the step to start",
        )
        started = kit.stored_step(ref, "hold").started_at
        assert started is not None
        assert abs(started - _database_now(kit)) < _MINUTE_NS
        # Its lease was written in the database's time too: nobody may take it over now.
        taken = kit.store.reclaim_expired(
            lease_now=_database_now(kit),
            now=_database_now(kit),
            workflows={"kit-db-clock"},
            max_reclaims=5,
            limit=10,
        )
        assert (taken.requeued, taken.abandoned) == (0, ())
        release.set()
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED

    @proves(Cap.DATABASE_CLOCK, requires=(Cap.LEASE,))
    def test_lease_skew_makes_others_wait_longer_before_a_takeover(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        wf = cf.Workflow("kit-skew", steps=[cf.Step("work", lambda c, d: "rescued")])
        client = kit.client(wf, start=False)
        ref = client.enqueue("kit-skew", None)
        # A worker claims the step for one second of the database's time, then dies.
        claimed_at = _database_now(kit)
        dead = kit.store.claim(
            ClaimRequest(
                workflows=frozenset({"kit-skew"}),
                limit=1,
                # A second ahead: the run was stamped by the local clock, which may
                # read a little later than the server (millisecond clocks exist).
                now=claimed_at + 10**9,
                lease_until=claimed_at + 10**9,
                node_id="kit-dead",
            )
        )
        assert len(dead) == 1
        rescuer = kit.client(wf, database_clock=True, lease_skew=4.0, node_id="kit-rescuer")
        time.sleep(2.5)  # the lease ended 1.5 s ago, but the skew is 4 s
        step = kit.stored_step(ref, "work")
        assert (step.status, step.reclaims) == (cf.StepStatus.RUNNING, 0), "taken over too early"
        info = rescuer.wait(ref, timeout=TIMEOUT)
        assert info.result == "rescued"
        step = kit.stored_step(ref, "work")
        assert (step.node, step.reclaims) == ("kit-rescuer", 1)
        assert step.started_at is not None
        assert step.started_at >= claimed_at + 5 * 10**9 - 10**8, "taken over before lease + skew"
