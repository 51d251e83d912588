"""The entry point cairnflow's driver discovery loads (group ``cairnflow.drivers``)."""

from __future__ import annotations

from cairnflow.drivers import DriverRegistry, hookimpl

from ._store import SCHEME, Pg8000Store

__all__ = ["cairnflow_register_drivers"]


@hookimpl
def cairnflow_register_drivers(registry: DriverRegistry) -> None:
    """Register ``pg8000://`` for the SPI 1.x this driver implements."""
    registry.register(SCHEME, Pg8000Store, spi=">=1.0,<2")
