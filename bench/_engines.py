"""The engines a benchmark runs on, and what it needs to know about each.

Each engine gives: a store for a fresh namespace, a raw DB-API connection on
the same database with the same durability (for the baseline), the server's
settings that decide durability, and the bytes a namespace's tables take.
An engine whose driver is not installed, or whose server is not configured,
is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENGINES = ("sqlite", "postgres", "mariadb")


@dataclass
class Engine:
    """One database to benchmark on."""

    name: str
    url: str
    driver: str
    make_store: Callable[..., Any]
    """prefix, **options -> a migrated-to-be store on this database (options: the store's)."""
    connect: Callable[[], Any]
    """A raw DB-API connection, autocommit off, for the baseline."""
    paramstyle: str
    settings: dict[str, str] = field(default_factory=dict)
    table_bytes: Callable[[str], int] = lambda prefix: 0
    drop: Callable[[str], None] = lambda prefix: None
    worker_args: dict[str, Any] = field(default_factory=dict)
    """What a worker subprocess needs to open the same store (see ``_client_proc``)."""

    def sql(self, text: str) -> str:
        """Portable ``?`` placeholders in this driver's style."""
        return text if self.paramstyle == "qmark" else text.replace("?", "%s")


def prefix() -> str:
    """A fresh namespace for one workload."""
    return f"b{uuid.uuid4().hex[:8]}_"


def load(name: str, workdir: Path) -> Engine | str:
    """The engine ``name``, or the reason it is skipped."""
    if name == "sqlite":
        return _sqlite(workdir)
    if name == "postgres":
        return _postgres()
    if name == "mariadb":
        return _mariadb()
    return f"unknown engine {name!r}"


def load_or_exit(name: str, workdir: Path) -> Engine:
    """The engine ``name``, or the process exits naming why it cannot be had (a script's use)."""
    engine = load(name, workdir)
    if isinstance(engine, str):
        raise SystemExit(engine)
    return engine


def _sqlite(workdir: Path) -> Engine | str:
    if importlib.util.find_spec("cairnflow_sqlite") is None:
        return "cairnflow-sqlite is not installed"
    from cairnflow_sqlite import SQLiteStore

    path = Path(tempfile.mkdtemp(prefix="cairnbench-", dir=workdir)) / "bench.db"
    synchronous = os.environ.get("CAIRNFLOW_BENCH_SQLITE_SYNCHRONOUS", "FULL")

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        return conn

    def table_bytes(prefix: str) -> int:
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            try:
                rows = conn.execute(
                    "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE ? || '%'", (prefix,)
                ).fetchone()
                return int(rows[0] or 0)
            except sqlite3.OperationalError:  # dbstat not compiled in
                return path.stat().st_size

    with connect() as probe:
        journal = probe.execute("PRAGMA journal_mode").fetchone()[0]
    return Engine(
        name="sqlite",
        url=f"sqlite:///{path}",
        driver="sqlite3",
        make_store=lambda prefix, **options: SQLiteStore(
            path, table_prefix=prefix, synchronous=synchronous, **options
        ),
        connect=connect,
        paramstyle="qmark",
        settings={
            "server": f"SQLite {sqlite3.sqlite_version}",
            "journal_mode": str(journal),
            "synchronous": synchronous,
            "file": str(path),
        },
        table_bytes=table_bytes,
        worker_args={"path": str(path), "synchronous": synchronous},
    )


def _postgres() -> Engine | str:
    url = os.environ.get("CAIRNFLOW_BENCH_POSTGRES_URL") or os.environ.get(
        "CAIRNFLOW_TEST_POSTGRES_URL"
    )
    if not url:
        return "set CAIRNFLOW_BENCH_POSTGRES_URL (or CAIRNFLOW_TEST_POSTGRES_URL)"
    if importlib.util.find_spec("cairnflow_postgres") is None:
        return "cairnflow-postgres is not installed"
    import psycopg

    from cairnflow_postgres import PostgresStore
    from cairnflow_postgres.testing import drop_namespace

    def connect() -> Any:
        return psycopg.connect(url, autocommit=False)

    def one(sql: str, *params: Any) -> Any:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchone()[0]  # type: ignore[index]

    def table_bytes(prefix: str) -> int:
        return int(
            one(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname LIKE %s",
                prefix + "%",
            )
        )

    def drop(prefix: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            names = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename LIKE %s",
                (prefix + "%",),
            ).fetchall()
            for (name,) in names:
                conn.execute(f'DROP TABLE IF EXISTS "{name}" CASCADE')
            # The migrations' trigger functions outlive their tables (each run left three).
            drop_namespace(conn, prefix)

    return Engine(
        name="postgres",
        url=url,
        driver=f"psycopg {psycopg.__version__}",
        make_store=lambda prefix: PostgresStore(url, table_prefix=prefix),
        connect=connect,
        paramstyle="format",
        settings={
            "server": str(one("SELECT version()")).split(" on ")[0],
            "fsync": str(one("SHOW fsync")),
            "synchronous_commit": str(one("SHOW synchronous_commit")),
        },
        table_bytes=table_bytes,
        drop=drop,
        worker_args={"url": url},
    )


def _mariadb() -> Engine | str:
    url = os.environ.get("CAIRNFLOW_BENCH_MARIADB_URL") or os.environ.get(
        "CAIRNFLOW_TEST_MARIADB_URL"
    )
    if not url:
        return "set CAIRNFLOW_BENCH_MARIADB_URL (or CAIRNFLOW_TEST_MARIADB_URL)"
    if importlib.util.find_spec("cairnflow_mysql") is None:
        return "cairnflow-mysql is not installed"
    from urllib.parse import urlsplit

    import pymysql

    from cairnflow_mysql import MySQLStore

    parts = urlsplit(url)

    def connect() -> Any:
        conn = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
            database=(parts.path or "/test").lstrip("/"),
            charset="utf8mb4",
            autocommit=False,
            client_flag=pymysql.constants.CLIENT.FOUND_ROWS,
        )
        with conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        return conn

    def one(sql: str, *params: Any) -> Any:
        conn = connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params or None)
                return cur.fetchone()[0]
        finally:
            conn.close()

    def table_bytes(prefix: str) -> int:
        conn = connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name LIKE %s",
                    (prefix + "%",),
                )
                for (name,) in cur.fetchall():
                    cur.execute(f"ANALYZE TABLE `{name}`")
                    cur.fetchall()
                cur.execute(
                    "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name LIKE %s",
                    (prefix + "%",),
                )
                return int(cur.fetchone()[0])
        finally:
            conn.close()

    def drop(prefix: str) -> None:
        conn = connect()
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name LIKE %s",
                    (prefix + "%",),
                )
                for (name,) in cur.fetchall():
                    cur.execute(f"DROP TABLE IF EXISTS `{name}`")
            conn.commit()
        finally:
            conn.close()

    return Engine(
        name="mariadb",
        url=url,
        driver=f"PyMySQL {pymysql.__version__}",
        make_store=lambda prefix, **options: MySQLStore.from_url(
            url, table_prefix=prefix, **options
        ),
        connect=connect,
        paramstyle="format",
        settings={
            "server": str(one("SELECT VERSION()")),
            "innodb_flush_log_at_trx_commit": str(one("SELECT @@innodb_flush_log_at_trx_commit")),
            "sync_binlog": str(one("SELECT @@sync_binlog")),
        },
        table_bytes=table_bytes,
        drop=drop,
        worker_args={"url": url},
    )
