"""Tenants (``Cap.TENANT``) over the memory store: the async client, the composed names of
per-tenant keys and buckets, schedules' specs, and what a store without tenants refuses."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow._engine._scheduler import schedule_from_spec, spec_of
from cairnflow._names import TENANT_SEPARATOR, tenant_scoped
from cairnflow.store import MemoryStore

ClientFactory = Callable[..., cf.Client]


class NoTenants(MemoryStore):
    """A memory store that does not declare tenants (as a third-party store may not)."""

    capabilities = MemoryStore.capabilities - {Cap.TENANT}


def echo() -> cf.Workflow:
    return cf.Workflow("echo", steps=[cf.Step("a", lambda ctx, data: ctx.tenant)])


def test_the_async_client_enqueues_for_a_tenant(make_client: ClientFactory) -> None:
    client = make_client(echo())

    async def main() -> None:
        async with cf.AsyncClient(client, threads=1) as aio:
            ref = await aio.enqueue("echo", 1, tenant="acme")
            assert await aio.result(ref, timeout=30) == "acme"
            listed = await aio.runs(tenant="acme")
            assert [run.id for run in listed.runs] == [ref.id]
            with pytest.raises(cf.InvalidName, match="invalid tenant name 'a/b'"):
                await aio.enqueue("echo", 1, tenant="a/b")

    asyncio.run(main())


def test_a_per_tenant_key_is_the_tenant_a_separator_and_the_key(
    make_client: ClientFactory, store: MemoryStore
) -> None:
    key = cf.Concurrency(key=lambda p: p["k"], limit=1, per_tenant=True)
    wf = cf.Workflow("keyed", steps=[cf.Step("a", lambda ctx, data: data)], concurrency=key)
    client = make_client(wf, start=False)
    acme = client.enqueue("keyed", {"k": "stripe"}, tenant="acme")
    plain = client.enqueue("keyed", {"k": "stripe"})
    now = time.time_ns()
    queues = (cf.store.QueueClaim("default"),)
    request = cf.store.ClaimRequest(frozenset({"keyed"}), 10, now, now + 10**12, "n", queues)
    claimed = store.claim(dataclasses.replace(request, keys=True))
    assert {a.run_id: a.tenant for a in claimed} == {acme.id: "acme", plain.id: None}
    assert tenant_scoped("acme", "stripe", most=128, what="key") == "acme\x1fstripe"
    assert tenant_scoped(None, "stripe", most=128, what="key") == "stripe"
    # A composed key over the limit is refused at enqueue, naming both parts; nothing written.
    with pytest.raises(ValueError, match=r"'kkk.*' of tenant 'ttt.*over the limit of 128"):
        client.enqueue("keyed", {"k": "k" * 100}, tenant="t" * 100)
    # No key may hold the separator: a per-tenant key never equals a shared one.
    with pytest.raises(ValueError, match="U\\+001F"):
        client.enqueue("keyed", {"k": f"acme{TENANT_SEPARATOR}stripe"})
    assert len(store.list_runs(cf.store.RunQuery()).runs) == 2
    with pytest.raises(TypeError, match="per_tenant"):
        cf.Concurrency(key=lambda p: "k", per_tenant="yes")  # type: ignore[arg-type]


def test_a_schedules_spec_keeps_its_tenant_and_one_without_is_unchanged() -> None:
    schedule = cf.Schedule("nightly", "0 3 * * *", payload={"a": 1}, tenant="acme")
    assert json.loads(spec_of(schedule))["tenant"] == "acme"
    assert schedule_from_spec("nightly", spec_of(schedule)).tenant == "acme"
    plain = cf.Schedule("nightly", "0 3 * * *", payload={"a": 1})
    assert "tenant" not in json.loads(spec_of(plain))
    assert schedule_from_spec("nightly", spec_of(plain)).tenant is None
    with pytest.raises(cf.InvalidName, match="invalid tenant name"):
        cf.Schedule("nightly", "0 3 * * *", tenant="")
    wf = cf.Workflow("w", steps=[cf.Step("a", lambda ctx, data: data)])
    assert wf.schedule("s", cron="* * * * *", tenant="globex").tenant == "globex"


def test_a_store_without_tenants_refuses_each_use_and_writes_nothing(
    make_client: ClientFactory,
) -> None:
    store = NoTenants()
    client = make_client(echo(), on=store, start=False)
    for act in (
        lambda: client.enqueue("echo", 1, tenant="acme"),
        lambda: client.enqueue_many([cf.Job("echo", 1), cf.Job("echo", 2, tenant="acme")]),
        lambda: client.runs(tenant="acme"),
        lambda: client.cancel_runs(query=cf.store.RunQuery(tenant="acme")),
        lambda: client.try_take("bucket", cf.Rate(1), tenant="acme"),
        lambda: cf.RateLimiter(store).try_take("bucket", cf.Rate(1), tenant="acme"),
        lambda: client.add_schedule("echo", cf.Schedule("s", "* * * * *", tenant="acme")),
    ):
        with pytest.raises(cf.Unsupported, match="TENANT"):
            act()
    assert store.list_runs(cf.store.RunQuery()).runs == ()
    # The same names without a tenant work as before.
    assert client.try_take("bucket", cf.Rate(1)).granted
    assert client.enqueue("echo", 1).id
