"""Holding a claim's transaction open, so a test can claim beside it.

Claims of many workers must not queue behind each other: while one claim's
transaction holds the steps it took, another claim must return the other ready
steps at once (``FOR UPDATE SKIP LOCKED``). Proving it needs a claim paused
between its statements and its COMMIT, which no SPI call offers. A store built
on :mod:`cairnflow.sql` has a seam there that every driver of the layer goes
through: :meth:`~cairnflow.sql.Dialect.send_claim` runs inside the claim's
transaction, so a wrapper that reads the rows and then waits keeps the
transaction, and its row locks, open. Any other store gives the kit its own way
(:attr:`StoreTarget.hold_claim <cairnflow_conformance.StoreTarget>`).

An engine with one writer (``Dialect.for_update == ""``: SQLite) has no row
lock to skip; a held claim would stop every other writer, so there is nothing
to hold and the kit checks claims one after the other instead.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from cairnflow.sql import ClaimedRow, ClaimPlan, Cursor, SQLStore
from cairnflow.store import ClaimRequest, Store

from ._target import ClaimHolder

__all__ = ["claim_holder", "hold_sql_claim"]

HOLD_LIMIT = 60.0
"""The longest a held claim waits to be let go: a failing test never leaves it open."""


def claim_holder(store: Store, hook: ClaimHolder | None) -> ClaimHolder | None:
    """How to hold a claim of ``store``: the target's hook, else the SQL layer's, else None.

    None means the store's claims never overlap (one writer), or that the store
    is not built on :mod:`cairnflow.sql` and its target gave no ``hold_claim``.
    """
    if hook is not None:
        return hook
    if isinstance(store, SQLStore) and store.dialect.for_update:
        return hold_sql_claim
    return None


@contextlib.contextmanager
def hold_sql_claim(store: Store, request: ClaimRequest) -> Iterator[object]:
    """Claim ``request`` on a :class:`~cairnflow.sql.SQLStore` and hold it uncommitted.

    The claim runs in a thread; its dialect's ``send_claim`` reads the claimed
    rows and then waits, inside the transaction, until the ``with`` block
    exits. The store object must be one only this claim uses while it is held
    (the wrapper is on its dialect, for every claim of that object).
    """
    if not isinstance(store, SQLStore):
        raise TypeError(f"hold_sql_claim needs a cairnflow.sql.SQLStore, got {store!r}")
    dialect = store.dialect
    original = dialect.send_claim
    made = threading.Event()
    release = threading.Event()
    errors: list[BaseException] = []

    def send_claim(cursor: Cursor, plan: ClaimPlan) -> Callable[[], list[ClaimedRow]]:
        rows = original(cursor, plan)()
        made.set()
        release.wait(HOLD_LIMIT)  # the claim's transaction stays open here, its locks held
        return lambda: rows

    def claim() -> None:
        try:
            store.claim(request)
        except BaseException as error:  # noqa: BLE001 - raised in the test's thread below
            errors.append(error)
        finally:
            made.set()

    wrapped: Any = dialect
    wrapped.send_claim = send_claim
    thread = threading.Thread(target=claim, name="kit-held-claim", daemon=True)
    thread.start()
    try:
        made.wait(HOLD_LIMIT)
        if errors:
            raise errors[0]
        yield None
    finally:
        release.set()
        thread.join(HOLD_LIMIT)
        del wrapped.send_claim  # the class's method again
    if errors:
        raise errors[0]
