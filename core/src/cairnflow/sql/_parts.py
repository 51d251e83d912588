"""What the parts of one SQL store share: its context, lease tokens, and IN-list chunks.

:class:`~cairnflow.sql.SQLStore` is composed of parts, one per kind of
transition (enqueue, claims, leases, outcomes, reads, schema), rather than
written as one class: each part is a few hundred lines that can be read, and
grown, alone. They share one :class:`Context` (dialect, statements, tables,
the transaction runner) and call each other only where a
transition needs another's step (outcomes claim, and ask leases why a fenced
write missed), through references given when the store is built.

Composition, not mixins: a part sees the context and the parts it was given,
never the whole store, so what a part depends on is written in its
constructor.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..notify import Notifier
from ..store import StoreInfo
from ._dialect import Dialect
from ._migrations import Migration
from ._queries import Queries
from ._tables import Tables
from ._transactions import Transactions

__all__ = ["CHUNK", "Context", "Part", "chunks", "split_token", "token"]

T = TypeVar("T")

CHUNK = 200  # values per IN list
_SECRET = 32  # hex characters of a lease secret


@dataclass(slots=True, eq=False)
class Context:
    """One store's shared state.

    ``channel`` names the store's namespace for notifications and the
    migration lock, and ``migrations`` are the release's; both may be set
    after the store is built (a driver names its channel, a test plays an
    older release), through the store's attributes, so parts read them when
    they need them, never keep them. ``info`` is
    what the store was built with; the parts read only its driver,
    distribution and version, which never change.
    """

    dialect: Dialect
    tables: Tables
    queries: Queries
    tx: Transactions
    info: StoreInfo
    migrations: tuple[Migration, ...]
    notifier: Notifier | None
    channel: str


class Part:
    """A part of a store: the context, and the names its transitions use most."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._q = context.queries
        self._dialect = context.dialect
        self._tx = context.tx
        self._execute = context.tx.execute


def token(step_id: str, secret: str) -> str:
    """The lease token an engine holds: ``<step id>:<secret>``."""
    return f"{step_id}:{secret}"


def split_token(lease: str) -> tuple[str, str] | None:
    """``(step id, secret)`` of the lease token ``lease``, or None when it is not one."""
    if len(lease) <= _SECRET + 1 or lease[-_SECRET - 1] != ":":
        return None
    return lease[: -_SECRET - 1], lease[-_SECRET:]


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in slices of ``size``: one IN list each."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
