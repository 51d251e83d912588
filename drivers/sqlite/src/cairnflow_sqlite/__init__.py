"""cairnflow-sqlite: cairnflow's durable store in one SQLite file.

::

    import cairnflow as cf

    store = cf.open_store("sqlite:///orders.db")   # or cairnflow_sqlite.SQLiteStore("orders.db")
    store.migrate()
"""

from ._dialect import SQLiteDialect
from ._store import MIN_SQLITE, SQLiteStore
from ._version import __version__

__all__ = ["MIN_SQLITE", "SQLiteDialect", "SQLiteStore", "__version__"]
