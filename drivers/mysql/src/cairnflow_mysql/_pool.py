"""The connection pool: the SQL layer's :class:`~cairnflow.sql.QueuePool`, pinging idle connections.

PyMySQL has no pool of its own. The maintained general-purpose ones either
pull in a whole toolkit (SQLAlchemy's ``QueuePool``) or reconnect and
re-execute behind the caller's back (DBUtils' ``SteadyDB``), which hides
exactly the "was it committed?" question the SQL layer answers itself. The
shared ``QueuePool`` already lends one connection per transaction, opens
connections on demand, and discards a connection whose block raised an error
that :func:`~cairnflow_mysql.classify_mysql_error` calls unavailable.

This module adds what a server-side connection needs: a connection that sat
idle for ``ping_interval`` seconds or more is pinged before it is lent, and a
dead one (the server restarted, ``wait_timeout`` closed it, someone ran
``KILL``) is replaced by a fresh connection. One that dies between the ping and
its first statement fails that statement; the SQL layer then retries the
transaction on another connection (nothing was committed), so callers never
see it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from cairnflow import Unavailable
from cairnflow.sql import QueuePool

from ._errors import PACKET_TOO_LARGE, classify_mysql_error, error_code

__all__ = ["MySQLPool"]

_IDLE_SINCE = "_cairnflow_idle_since"


class MySQLPool:
    """Lends PyMySQL connections made by ``connect()``; see the module docstring.

    ``max_size`` caps the connections open at once; ``timeout`` is how long a
    borrower waits for one before :class:`cairnflow.Unavailable`.
    ``ping_interval`` (seconds): a connection idle at least this long is pinged
    before it is lent; ``0`` pings every time.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        max_size: int,
        timeout: float,
        ping_interval: float,
    ) -> None:
        if not ping_interval >= 0:
            raise ValueError(f"ping_interval must be >= 0 seconds, got {ping_interval!r}")
        self.ping_interval = float(ping_interval)
        self._pool = QueuePool(
            connect, max_size=max_size, timeout=timeout, check=self._check, broken=_broken
        )

    @property
    def max_size(self) -> int:
        """The most connections open at once."""
        return self._pool.max_size

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """Lend one connection, with no transaction open, for the ``with`` block."""
        with self._pool.connection() as conn:
            try:
                yield conn
            finally:
                setattr(conn, _IDLE_SINCE, time.monotonic())

    def _check(self, conn: Any) -> None:
        # The SQL layer retries a transaction whose connection died inside the same
        # pool block, so the pool never sees that error; but PyMySQL closed its socket
        # when it saw the connection die (or when the rollback after it failed).
        if not conn.open:
            raise ConnectionError("PyMySQL closed this connection after an error")
        idle_since = getattr(conn, _IDLE_SINCE, None)
        if idle_since is None or time.monotonic() - idle_since >= self.ping_interval:
            # No reconnect here: a failed ping makes the pool open a new connection
            # through connect(), which sets the session up and checks the server again.
            conn.ping(reconnect=False)

    def close(self) -> None:
        """Close idle connections now and lent ones when they come back."""
        self._pool.close()


def _broken(error: BaseException) -> bool:
    """Whether the connection a block raised ``error`` on must be thrown away."""
    if not isinstance(error, Exception) or isinstance(error, Unavailable):
        # KeyboardInterrupt and friends may stop PyMySQL halfway through a packet;
        # Unavailable is the SQL layer's word for a connection that failed.
        return True
    # The server closes the connection after a packet over max_allowed_packet.
    return classify_mysql_error(error).unavailable or error_code(error) == PACKET_TOO_LARGE
