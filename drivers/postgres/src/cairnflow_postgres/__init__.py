"""cairnflow-postgres: cairnflow's durable store on PostgreSQL.

::

    import cairnflow as cf

    store = cf.open_store("postgresql://app@db.internal/app", schema="jobs")
    # or cairnflow_postgres.PostgresStore(dsn) / PostgresStore(pool=app_pool)
    store.migrate()
"""

from ._dialect import PostgresDialect, advisory_key, classify
from ._notify import PgNotifier, channel_name, check_connection, lend_alive
from ._store import POSTGRES_CAPABILITIES, PostgresStore, redact
from ._version import __version__

__all__ = [
    "POSTGRES_CAPABILITIES",
    "PgNotifier",
    "PostgresDialect",
    "PostgresStore",
    "__version__",
    "advisory_key",
    "channel_name",
    "check_connection",
    "classify",
    "lend_alive",
    "redact",
]
