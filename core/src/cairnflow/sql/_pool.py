"""A small, thread-safe connection pool for DB-API drivers that have none.

Postgres uses ``psycopg_pool``; this pool serves drivers without a maintained
pool of their own. It opens connections on demand up to ``max_size``, lends
each to one ``with`` block at a time, checks a connection before lending it
(``check``), and discards one whose block raised an error the ``broken``
predicate recognises, so a dead connection is never lent twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from .._errors import Unavailable

__all__ = ["QueuePool"]

log = logging.getLogger("cairnflow.sql")


class QueuePool:
    """Lends DB-API connections made by ``connect()``; see the module docstring.

    ``timeout`` is how long ``connection()`` waits for a free connection
    when ``max_size`` are lent, before raising :class:`cairnflow.Unavailable`.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        max_size: int = 10,
        timeout: float = 30.0,
        check: Callable[[Any], None] | None = None,
        broken: Callable[[BaseException], bool] | None = None,
    ) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size!r}")
        self._connect = connect
        self._max_size = max_size
        self._timeout = timeout
        self._check = check
        self._broken = broken or (lambda _error: False)
        self._idle: deque[Any] = deque()
        self._opened = 0
        self._closed = False
        self._cond = threading.Condition()

    @property
    def max_size(self) -> int:
        """The most connections the pool opens at once."""
        return self._max_size

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """Lend one connection for the ``with`` block."""
        conn = self._acquire()
        discard = False
        try:
            yield conn
        except BaseException as error:
            discard = self._broken(error)
            raise
        finally:
            self._release(conn, discard=discard)

    def _acquire(self) -> Any:
        with self._cond:
            while True:
                if self._closed:
                    raise Unavailable("the connection pool is closed")
                if self._idle:
                    conn = self._idle.pop()
                    break
                if self._opened < self._max_size:
                    self._opened += 1
                    conn = None
                    break
                if not self._cond.wait(self._timeout):
                    raise Unavailable(
                        f"no connection free after {self._timeout:g}s ({self._max_size} lent); "
                        f"size the pool above the client's workers"
                    )
        if conn is None:
            return self._open_in_slot()
        if self._check is not None:
            try:
                self._check(conn)
            except Exception:
                log.info("discarding a connection that failed its check", exc_info=True)
                _quietly_close(conn)
                return self._open_in_slot()
        return conn

    def _open_in_slot(self) -> Any:
        """Open a connection in a slot already counted; give the slot back if that fails."""
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._opened -= 1
                self._cond.notify()
            raise

    def _release(self, conn: Any, *, discard: bool) -> None:
        with self._cond:
            if discard or self._closed:
                self._opened -= 1
                _quietly_close(conn)
            else:
                self._idle.append(conn)
            self._cond.notify()

    def close(self) -> None:
        """Close idle connections now and lent ones when they come back."""
        with self._cond:
            self._closed = True
            while self._idle:
                self._opened -= 1
                _quietly_close(self._idle.pop())
            self._cond.notify_all()


def _quietly_close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        log.debug("closing a connection failed", exc_info=True)
