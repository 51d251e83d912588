"""Driver discovery: URL schemes to store classes, through pluggy entry points.

A driver distribution declares an entry point in the ``cairnflow.drivers``
group pointing at a module (or object) with a hook implementation::

    # pyproject.toml
    [project.entry-points."cairnflow.drivers"]
    sqlite = "cairnflow_sqlite._plugin"

    # cairnflow_sqlite/_plugin.py
    from cairnflow.drivers import hookimpl

    @hookimpl
    def cairnflow_register_drivers(registry):
        registry.register("sqlite", SQLiteStore, spi=">=1.0,<2")

The store class needs a ``from_url(url, **options)`` classmethod and a
``capabilities`` attribute. Built-in drivers (``memory://``) register first;
a scheme registered twice is an error naming both distributions, and a driver
whose SPI range does not include this core's :data:`SPI_VERSION` is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import pluggy
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ._caps import Cap
from ._errors import DriverError
from ._version import SPI_VERSION, __version__
from .store import MemoryStore, StoreContractError, check_store

__all__ = [
    "ENTRY_POINT_GROUP",
    "Driver",
    "DriverClass",
    "DriverRegistry",
    "check_spi_version",
    "hookimpl",
    "hookspec",
    "load_drivers",
    "open_store",
]

ENTRY_POINT_GROUP = "cairnflow.drivers"
hookspec = pluggy.HookspecMarker("cairnflow")
hookimpl = pluggy.HookimplMarker("cairnflow")


class DriverClass(Protocol):
    """What a registered driver class provides."""

    capabilities: frozenset[Cap]

    def from_url(self, url: str, /, **options: Any) -> Any:
        """Open a store for ``url``."""
        ...


class _HookSpecs:
    @hookspec
    def cairnflow_register_drivers(self, registry: DriverRegistry) -> None:
        """Register the drivers this plugin provides with ``registry.register``."""


@dataclass(frozen=True, slots=True)
class Driver:
    """One registered driver."""

    scheme: str
    store_class: Any
    spi: str
    distribution: str
    version: str
    description: str

    @property
    def capabilities(self) -> frozenset[Cap]:
        """The capabilities the store class declares."""
        return frozenset(getattr(self.store_class, "capabilities", frozenset()))

    def open(self, url: str, **options: Any) -> Any:
        """Open a store for ``url``."""
        return self.store_class.from_url(url, **options)


class DriverRegistry:
    """URL scheme to driver; what ``cairnflow_register_drivers`` hooks fill."""

    def __init__(self) -> None:
        self._drivers: dict[str, Driver] = {}
        self._distribution = "cairnflow"
        self._version = __version__

    def register(self, scheme: str, store_class: Any, *, spi: str, description: str = "") -> None:
        """Register ``store_class`` for URLs ``scheme://...``.

        ``spi`` is the range of :data:`cairnflow.SPI_VERSION` the driver
        implements, as a version specifier (``">=1.0,<2"``).
        """
        if not isinstance(scheme, str) or not scheme.replace("+", "").replace("-", "").isalnum():
            raise DriverError(f"{self._distribution}: invalid driver scheme {scheme!r}")
        if not callable(getattr(store_class, "from_url", None)):
            raise DriverError(
                f"{self._distribution}: driver for {scheme!r} has no from_url(url, **options)"
            )
        _check_spi_range(spi, f"{self._distribution} {self._version} (scheme {scheme!r})")
        known = self._drivers.get(scheme)
        if known is not None:
            raise DriverError(
                f"scheme {scheme!r} is registered twice: by {known.distribution} {known.version} "
                f"and by {self._distribution} {self._version}; uninstall one of them"
            )
        self._drivers[scheme] = Driver(
            scheme=scheme,
            store_class=store_class,
            spi=spi,
            distribution=self._distribution,
            version=self._version,
            description=description or (store_class.__doc__ or "").strip().split("\n")[0],
        )

    def _as(self, distribution: str, version: str) -> DriverRegistry:
        self._distribution = distribution
        self._version = version
        return self

    @property
    def drivers(self) -> dict[str, Driver]:
        """Every driver by scheme."""
        return dict(self._drivers)


def _check_spi_range(spec: str, who: str) -> None:
    try:
        accepted = SpecifierSet(spec)
    except InvalidSpecifier:
        raise DriverError(f"{who} declares an invalid SPI range {spec!r}") from None
    if Version(SPI_VERSION) not in accepted:
        raise DriverError(
            f"{who} implements cairnflow SPI {spec}, but this cairnflow {__version__} provides "
            f"SPI {SPI_VERSION}; install a version of the driver built for SPI {SPI_VERSION}"
        )


def check_spi_version(version: str, who: str) -> None:
    """Refuse a store written against another major SPI version (or a newer minor)."""
    try:
        theirs = Version(version)
    except (InvalidVersion, TypeError):
        raise DriverError(f"{who} declares an invalid spi_version {version!r}") from None
    ours = Version(SPI_VERSION)
    if theirs.major != ours.major or theirs.minor > ours.minor:
        raise DriverError(
            f"{who} was written for cairnflow SPI {version}, but this cairnflow {__version__} "
            f"provides SPI {SPI_VERSION}"
        )


_lock = threading.Lock()
_loaded: dict[str, Driver] | None = None


def _builtin_plugin() -> object:

    class Builtins:
        @hookimpl
        def cairnflow_register_drivers(self, registry: DriverRegistry) -> None:
            registry.register("memory", MemoryStore, spi=f"=={SPI_VERSION}")

    return Builtins()


def load_drivers(*, reload: bool = False) -> dict[str, Driver]:
    """Discover every installed driver (once; ``reload=True`` looks again)."""
    global _loaded
    with _lock:
        if _loaded is not None and not reload:
            return dict(_loaded)
        manager = pluggy.PluginManager("cairnflow")
        manager.add_hookspecs(_HookSpecs)
        builtins = _builtin_plugin()
        manager.register(builtins, name="cairnflow.builtins")
        manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        distributions = {id(plugin): dist for plugin, dist in manager.list_plugin_distinfo()}
        registry = DriverRegistry()
        # Built-ins first, then plugins in a stable order, each told who it is.
        impls = manager.hook.cairnflow_register_drivers.get_hookimpls()
        impls.sort(key=lambda impl: (impl.plugin is not builtins, impl.plugin_name))
        for impl in impls:
            dist = distributions.get(id(impl.plugin))
            name = dist.metadata["name"] if dist is not None else "cairnflow"
            version = dist.version if dist is not None else __version__
            function: Callable[..., object] = impl.function
            function(registry=registry._as(name, version))
        _loaded = registry.drivers
        return dict(_loaded)


def open_store(url: str, **options: Any) -> Any:
    """Open the store for ``url``, picking the driver by its scheme.

    ``memory://`` is built in; ``sqlite:///path``, ``postgresql://...`` and
    ``mysql://...`` need their driver distributions installed. ``options``
    go to the driver (``table_prefix=``, ``schema=``, ...).
    """
    if not isinstance(url, str) or "://" not in url:
        raise DriverError(f"a store URL looks like scheme://..., got {url!r}")
    scheme = url.split("://", 1)[0].lower()
    drivers = load_drivers()
    driver = drivers.get(scheme)
    if driver is None:
        known = ", ".join(f"{s}://" for s in sorted(drivers))
        raise DriverError(
            f"no driver is installed for {scheme}:// (installed: {known}); "
            f"for example: pip install cairnflow-{scheme.split('+')[0]}"
        )
    store = driver.open(url, **options)
    try:
        check_store(store)
    except StoreContractError:
        store.close()
        raise
    return store
