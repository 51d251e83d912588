"""ctx.memo and ctx.lock in the engine: what a stale attempt sees, and how bad input is refused."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import MemoryStore


def test_a_memo_of_an_attempt_whose_run_was_cancelled_raises_lease_lost_and_records_nothing(
    make_client: Any, store: MemoryStore
) -> None:
    seen: list[BaseException] = []
    done = threading.Event()
    wf = cf.Workflow("stale-memo")
    client: cf.Client

    def charge(run_id: str) -> str:
        assert client.cancel(run_id) is True  # the lease goes while fn runs
        return "charged"

    @wf.step
    def pay(ctx: cf.StepContext, data: Any) -> Any:
        try:
            return ctx.memo("charge", charge, ctx.run_id)
        except BaseException as error:
            seen.append(error)
            raise
        finally:
            done.set()

    client = make_client(wf, interrupt=False)  # the store refuses the record, not a signal
    ref = client.enqueue(wf)
    assert done.wait(10)
    assert [type(e) for e in seen] == [cf.LeaseLost]
    assert store.read_journal(ref.id, "pay", "charge") is None
    info = client.wait(ref, timeout=10)
    assert info.status is cf.Status.CANCELLED
    assert info.steps["pay"].output is None


def test_memo_and_lock_names_and_ttls_are_checked_before_anything_is_written(
    make_client: Any, store: MemoryStore
) -> None:
    client = make_client(start=False)
    with pytest.raises(cf.InvalidName, match="lock name"):
        client.lock("", 5)
    with pytest.raises(ValueError, match="lock ttl"):
        client.lock("ok", -1)
    with pytest.raises(cf.InvalidName, match="journal scope"):
        cf.Journal(store).memo("bad scope", "m", str)
    with pytest.raises(TypeError, match="must be callable"):
        cf.Journal(store).memo("scope", "m", "not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot be encoded"):
        cf.Journal(store).memo("scope", "m", object)
    assert store.read_lock("ok") is None
    assert store.read_journal("scope", "", "m") is None
