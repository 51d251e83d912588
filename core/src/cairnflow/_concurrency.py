"""Concurrency keys as a workflow declares them (``Cap.CONCURRENCY_KEY``, ``Cap.KEY_FIFO``).

A :class:`Concurrency` names a function of the run's payload and a limit: at most
``limit`` attempts of steps whose key is the same run at once, across every
client of the store. The key is computed once, at enqueue, on the enqueuing
client, and stored with each step; claims never call user code. With ``fifo``
the runs sharing a key run one after the other, in enqueue order.

The key must be a function. A string such as ``"payload.customer"`` is refused
when the client starts (``Client.start()``), with the workflow named: cairnflow
never evaluates an expression it was given as text.

With ``per_tenant`` (``Cap.TENANT``) each tenant has its own count of the key: the
key stored for a run of tenant ``acme`` is ``acme``, a separator and the computed key
(:func:`cairnflow._names.tenant_scoped`), composed at enqueue, so the claim counts
per-tenant keys exactly as any other (its statements do not change). A run without
a tenant keeps the computed key as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._checks import check_int
from ._names import TENANT_SEPARATOR, tenant_scoped

__all__ = ["MAX_CONCURRENCY_KEY", "Concurrency", "check_concurrency_key"]

MAX_CONCURRENCY_KEY = 128
"""The most characters a computed key may have (a key is a row's name in the limits table)."""


@dataclass(frozen=True, eq=False)
class Concurrency:
    """At most ``limit`` attempts per ``key(payload)`` at once, across every client.

    ``Workflow(..., concurrency=Concurrency(key=lambda p: p["customer"], limit=2))``
    gives every step of the workflow's runs the key; ``@wf.step(concurrency=...)``
    gives one step its own. ``fifo=True`` (a workflow's only) also makes the runs
    sharing a key run one after the other, in enqueue order: a run holds its key
    from its first attempt to its end. Keys are one namespace: two workflows
    whose functions return the same string share its count. ``per_tenant=True``
    (``Cap.TENANT``) gives each tenant its own count of every key: two runs of
    tenants ``acme`` and ``globex`` with the key ``"stripe"`` never share a slot;
    runs without a tenant share the key as it is.
    """

    key: Callable[[Any], str]
    limit: int = 1
    fifo: bool = False
    per_tenant: bool = False

    def __post_init__(self) -> None:
        check_int("the limit of a concurrency key", self.limit, minimum=1)
        if not isinstance(self.fifo, bool):
            raise TypeError(f"Concurrency(fifo=...) takes True or False, got {self.fifo!r}")
        if not isinstance(self.per_tenant, bool):
            raise TypeError(
                f"Concurrency(per_tenant=...) takes True or False, got {self.per_tenant!r}"
            )

    def check(self, where: str) -> None:
        """Refuse a key that is not a function (a string expression), naming ``where``."""
        if isinstance(self.key, str):
            raise TypeError(
                f"{where}: the concurrency key {self.key!r} is a string; give a function of "
                f"the payload instead (key=lambda payload: payload['customer']): cairnflow "
                f"never evaluates an expression given as text"
            )
        if not callable(self.key):
            raise TypeError(f"{where}: the concurrency key must be a function, got {self.key!r}")

    def compute(self, payload: Any, where: str, tenant: str | None = None) -> str:
        """The key of a run with ``payload``, checked (``where`` names the workflow); with
        ``per_tenant``, the key of the run's ``tenant`` (checked by the caller)."""
        key = check_concurrency_key(self.key(payload), where)
        if not self.per_tenant:
            return key
        return tenant_scoped(tenant, key, most=MAX_CONCURRENCY_KEY, what=f"{where}: the key")


def check_concurrency_key(value: object, where: str) -> str:
    """``value`` if it is a usable key: a non-empty string of at most 128 characters, no NUL."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"{where}: the concurrency key function returned {value!r}, not a string")
    if len(value) > MAX_CONCURRENCY_KEY:
        raise ValueError(
            f"{where}: the concurrency key {value[:40]!r}... has {len(value)} characters, "
            f"over the limit of {MAX_CONCURRENCY_KEY}"
        )
    if "\x00" in value:
        raise ValueError(f"{where}: the concurrency key contains a NUL character")
    if TENANT_SEPARATOR in value:
        raise ValueError(
            f"{where}: the concurrency key contains the character U+001F, which separates a "
            f"tenant from its keys (Concurrency(per_tenant=True))"
        )
    return value
