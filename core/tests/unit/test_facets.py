"""Capability facets: what a store declares must be implemented, and the engine takes
typed references to the facets once."""

from __future__ import annotations

from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import (
    ENGINE_ONLY,
    BatchOutcomes,
    KernelOutcomes,
    KernelStreamedEnqueue,
    MemoryStore,
    NewRun,
    NewStep,
    RunQuery,
    RunStream,
    ServerClock,
    StoreContractError,
    StoreFacets,
    StreamedEnqueue,
    TransactionalEnqueue,
    check_store,
    facet_of,
)


def _declaring(*caps: Cap, **methods: Any) -> MemoryStore:
    """A memory store that declares ``caps`` on top of its own, with extra ``methods``."""
    namespace = {"capabilities": MemoryStore.capabilities | set(caps), **methods}
    return type("Declaring", (MemoryStore,), namespace)()  # type: ignore[no-any-return]


def test_the_memory_store_implements_what_it_declares() -> None:
    check_store(MemoryStore())
    facets = StoreFacets.of(MemoryStore())
    assert facets.transactional is None and facets.clock is None


def test_a_declared_capability_without_its_facet_methods_is_refused_by_name() -> None:
    with pytest.raises(StoreContractError, match="transactional_enqueue needs the transactional"):
        check_store(_declaring(Cap.TRANSACTIONAL_ENQUEUE))
    with pytest.raises(StoreContractError, match=r"database_clock .* no database_now"):
        check_store(_declaring(Cap.DATABASE_CLOCK))


def test_a_capability_no_facet_carries_cannot_be_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every capability of today's vocabulary is carried by a facet or the engine; a new one
    # is added to the vocabulary before its facet is: TENANT stands for it, unregistered.
    from cairnflow.store import _facets

    unbuilt = [cap for cap in Cap if facet_of(cap) is None and cap not in ENGINE_ONLY]
    cap = unbuilt[0] if unbuilt else Cap.TENANT
    monkeypatch.setitem(_facets._BY_CAP, cap, None)  # type: ignore[arg-type]
    assert facet_of(cap) is None
    with pytest.raises(StoreContractError, match=f"{cap.value} has no store facet"):
        check_store(_declaring(cap))
    with pytest.raises(StoreContractError, match=f"{cap.value} has no store facet"):
        cf.Client(_declaring(cap))


def test_a_store_missing_a_kernel_method_is_refused() -> None:
    class Broken(MemoryStore):
        claim = None  # type: ignore[assignment]

    with pytest.raises(StoreContractError, match="the kernel lacks claim"):
        check_store(Broken())


def test_the_facets_are_taken_once_and_typed() -> None:
    store = _declaring(
        Cap.DATABASE_CLOCK,
        Cap.TRANSACTIONAL_ENQUEUE,
        database_now=lambda self: 42,
        create_runs_in=lambda self, tx, runs: [],
    )
    facets = StoreFacets.of(store)
    assert isinstance(facets.clock, ServerClock) and facets.clock.database_now() == 42
    assert isinstance(facets.transactional, TransactionalEnqueue)


def test_a_store_without_batch_outcomes_is_written_through_the_kernel() -> None:
    class KernelOnly(MemoryStore):
        finish_and_claim = None  # type: ignore[assignment]

    assert isinstance(MemoryStore(), BatchOutcomes)
    facets = StoreFacets.of(KernelOnly())
    assert isinstance(facets.outcomes, KernelOutcomes)
    workflow = cf.Workflow("k", steps=[cf.Step("a", lambda c, d: d + 1)])
    with cf.Client(KernelOnly(), workers=2, poll_interval=0.05) as client:
        client.register(workflow)
        assert client.result(client.enqueue("k", 1), timeout=10) == 2


def _batch(count: int, made: list[int], fail_at: int | None = None, name: str = "run") -> RunStream:
    """A stream of ``count`` one-step runs that records which run it made, in order."""
    step = NewStep("a", cf.StepKind.TASK, (), ())
    ids = [f"{name}_{n}" for n in range(count)]

    def make(at: int) -> NewRun:
        if at == fail_at:
            raise LookupError(f"run {at} cannot be made")
        made.append(at)
        return NewRun(ids[at], "w", "default", 0, b"null", (step,), (f"step_{at}",), 1, 1)

    return RunStream(ids, make)


def test_a_run_stream_makes_each_run_once_as_it_is_read() -> None:
    made: list[int] = []
    runs = _batch(5, made)
    assert len(runs) == 5 and made == []  # the ids are known, nothing is made yet
    chunks = runs.chunks(2)
    assert [new.id for new in next(chunks)] == ["run_0", "run_1"]
    assert made == [0, 1]  # only the chunk read so far
    assert [[new.id for new in chunk] for chunk in chunks] == [["run_2", "run_3"], ["run_4"]]
    again = [new for chunk in runs.chunks(3) for new in chunk]  # a write sent again
    assert again == runs.all() and [new.id for new in again] == list(runs.ids)
    assert made == [0, 1, 2, 3, 4], "a second reading made runs again"
    with pytest.raises(ValueError, match="at least one run"):
        next(runs.chunks(0))


def test_a_run_stream_raises_what_making_a_run_raised_and_refuses_a_run_named_otherwise() -> None:
    made: list[int] = []
    runs = _batch(4, made, fail_at=2)
    chunks = runs.chunks(2)
    next(chunks)
    with pytest.raises(LookupError, match="run 2 cannot be made"):
        next(chunks)
    misnamed = RunStream(["run_0", "run_x"], _batch(2, []).all().__getitem__)
    with pytest.raises(ValueError, match="run 1 of a stream was made as 'run_1', named 'run_x'"):
        misnamed.all()


def test_a_store_without_a_streamed_enqueue_gets_every_run_made_first() -> None:
    store = MemoryStore()
    assert not isinstance(store, StreamedEnqueue)
    enqueue = StoreFacets.of(store).enqueue
    assert isinstance(enqueue, KernelStreamedEnqueue)
    made: list[int] = []
    assert enqueue.create_runs_streamed(_batch(3, made)) == ["run_0", "run_1", "run_2"]
    assert made == [0, 1, 2]
    with pytest.raises(LookupError):  # refused before create_runs: nothing written
        enqueue.create_runs_streamed(_batch(3, [], fail_at=2, name="other"))
    assert [store.get_run(f"other_{n}") for n in range(2)] == [None, None]
    assert len(store.list_runs(RunQuery(limit=10)).runs) == 3
