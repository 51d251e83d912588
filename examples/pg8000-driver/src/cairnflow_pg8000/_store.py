"""``pg8000://user:password@host:port/dbname``: the SQL store on Postgres, through pg8000.

Everything a store does is :class:`cairnflow.sql.SQLStore`'s; this module only
says how to reach the server: a URL parsed into pg8000's ``connect()``
arguments, and a :class:`cairnflow.sql.QueuePool` of its connections (pg8000
has no pool), which throws away a connection whose error the dialect calls
*unavailable*. A connection that cannot be opened raises
:class:`cairnflow.Unavailable` itself: the SQL layer sorts the errors of a
transaction's statements, but opening the connection comes before them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import pg8000.dbapi

from cairnflow import CairnError, Unavailable
from cairnflow.sql import (
    SQL_CAPABILITIES,
    QueuePool,
    SQLStore,
    check_int,
    check_seconds,
    load_migrations,
)
from cairnflow.store import StoreInfo

from ._dialect import Pg8000Dialect, classify
from ._version import __version__

__all__ = ["PG8000_CAPABILITIES", "Pg8000Store", "connect_arguments"]

PG8000_CAPABILITIES = SQL_CAPABILITIES
"""The SQL layer's capabilities, each proven by the kit; nothing of the engine's own
(no NOTIFY, TRANSACTIONAL_ENQUEUE or DATABASE_CLOCK: this driver does not implement them)."""

SCHEME = "pg8000"


def connect_arguments(url: str) -> dict[str, Any]:
    """``pg8000.dbapi.connect`` keyword arguments for a ``pg8000://`` URL.

    Query parameters go to ``connect()`` as strings (``?application_name=x``);
    ``timeout`` (seconds) is converted.
    """
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise CairnError(f"not a {SCHEME}:// URL: {parts.scheme}://...")
    arguments: dict[str, Any] = {
        "user": unquote(parts.username or "postgres"),
        "host": parts.hostname or "localhost",
        "port": parts.port or 5432,
        "database": unquote(parts.path.lstrip("/")) or None,
    }
    if parts.password is not None:
        arguments["password"] = unquote(parts.password)
    for key, value in parse_qsl(parts.query):
        arguments[key] = float(value) if key == "timeout" else value
    return arguments


def _connect(arguments: dict[str, Any], shown: str) -> Any:
    """A new pg8000 connection; :class:`~cairnflow.Unavailable` when the server cannot be had."""
    try:
        return pg8000.dbapi.connect(**arguments)
    except Exception as error:
        if classify(error).unavailable or isinstance(error, OSError):
            raise Unavailable(f"pg8000 store at {shown} is unavailable: {error}") from error
        raise


def _redact(url: str) -> str:
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return f"{SCHEME}://{user}{parts.hostname or 'localhost'}{port}{parts.path}"


class Pg8000Store(SQLStore):
    """A store in PostgreSQL through pg8000; ``table_prefix`` names the namespace.

    ``max_size`` connections at most (size it above the client's workers plus
    two), each lent for one transaction, waiting ``pool_timeout`` seconds for a
    free one.
    """

    capabilities = PG8000_CAPABILITIES

    def __init__(
        self,
        url: str,
        *,
        table_prefix: str = "cf_",
        max_size: int = 10,
        pool_timeout: float = 30.0,
        tx_attempts: int = 5,
    ) -> None:
        arguments, shown = connect_arguments(url), _redact(url)
        dialect = Pg8000Dialect()
        pool = QueuePool(
            lambda: _connect(arguments, shown),
            max_size=check_int("max_size", max_size, minimum=1),
            timeout=check_seconds("pool_timeout", pool_timeout),
            broken=lambda error: classify(error).unavailable,
        )
        super().__init__(
            pool,
            dialect,
            load_migrations("cairnflow_pg8000"),
            info=StoreInfo(
                driver="pg8000",
                distribution="cairnflow-pg8000",
                version=__version__,
                url=shown,
                durable=True,
            ),
            table_prefix=table_prefix,
            tx_attempts=tx_attempts,
        )

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> Pg8000Store:
        """Open ``pg8000://user:password@host:port/dbname`` (what ``cf.open_store`` calls)."""
        return cls(url, **options)
