"""What the conformance kit's worker processes call to build this store.

``StoreTarget(worker_factory="cairnflow_litestore.testing:make_store",
worker_config={"url": url})``: a fresh interpreter imports this module and
calls ``make_store(namespace, url=url)``, so it must live in the installed
package, not next to the tests.
"""

from __future__ import annotations

import cairnflow as cf

from ._store import LiteStore

__all__ = ["make_store"]


def make_store(namespace: str, *, url: str) -> LiteStore:
    """Open ``url`` through driver discovery with ``namespace`` as the table prefix."""
    store = cf.open_store(url, table_prefix=namespace)
    if not isinstance(store, LiteStore):
        raise TypeError(f"{url} did not open a LiteStore: {store!r}")
    return store
