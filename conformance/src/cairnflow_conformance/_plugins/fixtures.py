"""Fixtures: the namespace, the capability gate and the :class:`~cairnflow_conformance.Kit`.

``cairnflow_target`` is the driver's: a session- (or class-) scoped fixture
returning a :class:`~cairnflow_conformance.StoreTarget`. The plugin's own
``cairnflow_target`` only says so, for a suite that forgot it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .._kit import Kit
from .._target import StoreTarget, TargetProbe, new_namespace
from .collection import item_marks

__all__ = ["TARGET_PROPERTY", "target_properties"]

TARGET_PROPERTY = "cairnflow_target"
"""The ``user_properties`` entry naming the target and what it declared."""


def target_properties(probe: TargetProbe) -> dict[str, Any]:
    """What reports need to know of a target (JSON-serialisable, for pytest-xdist)."""
    info = probe.info
    return {
        "key": probe.key,
        "driver": info.driver,
        "distribution": info.distribution,
        "version": info.version,
        "url": info.url,
        "server": info.server,
        "durable": info.durable,
        "spi_version": probe.spi_version,
        "declared": sorted(c.value for c in probe.capabilities),
    }


@pytest.fixture(scope="session")
def cairnflow_target() -> StoreTarget:
    """The store under test: a driver's conftest.py must override this fixture."""
    pytest.fail(
        "the cairnflow conformance kit needs a fixture named cairnflow_target returning a "
        "cairnflow_conformance.StoreTarget (see the kit's README, 'Write a driver')",
        pytrace=False,
    )


def _target(request: pytest.FixtureRequest) -> StoreTarget:
    target = request.getfixturevalue("cairnflow_target")
    if not isinstance(target, StoreTarget):
        pytest.fail(
            f"cairnflow_target returned {target!r}; it must return a "
            f"cairnflow_conformance.StoreTarget",
            pytrace=False,
        )
    return target


@pytest.fixture
def cairnflow_namespace() -> str:
    """A fresh namespace (table prefix, schema or database) for one test."""
    return new_namespace()


@pytest.fixture(autouse=True)
def _cairnflow_capability_gate(request: pytest.FixtureRequest) -> None:
    """Skip a kit test the store cannot run, and record which target it ran on.

    A ``proves`` test needs every capability it proves or requires; a
    ``refuses`` check needs its capability to be undeclared.
    """
    item = request.node
    if not isinstance(item, pytest.Item):
        return
    marks = item_marks(item)
    if marks is None:
        return
    probe = _target(request).probe()
    item.user_properties.append((TARGET_PROPERTY, target_properties(probe)))
    missing = marks.missing(probe.capabilities)
    if missing:
        names = ", ".join(c.name for c in missing)
        pytest.skip(f"the store does not declare {names}")
    declared = sorted(marks.refuses & probe.capabilities, key=lambda c: c.value)
    if declared:
        names = ", ".join(c.name for c in declared)
        pytest.skip(f"the store declares {names}: the kit tests proving it run instead")


@pytest.fixture
def cairnflow_kit(
    request: pytest.FixtureRequest,
    _cairnflow_capability_gate: None,
    cairnflow_namespace: str,
    tmp_path: Path,
) -> Iterator[Kit]:
    """A migrated store on a fresh namespace, with clients, partitions and worker processes."""
    target = _target(request)
    kit = Kit(target, cairnflow_namespace, tmp_path, target.probe().capabilities)
    try:
        yield kit
    finally:
        kit.close()
