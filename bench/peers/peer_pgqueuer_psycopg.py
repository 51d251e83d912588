"""PgQueuer on psycopg 3: the asyncpg adapter with ``PsycopgDriver`` on an autocommit
``psycopg.AsyncConnection`` (what PgQueuer requires of a psycopg connection)."""

from __future__ import annotations

from typing import Any

from .peer_pgqueuer import PgQueuerPeer


class PgQueuerPsycopgPeer(PgQueuerPeer):
    name = "PgQueuer (psycopg)"
    order = 21
    distributions = ("pgqueuer", "psycopg")
    config = PgQueuerPeer.config.replace("AsyncpgDriver", "PsycopgDriver")

    async def connect(self, url: str) -> Any:
        import psycopg
        from pgqueuer.db import PsycopgDriver

        return PsycopgDriver(await psycopg.AsyncConnection.connect(url, autocommit=True))


PEER = PgQueuerPsycopgPeer()
