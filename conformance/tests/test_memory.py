"""The whole kit on the reference store, ``memory://``: every declared capability proven."""

from __future__ import annotations

import pytest

import cairnflow as cf
from cairnflow_conformance import ConformanceSuite, StoreTarget


@pytest.fixture(scope="module")
def cairnflow_target() -> StoreTarget:
    """memory:// through driver discovery; each namespace gets a store of its own."""
    return StoreTarget(factory=lambda namespace: cf.open_store("memory://"))


class TestMemoryStore(ConformanceSuite):
    """The memory store declares everything but the durable, multi-process capabilities."""
