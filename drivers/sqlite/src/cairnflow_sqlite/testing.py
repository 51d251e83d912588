"""Helpers for tests that run SQLite stores in worker subprocesses (the conformance kit)."""

from __future__ import annotations

from typing import Any

from ._store import SQLiteStore

__all__ = ["make_store"]


def make_store(namespace: str, *, path: str, **options: Any) -> SQLiteStore:
    """The store a worker process opens: the same file, the test's table prefix."""
    return SQLiteStore(path, table_prefix=namespace, **options)
