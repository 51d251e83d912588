"""Registers ``mysql://`` and ``mariadb://`` with the driver discovery (``cairnflow.drivers``)."""

from __future__ import annotations

from cairnflow.drivers import DriverRegistry, hookimpl

from ._store import MySQLStore


@hookimpl
def cairnflow_register_drivers(registry: DriverRegistry) -> None:
    """``mysql://user:password@host:port/database`` and the same URL as ``mariadb://``."""
    registry.register("mysql", MySQLStore, spi=">=1.0,<2")
    registry.register("mariadb", MySQLStore, spi=">=1.0,<2")
