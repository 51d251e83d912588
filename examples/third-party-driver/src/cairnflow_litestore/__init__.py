"""cairnflow-litestore: an example third-party cairnflow driver on Python's sqlite3.

::

    import cairnflow as cf

    store = cf.open_store("litestore:///var/lib/app/flows.db", table_prefix="app_")
    store.migrate()

It is written from scratch against the documented Store SPI, with a table layout
of its own, and declares only what the conformance kit proves on it.
"""

from ._store import LATEST_SCHEMA, LiteStore
from ._version import __version__

__all__ = ["LATEST_SCHEMA", "LiteStore", "__version__"]
