"""Fixtures for the core's tests: memory stores, clients that always stop, partitions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import MemoryStore
from cairnflow.testing import Partition


@pytest.fixture
def store() -> MemoryStore:
    """A fresh in-memory store."""
    return MemoryStore()


ClientFactory = Callable[..., cf.Client]


@pytest.fixture
def make_client(store: MemoryStore) -> Iterator[ClientFactory]:
    """Build clients on ``store`` (or another store) with test-friendly timings.

    Every client made here is stopped at teardown.
    """
    made: list[cf.Client] = []

    def factory(
        *workflows: cf.Workflow, start: bool = True, on: Any = None, **options: Any
    ) -> cf.Client:
        options.setdefault("workers", 4)
        options.setdefault("poll_interval", 0.05)
        options.setdefault("lease", 2.0)
        client = cf.Client(on if on is not None else store, **options)
        client.register(*workflows)
        made.append(client)
        if start:
            client.start()
        return client

    yield factory
    for client in made:
        client.stop(timeout=5)


@pytest.fixture
def partitions(make_client: ClientFactory) -> Iterator[list[Partition]]:
    """Partitions made by a test; healed at teardown before any client stops."""
    made: list[Partition] = []
    yield made
    for partition in made:
        partition.heal()
