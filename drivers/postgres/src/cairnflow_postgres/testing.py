"""Helpers for tests of Postgres stores: worker-process stores, private namespaces, cleanup."""

from __future__ import annotations

import secrets
from typing import Any

import psycopg
from psycopg import sql

from cairnflow.sql import TABLES

from ._dialect import PostgresDialect
from ._store import PostgresStore

__all__ = ["TABLES", "drop_namespace", "make_store", "unique_prefix"]


def make_store(
    namespace: str,
    *,
    dsn: str,
    schema: str | None = None,
    max_size: int = 6,
    **options: Any,
) -> PostgresStore:
    """The store a worker process opens: the same database, the test's table prefix.

    A worker holds few connections (its workers, the listener and one more), so
    many test processes fit under a server's ``max_connections``.
    """
    return PostgresStore(
        dsn, table_prefix=namespace, schema=schema, min_size=1, max_size=max_size, **options
    )


def unique_prefix(stem: str = "pt") -> str:
    """A fresh table prefix: ``stem``, 8 random hex digits and ``_``."""
    return f"{stem}{secrets.token_hex(4)}_"


def drop_namespace(conn: psycopg.Connection[Any], prefix: str, schema: str | None = None) -> None:
    """Drop the tables of ``prefix`` on an autocommit connection (all of ``schema``, if given)."""
    if schema is not None:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        return
    for table in TABLES:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(prefix + table)))
    # The trigger functions of the migrations (their triggers went with their tables).
    for function in PostgresDialect.namespace_routines:
        conn.execute(
            sql.SQL("DROP FUNCTION IF EXISTS {}()").format(sql.Identifier(prefix + function))
        )
