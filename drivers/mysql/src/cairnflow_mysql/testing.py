"""Helpers for tests that run MySQL stores in worker subprocesses (the conformance kit)."""

from __future__ import annotations

from typing import Any

from ._store import MySQLStore

__all__ = ["make_store"]


def make_store(namespace: str, *, url: str, **options: Any) -> MySQLStore:
    """The store a worker process opens: the same database, the test's table prefix."""
    return MySQLStore(url, table_prefix=namespace, **options)
