"""Registers ``sqlite://`` with cairnflow's driver discovery (entry point ``cairnflow.drivers``)."""

from __future__ import annotations

from cairnflow.drivers import DriverRegistry, hookimpl

from ._store import SQLiteStore


@hookimpl
def cairnflow_register_drivers(registry: DriverRegistry) -> None:
    """``sqlite:///path``."""
    registry.register("sqlite", SQLiteStore, spi=">=1.0,<2")
