"""Versioned migrations: numbered SQL files per engine, recorded in a ledger.

A driver ships ``migrations/001_init.sql``, ``002_....sql``, ... in its package.
Each file is a template whose ``{runs}``, ``{steps}``, ``{signals}``,
``{migrations}``, ``{p}`` and ``{schema}`` placeholders are filled from the
store's validated, quoted :class:`~cairnflow.sql.Tables`. Applied versions are
recorded with a checksum of the file, so an applied file that was edited
afterwards is refused instead of silently diverging.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from .._errors import CairnError
from ._tables import Tables

__all__ = ["Migration", "load_migrations", "split_statements"]

MIGRATION_FILE = re.compile(r"(\d{3})_([a-z0-9_]+)\.sql")
"""A migration file's name: its number (three digits) and its name."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered migration file."""

    version: int
    name: str
    text: str

    @property
    def label(self) -> str:
        """``001_init``."""
        return f"{self.version:03d}_{self.name}"

    @property
    def checksum(self) -> str:
        """SHA-256 of the file's template text."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    def render(self, tables: Tables) -> str:
        """The SQL for one namespace."""
        return self.text.format(**tables.template())

    def statements(self, tables: Tables) -> list[str]:
        """The rendered SQL split into single statements."""
        return split_statements(self.render(tables))


def load_migrations(package: str, directory: str = "migrations") -> tuple[Migration, ...]:
    """Read ``NNN_name.sql`` files from ``package``'s ``directory``, numbered from 001, no gap."""
    found: list[Migration] = []
    for entry in resources.files(package).joinpath(directory).iterdir():
        match = MIGRATION_FILE.fullmatch(entry.name)
        if match is None:
            continue
        found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise CairnError(
                f"{package}: migrations must be numbered 001, 002, ... without gaps; "
                f"found {migration.label} where {expected:03d} was expected"
            )
    if not found:
        raise CairnError(f"{package}: no migrations found in {directory}/")
    return tuple(found)


_TRIGGER = re.compile(r"\s*CREATE\s+TRIGGER\b", re.I)
_BLOCK_END = re.compile(r"\bEND\s*$", re.I)


def _ends_statement(current: list[str]) -> bool:
    """Whether a semicolon after ``current`` ends its statement.

    Always, but in a ``CREATE TRIGGER``: its body's statements end with
    semicolons too (SQLite's and MySQL's ``BEGIN ... END``), so there only the
    semicolon after the body's closing ``END`` does (``END IF;`` does not).
    """
    code = re.sub(r"--[^\n]*|/\*.*?\*/", "", "".join(current), flags=re.S)
    return not _TRIGGER.match(code) or bool(_BLOCK_END.search(code))


def split_statements(sql: str) -> list[str]:
    """Split ``sql`` on semicolons outside quotes and comments; drop empty statements.

    A ``CREATE TRIGGER`` statement runs to the semicolon after its body's ``END``.
    """
    statements: list[str] = []
    current: list[str] = []
    i = 0
    quote: str | None = None
    while i < len(sql):
        char = sql[i]
        if quote is not None:
            current.append(char)
            if char == quote:
                quote = None
        elif char in ("'", '"', "`"):
            quote = char
            current.append(char)
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = len(sql) if end == -1 else end
            current.append(sql[i:end])
            i = end
            continue
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = len(sql) if end == -1 else end + 2
            current.append(sql[i:end])
            i = end
            continue
        elif char == ";" and _ends_statement(current):
            statements.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    statements.append("".join(current))
    return [s.strip() for s in statements if _has_code(s)]


def _has_code(statement: str) -> bool:
    without_comments = re.sub(r"--[^\n]*|/\*.*?\*/", "", statement, flags=re.S)
    return bool(without_comments.strip())
