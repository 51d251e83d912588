"""The shared SQL layer: one DB-API 2.0 Store over a :class:`Dialect`.

A SQL driver is thin: a :class:`Dialect` (what its engine does differently),
:class:`Connections` (usually a pool), numbered migration files, and a
``from_url``. Everything else — the transitions, fencing, fan-in, the
idempotency rule, migrations and their ledger — lives here once.

:class:`SQLStore` is composed of parts, one module per kind of transition
(``_enqueue``, ``_claims``, ``_leases``, ``_outcomes``, ``_reads``,
``_schema``, ``_schedules``, ``_leadership``) over one transaction runner
(``_transactions``). Every statement is a named template in ``_statements``,
rendered once per store by :class:`Queries`; the rows the store reads are named
types (:class:`RunRow`, :class:`StepRow`, :class:`ClaimedStep`, ...), never read
by position. Enqueueing in the application's transaction asks the dialect for
the connection, a savepoint and the in-transaction notification
(:meth:`Dialect.application_connection`, :meth:`Dialect.savepoint`,
:meth:`Dialect.notify_in_transaction`). A dialect whose server takes statements
up to a size (:class:`StatementLimit`) has every statement checked before it is
sent (``_limits``). :func:`check_int` and :func:`check_seconds` check a
driver's numeric options the way the core checks its own (one rule, one
message).
"""

from .._checks import check_int, check_seconds
from ._dialect import (
    BatchInsert,
    ClaimedRow,
    ClaimPlan,
    Commit,
    Connections,
    Cursor,
    Dialect,
    Recorded,
    Statement,
    StatementLimit,
)
from ._errors import ErrorClass, ErrorClassifier, default_classifier
from ._migrations import Migration, load_migrations, split_statements
from ._pool import QueuePool
from ._queries import Queries
from ._rows import ClaimedRun, ClaimedStep, RunRow, StepRow
from ._store import SQL_CAPABILITIES, SQLStore, StoreStats
from ._tables import PREFIX_PATTERN, SCHEMA_PATTERN, TABLES, Tables

__all__ = [
    "PREFIX_PATTERN",
    "SCHEMA_PATTERN",
    "SQL_CAPABILITIES",
    "TABLES",
    "BatchInsert",
    "ClaimPlan",
    "ClaimedRow",
    "ClaimedRun",
    "ClaimedStep",
    "Commit",
    "Connections",
    "Cursor",
    "Dialect",
    "ErrorClass",
    "ErrorClassifier",
    "Migration",
    "Queries",
    "QueuePool",
    "Recorded",
    "RunRow",
    "SQLStore",
    "Statement",
    "StatementLimit",
    "StepRow",
    "StoreStats",
    "Tables",
    "check_int",
    "check_seconds",
    "default_classifier",
    "load_migrations",
    "split_statements",
]
