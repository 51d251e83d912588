"""What the conformance kit's worker processes call to build this store, and test cleanup.

``StoreTarget(worker_factory="cairnflow_pg8000.testing:make_store",
worker_config={"url": url})``: a fresh interpreter imports this module and
calls ``make_store(namespace, url=url)``, so it lives in the installed package.
"""

from __future__ import annotations

import cairnflow as cf

from ._store import Pg8000Store

__all__ = ["drop_namespace", "make_store"]


def make_store(namespace: str, *, url: str) -> Pg8000Store:
    """Open ``url`` through driver discovery with ``namespace`` as the table prefix."""
    store = cf.open_store(url, table_prefix=namespace, max_size=6)
    if not isinstance(store, Pg8000Store):
        raise TypeError(f"{url} did not open a Pg8000Store: {store!r}")
    return store


def drop_namespace(namespace: str, *, url: str) -> None:
    """Drop every table of ``namespace`` (what a test on a shared server leaves behind)."""
    store = Pg8000Store(url, table_prefix=namespace, max_size=1)
    try:
        store.drop_tables()
    finally:
        store.close()
