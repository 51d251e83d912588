"""cairnflow-pg8000: an example third-party SQL dialect, PostgreSQL through pure-Python pg8000.

::

    import cairnflow as cf

    store = cf.open_store("pg8000://app@db.internal:5432/app", table_prefix="jobs_")
    store.migrate()

Built the way the conformance kit's README ("Write a driver", the SQL path)
says: a :class:`~cairnflow.sql.Dialect`, a :class:`~cairnflow.sql.QueuePool`,
migrations rendered by :func:`cairnflow.sql.reference.reference_migrations`
and one of its own (``019_byte_order``: text compared byte for byte), and an
entry point.
"""

from ._dialect import Pg8000Dialect, advisory_key, classify
from ._store import PG8000_CAPABILITIES, Pg8000Store, connect_arguments
from ._version import __version__

__all__ = [
    "PG8000_CAPABILITIES",
    "Pg8000Dialect",
    "Pg8000Store",
    "__version__",
    "advisory_key",
    "classify",
    "connect_arguments",
]
