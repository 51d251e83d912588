"""An enqueue whose commit outcome was lost: sent again under its run ids, made once.

:class:`LostReplies` wraps a real store: its ``create_runs`` writes (the commit
lands), then raises :class:`~cairnflow.Unavailable` as a connection that died
during the COMMIT would, so the client cannot know the write landed. Nothing
about the store itself is faked: what the tests assert on is what it holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import MemoryStore, NewRun, RunQuery

ClientFactory = Callable[..., cf.Client]


class LostReplies:
    """A real store whose first ``lose`` writes of runs land, and then report an outage."""

    def __init__(self, inner: MemoryStore, lose: float) -> None:
        self._inner = inner
        self._lose = lose
        self.attempts: list[list[str]] = []
        """The run ids of every ``create_runs`` call, in order."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_runs(self, runs: Sequence[NewRun]) -> list[str]:
        self.attempts.append([run.id for run in runs])
        written = self._inner.create_runs(runs)
        if len(self.attempts) <= self._lose:
            raise cf.Unavailable("the connection was lost during COMMIT (the reply, not the write)")
        return written


def stored_runs(store: MemoryStore) -> list[str]:
    return [run.id for run in store.list_runs(RunQuery(limit=500)).runs]


def two_steps() -> cf.Workflow:
    wf = cf.Workflow("two")
    wf.step(lambda ctx, d: d, name="a")
    wf.step(lambda ctx, d: d, name="b", after=["a"])
    return wf


@pytest.mark.parametrize(
    "enqueue",
    [
        pytest.param(lambda c: [c.enqueue("two", 1)], id="one run"),
        pytest.param(lambda c: [c.enqueue("two", 1, key="k")], id="a keyed run"),
        pytest.param(
            lambda c: c.enqueue_many([cf.Job("two", 1), cf.Job("two", 2, key="k")]), id="a batch"
        ),
    ],
)
def test_a_write_whose_reply_was_lost_is_sent_again_and_found(
    store: MemoryStore,
    make_client: ClientFactory,
    enqueue: Callable[[cf.Client], list[cf.RunRef]],
) -> None:
    lossy = LostReplies(store, lose=2)
    client = make_client(two_steps(), on=lossy, start=False)
    refs = enqueue(client)
    ids = [ref.id for ref in refs]
    assert lossy.attempts == [ids, ids, ids]  # sent three times, under the same ids
    assert sorted(stored_runs(store)) == sorted(ids)  # written once
    for run_id in ids:
        stored = store.get_run(run_id)
        assert stored is not None
        assert [step.name for step in stored.steps] == ["a", "b"]


def test_the_retry_is_bounded_and_the_error_names_the_run_ids(
    store: MemoryStore, make_client: ClientFactory
) -> None:
    lossy = LostReplies(store, lose=math.inf)
    client = make_client(two_steps(), on=lossy, start=False, enqueue_timeout=0.2)
    with pytest.raises(cf.OutcomeUnknown) as caught:
        client.enqueue_many([cf.Job("two", 1), cf.Job("two", 2)])
    error = caught.value
    assert isinstance(error, cf.Unavailable)  # what a caller catching outages catches
    assert len(lossy.attempts) >= 2, "the write was never sent again"
    assert all(attempt == list(error.run_ids) for attempt in lossy.attempts)
    assert "unknown" in str(error)
    for run_id in error.run_ids:
        assert run_id in str(error)
        assert client.info(run_id).payload in (1, 2)  # looked up: it had landed, once
    assert sorted(stored_runs(store)) == sorted(error.run_ids)


def test_an_enqueue_timeout_of_zero_never_sends_again(
    store: MemoryStore, make_client: ClientFactory
) -> None:
    lossy = LostReplies(store, lose=1)
    client = make_client(two_steps(), on=lossy, start=False, enqueue_timeout=0)
    with pytest.raises(cf.OutcomeUnknown) as caught:
        client.enqueue("two", 1)
    assert lossy.attempts == [list(caught.value.run_ids)]
    assert stored_runs(store) == list(caught.value.run_ids)


@pytest.mark.parametrize("bad", [-1, math.nan, "30", True])
def test_enqueue_timeout_is_checked(store: MemoryStore, bad: object) -> None:
    with pytest.raises(ValueError, match="enqueue_timeout"):
        cf.Client(store, enqueue_timeout=bad)  # type: ignore[arg-type]


def test_an_id_generator_must_be_callable(store: MemoryStore) -> None:
    with pytest.raises(TypeError, match="id_generator must be callable"):
        cf.Client(store, id_generator="run-1")  # type: ignore[arg-type]
