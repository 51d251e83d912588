"""The table layout :mod:`cairnflow.sql` expects, for a driver of a new SQL engine to start from.

Every statement of the SQL layer names the columns of three tables (runs, steps,
signals); their layout is the layer's contract, not any one driver's. It is
kept here once, as ``schema.sql`` with its types left open, so a new dialect
renders its first migration from the contract instead of copying the Postgres
or SQLite driver's (which carry their engines' history, and may gain
migrations of their own). Render it once and ship the result as a file
(``migrations/001_init.sql``): the migrations ledger checks every applied file
against its checksum, so a migration must never change after a release.

::

    python -m cairnflow.sql.reference --types postgres > src/cairnflow_mydb/migrations/001_init.sql
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from string import Template

__all__ = ["TYPES", "reference_schema"]

TYPES: Mapping[str, Mapping[str, str]] = {
    "postgres": {
        "identity": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "int": "INTEGER",
        "bigint": "BIGINT",
        "text": "TEXT",
        "bytes": "BYTEA",
    },
    "sqlite": {
        "identity": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "int": "INTEGER",
        "bigint": "INTEGER",
        "text": "TEXT",
        "bytes": "BLOB",
    },
}
"""The types of the reference schema on engines whose SQL is close to the standard's.

``identity`` is an increasing 64-bit key the database assigns (a column
definition, primary key included); ``int`` fits 32 bits; ``bigint`` holds 64
(Unix nanoseconds); ``text`` is unbounded text that can be indexed; ``bytes``
is binary, returned exactly as written, large enough for a step's output.
"""


def reference_schema(types: str | Mapping[str, str] = "postgres") -> str:
    """``schema.sql`` with its types filled in: the text of a driver's first migration.

    ``types`` names an entry of :data:`TYPES`, or maps each of ``identity``,
    ``int``, ``bigint``, ``text`` and ``bytes`` to the engine's type. The
    namespace placeholders (``{runs}``, ``{steps}``, ``{signals}``, ``{p}``)
    are left for the SQL layer, which fills them per store.
    """
    chosen = TYPES[types] if isinstance(types, str) else types
    missing = sorted(set(TYPES["postgres"]) - set(chosen))
    if missing:
        raise ValueError(f"reference_schema: no type given for {', '.join(missing)}")
    text = resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")
    return Template(text).substitute(chosen)
