"""Tenants (``Cap.TENANT``): a run's tenant is kept, read by its steps, filtered on, given to
every run a schedule fires, and owns per-tenant concurrency keys and rate buckets.

What a run carries is read back through the client (``info``, ``runs``) and from inside its
steps (``ctx.tenant``); per-tenant limits are proven by what the steps saw: two tenants'
runs of one per-tenant key wait for each other (so neither holds the other's slot), and a
bucket of one token an hour admits one take per tenant.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any, cast

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.clock import Fake
from cairnflow.store import RunQuery

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

__all__ = ["TenantTests"]

_HOURLY = cf.Rate(1, per=3600)
"""A bucket that admits one take, then none for an hour: what a take got does not depend on
how fast the machine is."""


class _Behind:
    """A scheduling clock ``seconds`` behind the machine's: runs that finished long ago."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def now_ns(self) -> int:
        return time.time_ns() - int(self.seconds * 1e9)


def _seen() -> tuple[cf.Workflow, dict[str, list[str | None]]]:
    """``kit-tenant``: two steps that record the tenant they read, by run."""
    seen: dict[str, list[str | None]] = {}
    lock = threading.Lock()

    def look(ctx: cf.StepContext, data: Any) -> Any:
        with lock:
            seen.setdefault(ctx.run_id, []).append(ctx.tenant)
        return data

    wf = cf.Workflow("kit-tenant")
    wf.step(look, name="a")
    wf.step(look, name="b", after=["a"])
    return wf, seen


class TenantTests:
    """``Cap.TENANT``: runs carry a tenant that filters queries and limits."""

    @proves(Cap.TENANT, requires=[Cap.RUN_QUERY])
    def test_a_run_keeps_its_tenant_and_every_step_reads_it(self, cairnflow_kit: Kit) -> None:
        wf, seen = _seen()
        client = cairnflow_kit.client(wf)
        acme = client.enqueue("kit-tenant", 1, tenant="acme")
        plain = client.enqueue("kit-tenant", 2)
        for ref in (acme, plain):
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert seen[acme.id] == ["acme", "acme"]
        assert seen[plain.id] == [None, None]
        assert client.info(acme).tenant == "acme"
        assert client.info(plain).tenant is None
        assert cairnflow_kit.stored(acme).tenant == "acme"
        listed = {run.id: run.tenant for run in client.runs(workflow="kit-tenant").runs}
        assert listed == {acme.id: "acme", plain.id: None}
        # Another client reads what this one stored.
        other = cairnflow_kit.client(start=False)
        assert other.info(acme).tenant == "acme"

    @proves(Cap.TENANT, requires=[Cap.BATCH_ENQUEUE])
    def test_a_batch_gives_each_run_its_own_tenant(self, cairnflow_kit: Kit) -> None:
        wf, _ = _seen()
        client = cairnflow_kit.client(wf, start=False)
        jobs = [cf.Job("kit-tenant", n, tenant=t) for n, t in enumerate(("a", "b", None))]
        refs = client.enqueue_many(jobs)
        assert [client.info(ref).tenant for ref in refs] == ["a", "b", None]

    @proves(Cap.TENANT, requires=[Cap.TRANSACTIONAL_ENQUEUE])
    def test_a_run_enqueued_in_the_applications_transaction_keeps_its_tenant(
        self, cairnflow_kit: Kit
    ) -> None:
        wf, seen = _seen()
        worker = cairnflow_kit.client(wf)
        connection = cairnflow_kit.app_connection()
        ref = worker.enqueue_tx(connection, "kit-tenant", 1, tenant="acme")
        connection.commit()
        worker.wake()
        info = worker.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.tenant == "acme"
        assert seen[ref.id] == ["acme", "acme"]

    @proves(Cap.TENANT)
    def test_a_bad_tenant_is_refused_before_any_write(self, cairnflow_kit: Kit) -> None:
        wf, _ = _seen()
        client = cairnflow_kit.client(wf, start=False)
        for bad in ("", "a b", "acme/eu", "-acme", "x" * 129, "\x1f", 7):
            with pytest.raises(cf.InvalidName, match="invalid tenant name"):
                client.enqueue("kit-tenant", 1, tenant=cast(Any, bad))  # a wrong type on purpose
            with pytest.raises(cf.InvalidName, match="invalid tenant name"):
                RunQuery(tenant=cast(Any, bad))
        if cairnflow_kit.declares(Cap.BATCH_ENQUEUE):
            with pytest.raises(cf.InvalidName, match="'no good'"):
                client.enqueue_many(
                    [
                        cf.Job("kit-tenant", 1, tenant="ok"),
                        cf.Job("kit-tenant", 2, tenant="no good"),
                    ]
                )
        assert cairnflow_kit.run_count() == 0

    @proves(Cap.TENANT, requires=[Cap.RUN_QUERY])
    def test_runs_are_filtered_by_tenant_newest_first_a_page_at_a_time(
        self, cairnflow_kit: Kit
    ) -> None:
        wf, _ = _seen()
        client = cairnflow_kit.client(wf, start=False)
        made: dict[str | None, list[str]] = {"acme": [], "globex": [], None: []}
        for n in range(15):
            tenant = ("acme", "globex", None)[n % 3]
            made[tenant].append(client.enqueue("kit-tenant", n, tenant=tenant).id)
        page = client.runs(tenant="acme", limit=3, count=True)
        assert page.total == 5
        assert [run.id for run in page.runs] == made["acme"][::-1][:3]
        assert {run.tenant for run in page.runs} == {"acme"}
        rest = client.runs(tenant="acme", limit=3, cursor=page.cursor)
        assert [run.id for run in rest.runs] == made["acme"][::-1][3:]
        assert rest.cursor is None
        assert client.runs(tenant="globex", status="queued", count=True).total == 5
        assert client.runs(tenant="globex", workflow="kit-other").runs == ()
        assert client.runs(tenant="initech", count=True).total == 0
        assert client.runs(count=True).total == 15

    @proves(Cap.TENANT, requires=[Cap.CRON, Cap.RUN_QUERY])
    def test_every_run_a_schedule_fires_carries_its_tenant(self, cairnflow_kit: Kit) -> None:
        clock = Fake(datetime(2026, 3, 6, 10, 0, 30, tzinfo=UTC))
        wf, seen = _seen()
        wf.schedule("kit-for-acme", cron="* * * * *", tenant="acme")
        wf.schedule("kit-for-nobody", cron="* * * * *")
        client = cairnflow_kit.client(wf, clock=clock)
        clock.advance(60)
        clock.advance(60)
        wait_until(
            lambda: client.runs(workflow="kit-tenant", count=True).total == 4,
            timeout=TIMEOUT,
            what="two ticks of each schedule",
        )
        runs = client.runs(workflow="kit-tenant").runs
        by_schedule: dict[str, set[str | None]] = {}
        for run in runs:
            by_schedule.setdefault(run.labels["cairnflow.schedule"], set()).add(run.tenant)
            assert client.wait(run.ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert by_schedule == {"kit-for-acme": {"acme"}, "kit-for-nobody": {None}}
        assert {run.id for run in client.runs(tenant="acme").runs} == {
            run.id for run in runs if run.tenant == "acme"
        }
        for run in runs:
            assert seen[run.id] == [run.tenant, run.tenant]

    @proves(Cap.TENANT, requires=[Cap.CRON, Cap.SCHEDULE_TRIGGER])
    def test_a_schedule_added_at_run_time_and_triggered_gives_its_tenant(
        self, cairnflow_kit: Kit
    ) -> None:
        wf, seen = _seen()
        client = cairnflow_kit.client(wf)
        client.add_schedule("kit-tenant", cf.Schedule("kit-nightly", "0 3 * * *", tenant="globex"))
        ref = client.trigger_schedule("kit-tenant", "kit-nightly")
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED, info.error
        assert info.tenant == "globex"
        assert seen[ref.id] == ["globex", "globex"]

    @proves(Cap.TENANT, requires=[Cap.CONCURRENCY_KEY])
    def test_two_tenants_of_a_per_tenant_key_never_share_its_slot(self, cairnflow_kit: Kit) -> None:
        # One key ("kit-upstream", limit 1) for every run, per tenant. Each tenant's first run
        # waits, inside its step, until the other tenant's first run has started: if the two
        # tenants shared the key's one slot, neither could start and both would time out.
        # Every tenant's runs still run one at a time, counted from inside the steps.
        started = {"acme": threading.Event(), "globex": threading.Event()}
        lock = threading.Lock()
        running: dict[str, int] = {"acme": 0, "globex": 0}
        most: dict[str, int] = {"acme": 0, "globex": 0}

        def step(ctx: cf.StepContext, data: Any) -> Any:
            tenant = cast(str, ctx.tenant)
            with lock:
                running[tenant] += 1
                most[tenant] = max(most[tenant], running[tenant])
            try:
                started[tenant].set()
                if data == 0:
                    other = "globex" if tenant == "acme" else "acme"
                    if not started[other].wait(TIMEOUT):
                        raise RuntimeError(f"tenant {other!r} never started beside {tenant!r}")
                return data
            finally:
                with lock:
                    running[tenant] -= 1

        key = cf.Concurrency(key=lambda p: "kit-upstream", limit=1, per_tenant=True)
        wf = cf.Workflow("kit-per-tenant", steps=[cf.Step("a", step)], concurrency=key)
        clients = [
            cairnflow_kit.client(wf, workers=2, node_id=f"kit-tenant-{n}", start=False)
            for n in range(2)
        ]
        refs = [
            clients[0].enqueue("kit-per-tenant", n // 2, tenant=("acme", "globex")[n % 2])
            for n in range(8)
        ]
        for client in clients:
            client.start()
        for ref in refs:
            info = clients[1].wait(ref, timeout=TIMEOUT * 2)
            assert info.status is cf.Status.SUCCEEDED, info.error
        assert most == {"acme": 1, "globex": 1}

    @proves(Cap.TENANT, requires=[Cap.ARCHIVE, Cap.RETENTION])
    def test_an_archived_run_keeps_its_tenant(self, cairnflow_kit: Kit) -> None:
        wf, _ = _seen()
        day = 86_400
        old = cairnflow_kit.client(wf, clock=_Behind(2 * day))
        refs = [old.enqueue("kit-tenant", n, tenant=t) for n, t in enumerate(("acme", None))]
        for ref in refs:
            assert old.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        old.stop()
        pruner = cairnflow_kit.client(wf, start=False, prune_after=day, archive=True)
        assert pruner.prune() == 2
        archived = {info.id: info.tenant for info in pruner.archived_runs().runs}
        assert archived == {refs[0].id: "acme", refs[1].id: None}

    @proves(Cap.TENANT, requires=[Cap.RATE_LIMIT])
    def test_a_per_tenant_bucket_is_each_tenants_own(self, cairnflow_kit: Kit) -> None:
        took: dict[str, list[bool]] = {}

        def take(ctx: cf.StepContext, data: Any) -> Any:
            took[ctx.run_id] = [
                ctx.try_take("kit-upstream", _HOURLY, per_tenant=True),
                ctx.try_take("kit-upstream", _HOURLY, per_tenant=True),
            ]
            return data

        wf = cf.Workflow("kit-takes", steps=[cf.Step("a", take)])
        client = cairnflow_kit.client(wf)
        refs = [client.enqueue("kit-takes", n, tenant=t) for n, t in enumerate(("acme", "globex"))]
        for ref in refs:
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        # Each tenant's bucket admitted its one token, whatever the other took.
        assert [took[ref.id] for ref in refs] == [[True, False], [True, False]]
        # The same name without a tenant, or for a third, is still full; acme's is empty
        # for every client and for application code alike.
        other = cairnflow_kit.client(start=False)
        assert other.try_take("kit-upstream", _HOURLY).granted
        assert other.try_take("kit-upstream", _HOURLY, tenant="initech").granted
        assert not other.try_take("kit-upstream", _HOURLY, tenant="acme").granted
        limiter = cf.RateLimiter(cairnflow_kit.store)
        assert not limiter.try_take("kit-upstream", _HOURLY, tenant="globex").granted
        assert limiter.try_take("kit-upstream", _HOURLY, tenant="hooli").granted
        with pytest.raises(cf.InvalidName, match="invalid tenant name"):
            limiter.try_take("kit-upstream", _HOURLY, tenant="no good")
