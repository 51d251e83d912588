"""Which server is this, and is it new enough? A pure function of the version string.

The driver needs ``SELECT ... FOR UPDATE SKIP LOCKED``: MySQL 8.0.1 and
MariaDB 10.6 are the first releases with it. Version strings look like
``8.4.2``, ``8.0.36-28`` (Percona), ``5.7.44-log``, ``10.11.19-MariaDB-0+deb12u1``
or, in the handshake packet of MariaDB before 11, ``5.5.5-10.6.12-MariaDB``
(a prefix MariaDB sends so that old MySQL replication clients accept it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from cairnflow import CairnError

__all__ = [
    "MIN_MARIADB",
    "MIN_MYSQL",
    "ServerVersion",
    "UnsupportedServer",
    "check_server_version",
    "parse_server_version",
]

MIN_MYSQL = (8, 0, 1)
"""``SKIP LOCKED`` arrived in MySQL 8.0.1 (every 8.0 GA release has it)."""
MIN_MARIADB = (10, 6, 0)
"""``SKIP LOCKED`` arrived in MariaDB 10.6."""

Flavor = Literal["mysql", "mariadb"]

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_MARIADB_REPLICATION_PREFIX = "5.5.5-"


class UnsupportedServer(CairnError):
    """The server is older than the driver's minimum, or says something unreadable."""


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """A parsed server version: which server, which release, and what it can do."""

    flavor: Flavor
    version: tuple[int, int, int]
    raw: str
    """The string as the server reported it."""

    @property
    def name(self) -> str:
        """``MySQL 8.4.2`` or ``MariaDB 10.11.19``."""
        product = "MariaDB" if self.flavor == "mariadb" else "MySQL"
        return f"{product} {'.'.join(map(str, self.version))}"

    @property
    def minimum(self) -> tuple[int, int, int]:
        """The oldest release of this server the driver accepts."""
        return MIN_MARIADB if self.flavor == "mariadb" else MIN_MYSQL

    @property
    def supported(self) -> bool:
        """True when this release has everything the driver needs."""
        return self.version >= self.minimum

    @property
    def descending_indexes(self) -> bool:
        """True when ``DESC`` in an index definition is honoured, not just parsed.

        MySQL 8.0 honours it; MariaDB parses and ignores it before 10.8. The
        claim orders by ``priority DESC, due_at, id``: without descending
        indexes that order needs a sort, and a locking read that sorts locks
        every row it sorts (see :class:`~cairnflow_mysql.MySQLDialect`).
        """
        if self.flavor == "mariadb":
            return self.version >= (10, 8, 0)
        return True

    @property
    def isolation_variable(self) -> str:
        """The session variable holding the isolation level.

        ``transaction_isolation`` on MySQL 8 and MariaDB 11.1+; before 11.1
        MariaDB only has ``tx_isolation`` (which MySQL 8 removed).
        """
        if self.flavor == "mariadb" and self.version < (11, 1, 0):
            return "tx_isolation"
        return "transaction_isolation"

    def __str__(self) -> str:
        return self.name


def parse_server_version(raw: str) -> ServerVersion:
    """Read a ``VERSION()`` or handshake string; :class:`UnsupportedServer` if unreadable."""
    text = raw.strip()
    mariadb = "mariadb" in text.lower()
    if mariadb and text.startswith(_MARIADB_REPLICATION_PREFIX):
        text = text[len(_MARIADB_REPLICATION_PREFIX) :]
    match = _VERSION.match(text)
    if match is None:
        raise UnsupportedServer(
            f"cannot read the server version {raw!r}: cairnflow-mysql needs "
            f"{_needed()} and expects a version such as '8.4.2' or '10.11.9-MariaDB'"
        )
    version = (int(match[1]), int(match[2]), int(match[3] or 0))
    return ServerVersion("mariadb" if mariadb else "mysql", version, raw)


def check_server_version(raw: str, *, where: str = "the server") -> ServerVersion:
    """Parse ``raw`` and refuse a server older than the minimum, naming both versions."""
    server = parse_server_version(raw)
    if not server.supported:
        raise UnsupportedServer(
            f"{where} runs {server.name} ({raw!r}), but cairnflow-mysql needs {_needed()}, "
            f"for SELECT ... FOR UPDATE SKIP LOCKED: upgrade the server"
        )
    return server


def _needed() -> str:
    mysql = ".".join(map(str, MIN_MYSQL))
    mariadb = ".".join(map(str, MIN_MARIADB[:2]))
    return f"MySQL {mysql} or newer, or MariaDB {mariadb} or newer"
