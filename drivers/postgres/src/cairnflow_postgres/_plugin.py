"""Registers ``postgresql://`` and ``postgres://`` with cairnflow's driver discovery."""

from __future__ import annotations

from cairnflow.drivers import DriverRegistry, hookimpl

from ._store import SCHEMES, PostgresStore


@hookimpl
def cairnflow_register_drivers(registry: DriverRegistry) -> None:
    """``postgresql://user@host:port/dbname`` and its libpq alias ``postgres://``."""
    for scheme in SCHEMES:
        registry.register(scheme, PostgresStore, spi=">=1.0,<2")
