"""``sqlite:///path``: the SQL store on one SQLite file."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from cairnflow import CairnError, Cap, StoreOpenError
from cairnflow.notify import LOCAL, Notifier
from cairnflow.sql import (
    SQL_CAPABILITIES,
    ErrorClassifier,
    QueuePool,
    SQLStore,
    load_migrations,
)
from cairnflow.store import StoreInfo

from ._dialect import SQLiteDialect
from ._version import __version__

__all__ = ["MIN_SQLITE", "SYNCHRONOUS_MODES", "SQLiteStore"]

MIN_SQLITE = (3, 35, 0)
"""``UPDATE ... RETURNING`` arrived in SQLite 3.35."""
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
MEMORY = ":memory:"


def _check_sqlite_version() -> None:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        need = ".".join(map(str, MIN_SQLITE))
        raise CairnError(
            f"cairnflow-sqlite needs SQLite {need} or newer (for UPDATE ... RETURNING); this "
            f"Python's sqlite3 module links SQLite {sqlite3.sqlite_version}"
        )


class SQLiteStore(SQLStore):
    """A store in one SQLite file: durable, shared by every process on the machine.

    The file is opened in WAL mode; writes take the write lock up front
    (``BEGIN IMMEDIATE``) and wait up to ``busy_timeout`` seconds for it;
    SQLITE_BUSY beyond that retries the whole transaction, so it never
    reaches the caller. ``synchronous`` is SQLite's durability setting
    (``FULL`` by default: a committed outcome survives a power cut).
    ``":memory:"`` is a private, non-durable database of this store object.
    Clients in one process wake each other at once; across processes they
    find work by polling, unless the store is given a ``notifier`` that
    reaches other processes (``cairnflow_redis.RedisNotifier``,
    ``cairnflow_nats.NatsNotifier``): then the store declares ``Cap.NOTIFY``
    and closes that notifier when it is closed.

    ``client.enqueue_tx(conn, ...)`` takes the application's own ``sqlite3``
    connection to the same file, inside its transaction.
    """

    capabilities = SQL_CAPABILITIES | {
        Cap.TRANSACTIONAL_ENQUEUE,
        Cap.DATABASE_CLOCK,
        Cap.STEP_HISTORY,  # recorded by its trigger (migration 014)
        Cap.RUN_TIMEOUT,  # the runs_overdue index (migration 015)
        Cap.LIFECYCLE,  # the outbox its triggers write (migration 020)
    }

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table_prefix: str = "cf_",
        synchronous: str = "FULL",
        busy_timeout: float = 5.0,
        pool_size: int = 32,
        error_classifier: ErrorClassifier | None = None,
        tx_attempts: int = 5,
        notifier: Notifier | None = None,
    ) -> None:
        _check_sqlite_version()
        mode = str(synchronous).upper()
        if mode not in SYNCHRONOUS_MODES:
            raise ValueError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, got {synchronous!r}"
            )
        if not busy_timeout > 0:
            raise ValueError(f"busy_timeout must be > 0 seconds, got {busy_timeout!r}")
        in_memory = str(path) == MEMORY
        self.path = MEMORY if in_memory else str(Path(path).expanduser().resolve())
        if not in_memory:
            _check_database_path(Path(self.path))
        elif notifier is not None:
            raise ValueError(
                "a notifier wakes other processes and store objects, but a ':memory:' database "
                "is private to one store object: open a file to share it"
            )
        self.synchronous = mode
        timeout_ms = int(busy_timeout * 1000)

        def connect() -> sqlite3.Connection:
            # Autocommit mode: the SQL layer issues BEGIN IMMEDIATE / COMMIT itself.
            try:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
                )
            except sqlite3.OperationalError as error:
                raise StoreOpenError(
                    f"cannot open the SQLite database {self.path}: {error}"
                ) from error
            conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            if not in_memory:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {mode}")
            # The claim's IN (subquery) and a batch's ORDER BY build small temporary tables;
            # in a file (the default) each costs a temporary file's pages.
            conn.execute("PRAGMA temp_store = MEMORY")
            return conn

        # A private in-memory database lives in one connection: the pool keeps exactly one.
        pool = QueuePool(connect, max_size=1 if in_memory else pool_size, timeout=busy_timeout * 6)
        shown = f"sqlite:///{self.path}"
        super().__init__(
            pool,
            SQLiteDialect(None if in_memory else self.path),
            load_migrations("cairnflow_sqlite"),
            info=StoreInfo(
                driver="sqlite",
                distribution="cairnflow-sqlite",
                version=__version__,
                url=shown,
                durable=not in_memory,
                server=f"SQLite {sqlite3.sqlite_version}",
            ),
            table_prefix=table_prefix,
            error_classifier=error_classifier,
            tx_attempts=tx_attempts,
            notifier=LOCAL if notifier is None else notifier,
        )
        if in_memory:
            # One connection, private to this object: nobody else can share a transaction.
            self.capabilities = (
                SQL_CAPABILITIES | {Cap.STEP_HISTORY, Cap.RUN_TIMEOUT, Cap.LIFECYCLE}
            ) - {
                Cap.DURABLE,
                Cap.MULTI_PROCESS,
            }
        # Clients of the same file and prefix in this process wake each other.
        self._channel = (
            f"cairnflow_sqlite:{self.path}:{id(self) if in_memory else ''}:{table_prefix}"
        )

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> SQLiteStore:
        """Open ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or ``sqlite:///:memory:``.

        Options may come as strings (from the command line) and are converted.
        """
        if not url.startswith("sqlite://"):
            raise CairnError(f"not a sqlite:// URL: {url!r}")
        rest = url[len("sqlite://") :]
        if not rest.startswith("/"):
            raise CairnError(
                f"a SQLite URL is sqlite:///relative.db or sqlite:////absolute.db, got {url!r}"
            )
        path = rest[1:] or MEMORY
        converted: dict[str, Any] = dict(options)
        for name, kind in (("busy_timeout", float), ("pool_size", int), ("tx_attempts", int)):
            if isinstance(converted.get(name), str):
                converted[name] = kind(converted[name])
        return cls(path, **converted)


def _check_database_path(path: Path) -> None:
    """Refuse, naming it, a database path that cannot be a SQLite file (before any connection)."""
    if path.is_dir():
        raise StoreOpenError(
            f"cannot open the SQLite database {path}: it is a directory; name a file in it"
        )
    if not path.parent.is_dir():
        raise StoreOpenError(
            f"cannot open the SQLite database {path}: the directory {path.parent} does not "
            f"exist; create it first"
        )
