"""Driver discovery: the built-in memory driver, duplicate schemes, SPI ranges."""

from __future__ import annotations

from typing import Any

import pytest

import cairnflow as cf
from cairnflow.drivers import DriverRegistry, check_spi_version, load_drivers, open_store


class FakeDriverStore:
    """A driver class registered by a test plugin (never opened)."""

    capabilities = frozenset({cf.Cap.RESULT})

    @classmethod
    def from_url(cls, url: str, **options: Any) -> FakeDriverStore:
        return cls()


def test_memory_is_built_in() -> None:
    drivers = load_drivers(reload=True)
    assert drivers["memory"].distribution == "cairnflow"
    assert drivers["memory"].capabilities == cf.MemoryStore.capabilities
    store = open_store("memory://")
    assert isinstance(store, cf.MemoryStore)


def test_unknown_scheme_names_what_is_installed() -> None:
    with pytest.raises(cf.DriverError, match=r"no driver is installed for nope://.*memory://"):
        open_store("nope://x")
    with pytest.raises(cf.DriverError, match="scheme://"):
        open_store("just-a-path")


def test_duplicate_scheme_names_both_distributions() -> None:
    registry = DriverRegistry()
    registry._as("cairnflow-one", "1.0").register("dup", FakeDriverStore, spi=">=1.0,<2")
    with pytest.raises(
        cf.DriverError, match=r"registered twice: by cairnflow-one 1.0 and by cairnflow-two 2.0"
    ):
        registry._as("cairnflow-two", "2.0").register("dup", FakeDriverStore, spi=">=1.0,<2")


def test_driver_for_another_spi_major_is_refused() -> None:
    registry = DriverRegistry()._as("cairnflow-future", "9.0")
    with pytest.raises(
        cf.DriverError, match=r"cairnflow-future 9.0 .*implements cairnflow SPI >=2.0,<3"
    ):
        registry.register("future", FakeDriverStore, spi=">=2.0,<3")
    with pytest.raises(cf.DriverError, match="invalid SPI range"):
        registry.register("bad", FakeDriverStore, spi="one point oh")


def test_store_instances_are_checked_too() -> None:
    check_spi_version(cf.SPI_VERSION, "ok")
    with pytest.raises(cf.DriverError, match=r"written for cairnflow SPI 2\.0"):
        check_spi_version("2.0", "store X")

    class OldStore(cf.MemoryStore):
        spi_version = "0.9"

    with pytest.raises(cf.DriverError, match=r"OldStore was written for cairnflow SPI 0.9"):
        cf.Client(OldStore())
