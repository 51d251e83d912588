"""The shared SQL layer: one DB-API 2.0 Store over a :class:`Dialect`.

A SQL driver is thin: a :class:`Dialect` (what its engine does differently),
:class:`Connections` (usually a pool), numbered migration files, and a
``from_url``. Everything else — the transitions, fencing, fan-in, the
idempotency rule, migrations and their ledger — lives here once.
"""

from ._dialect import ClaimedRow, ClaimPlan, Connections, Cursor, Dialect, Statement
from ._errors import ErrorClass, ErrorClassifier, default_classifier
from ._migrations import Migration, load_migrations, split_statements
from ._pool import QueuePool
from ._queries import Queries
from ._store import SQL_CAPABILITIES, SQLStore, StoreStats
from ._tables import PREFIX_PATTERN, SCHEMA_PATTERN, TABLES, Tables

__all__ = [
    "PREFIX_PATTERN",
    "SCHEMA_PATTERN",
    "SQL_CAPABILITIES",
    "TABLES",
    "ClaimPlan",
    "ClaimedRow",
    "Connections",
    "Cursor",
    "Dialect",
    "ErrorClass",
    "ErrorClassifier",
    "Migration",
    "Queries",
    "QueuePool",
    "SQLStore",
    "Statement",
    "StoreStats",
    "Tables",
    "default_classifier",
    "load_migrations",
    "split_statements",
]
