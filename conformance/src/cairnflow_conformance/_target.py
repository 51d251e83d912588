"""What a driver hands the kit: how to open its store for a namespace.

A *namespace* is a short identifier, valid as a SQL table prefix, made fresh
for every test: a driver maps it to a table prefix, a schema or a database, so
tests never see each other's rows and can run in parallel (pytest-xdist).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cairnflow import Cap
from cairnflow.store import ClaimRequest, Store, StoreInfo

__all__ = [
    "NAMESPACE_PATTERN",
    "ClaimHolder",
    "StoreTarget",
    "TargetProbe",
    "load_worker_factory",
    "new_namespace",
]

NAMESPACE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
"""Every namespace the kit makes matches this: a safe SQL table prefix."""


ClaimHolder = Callable[[Store, ClaimRequest], contextlib.AbstractContextManager[object]]
"""``hold(store, request)``: a claim whose transaction stays open for the ``with`` block."""


def new_namespace() -> str:
    """A fresh namespace: ``cf``, 8 random hex digits and ``_`` (e.g. ``cf3fa9c01b_``)."""
    return f"cf{secrets.token_hex(4)}_"


@dataclass(frozen=True, slots=True)
class TargetProbe:
    """What a store of the target says about itself, read once per target."""

    capabilities: frozenset[Cap]
    spi_version: str
    info: StoreInfo
    key: str
    """How reports name the target (its label, else distribution, driver and server)."""


@dataclass(eq=False)
class StoreTarget:
    """The store under test, as a driver's ``cairnflow_target`` fixture returns it.

    ``factory(namespace)`` returns a new, open store object for ``namespace``;
    the kit migrates it and closes it after the test. Objects made for the same
    namespace must share state when the store declares ``Cap.DURABLE`` or
    ``Cap.MULTI_PROCESS``.

    ``worker_factory`` is ``"module:function"``, importable in a fresh Python
    process, called as ``function(namespace, **worker_config)`` to build the same
    store in a worker process; the tests that prove ``MULTI_PROCESS`` (and
    ``DURABLE`` across a killed process) need it. ``worker_config`` must be
    JSON-serialisable, since it travels on a command line.

    ``label`` names the target in reports when one session tests several
    (e.g. MySQL and MariaDB through one driver).

    ``cleanup(namespace)`` runs after each test that used ``namespace`` (once
    its stores are closed), to drop what the test created: give one when the
    kit runs against a shared database server, so tables do not pile up.

    ``app_connection(namespace)`` returns the kind of connection an
    application of the driver would hand to ``Client.enqueue_tx``: a new
    DB-API connection to the same database, autocommit off. The tests that
    prove ``Cap.TRANSACTIONAL_ENQUEUE`` need it; the kit commits, rolls back
    and closes it.

    ``hold_claim(store, request)`` returns a context manager that makes the
    claim ``store.claim(request)`` would make and keeps its transaction open,
    with whatever the claim locked, until the ``with`` block exits; then it
    commits. The ``MULTI_PROCESS`` proof that claims skip what another claim
    holds (``FOR UPDATE SKIP LOCKED``) uses it. A store built on
    ``cairnflow.sql`` needs none: the kit holds the claim inside the dialect's
    ``send_claim``. Leave it None when your store's claims never overlap (one
    writer at a time, like SQLite): the kit then checks claims one after the
    other.
    """

    factory: Callable[[str], Store]
    worker_factory: str | None = None
    worker_config: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    cleanup: Callable[[str], None] | None = None
    app_connection: Callable[[str], Any] | None = None
    hold_claim: ClaimHolder | None = None
    _probe: TargetProbe | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not callable(self.factory):
            raise TypeError(f"StoreTarget.factory must be callable, got {self.factory!r}")
        if self.worker_factory is not None:
            module, sep, function = self.worker_factory.partition(":")
            if not sep or not module or not function:
                raise ValueError(
                    f"StoreTarget.worker_factory must be 'module:function', "
                    f"got {self.worker_factory!r}"
                )
        try:
            json.dumps(dict(self.worker_config))
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"StoreTarget.worker_config must be JSON-serialisable (it is passed to worker "
                f"processes on their command line): {error}"
            ) from None

    def open(self, namespace: str) -> Store:
        """A new store object for ``namespace`` (not migrated)."""
        if not NAMESPACE_PATTERN.fullmatch(namespace):
            raise ValueError(f"invalid namespace {namespace!r}: it must match {NAMESPACE_PATTERN}")
        store: object = self.factory(namespace)
        if not isinstance(store, Store):
            missing = [
                name
                for name in ("capabilities", "spi_version", "claim", "finish", "list_runs")
                if not hasattr(store, name)
            ]
            raise TypeError(
                f"StoreTarget.factory returned {store!r}, which does not implement the "
                f"cairnflow Store SPI (missing: {', '.join(missing) or 'some methods'})"
            )
        return store

    def probe(self) -> TargetProbe:
        """Open a store on a throwaway namespace and read its declaration (cached)."""
        if self._probe is None:
            store = self.open(new_namespace())
            try:
                declared = frozenset(
                    parse_declared(c, type(store).__qualname__) for c in store.capabilities
                )
                info = store.describe()
                spi = str(store.spi_version)
            finally:
                store.close()
            key = self.label or f"{info.distribution}:{info.driver}" + (
                f" on {info.server}" if info.server else ""
            )
            self._probe = TargetProbe(declared, spi, info, key)
        return self._probe


def parse_declared(value: object, store: str) -> Cap:
    """A declared capability as a :class:`Cap`; a store declaring junk is an error."""
    try:
        return Cap(str(value))
    except ValueError:
        raise ValueError(
            f"store {store} declares {value!r}, which is not a cairnflow.Cap member"
        ) from None


def load_worker_factory(spec: str) -> Callable[..., Store]:
    """Import ``"module:function"`` and return the function."""
    module_name, _, attr = spec.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"worker factory {spec!r} is not callable")
    factory: Callable[..., Store] = target
    return factory
