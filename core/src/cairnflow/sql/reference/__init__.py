"""The table layout :mod:`cairnflow.sql` expects, for a driver of a new SQL engine to start from.

Every statement of the SQL layer names the columns of its tables (runs, steps,
signals, schedules, ticks); their layout is the layer's contract, not any one
driver's. It is kept here once, as numbered SQL files with their types left
open (``001_init.sql``, ``002_schedules.sql``), so a new dialect renders its
migrations from the contract instead of copying the Postgres or SQLite
driver's (which carry their engines' history). Render them once and ship the
results as files of the driver's own: the migrations ledger checks every
applied file against its checksum, so a migration never changes after a
release, and a new reference version is a new file to render::

    python -m cairnflow.sql.reference --types postgres --into src/cairnflow_mydb/migrations
"""

from __future__ import annotations

from collections.abc import Mapping
from string import Template

from .._migrations import Migration, load_migrations

__all__ = ["TYPES", "reference_migrations"]

TYPES: Mapping[str, Mapping[str, str]] = {
    "postgres": {
        "identity": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "int": "INTEGER",
        "bigint": "BIGINT",
        "text": "TEXT",
        "bytes": "BYTEA",
        "bool": "BOOLEAN",
        "false": "FALSE",
        "ordered_text": 'TEXT COLLATE "C"',
        "each_label": "jsonb_each_text(r.labels::jsonb)",
    },
    "sqlite": {
        "identity": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "int": "INTEGER",
        "bigint": "INTEGER",
        "text": "TEXT",
        "bytes": "BLOB",
        "bool": "INTEGER",
        "false": "0",
        "ordered_text": "TEXT",
        "each_label": "json_each(r.labels)",
    },
}
"""The types of the reference schema on engines whose SQL is close to the standard's.

``identity`` is an increasing 64-bit key the database assigns (a column
definition, primary key included); ``int`` fits 32 bits; ``bigint`` holds 64
(Unix nanoseconds); ``text`` is unbounded text that can be indexed; ``bytes``
is binary, returned exactly as written, large enough for a step's output;
``bool`` and ``false`` a boolean column and its false literal; ``ordered_text`` text that
compares and sorts by code point (a binary collation: the label index's prefix ranges, 007);
``each_label`` a table function of the ``(key, value)`` pairs of a run ``r``'s JSON labels
(007's copy of the labels of runs made before it).
"""


def reference_migrations(types: str | Mapping[str, str] = "postgres") -> tuple[Migration, ...]:
    """Every reference file with its types filled in: the texts of a driver's migrations.

    ``types`` names an entry of :data:`TYPES`, or maps each of its keys to the
    engine's type. The namespace placeholders (``{runs}``, ``{steps}``, ...,
    ``{p}``) are left for the SQL layer, which fills them per store.
    """
    chosen = TYPES[types] if isinstance(types, str) else types
    missing = sorted(set(TYPES["postgres"]) - set(chosen))
    if missing:
        raise ValueError(f"reference_migrations: no type given for {', '.join(missing)}")
    return tuple(
        Migration(m.version, m.name, Template(m.text).substitute(chosen))
        for m in load_migrations(__name__, ".")
    )
