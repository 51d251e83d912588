"""Wake-ups over LISTEN/NOTIFY: :class:`PgNotifier`.

A notification is a hint, never a delivery. Clients keep polling, so a lost,
late or duplicated notification changes when work starts, never whether it
runs. That is what lets this notifier be simple where it matters:

* **Sending is debounced.** ``notify()`` never blocks on the database: it
  marks the channel and wakes a sender thread. The first hint after a quiet
  spell goes out at once (the leading edge: a single enqueue waits for no
  timer); hints arriving within ``debounce`` seconds of the last send are
  coalesced into one trailing NOTIFY. A burst of a thousand enqueues is a
  handful of NOTIFYs, and every woken client claims all it can take anyway.
* **The first hint of a quiet spell can travel with the enqueue** (the store
  asks :meth:`PgNotifier.reserve_inline`): its ``pg_notify`` is a statement of
  the enqueue's own transaction, delivered at its commit, so the listeners wake
  as the runs become visible. Sent by the sender thread instead, it left one
  thread hand-over and one round trip on another connection after the commit
  (1.35 ms between the enqueue's return and the listener's wake-up, median of
  150, on a loaded machine, 2026-12-03, #20). The enqueuing thread's own hint
  after that commit is then covered, and sends nothing.
* **So do the trailing hints of a busy producer.** Once the window has passed,
  the next enqueue carries the NOTIFY whether or not hints are pending, and
  its commit covers the hints that came before its reservation; the sender
  waits up to half a window more (:data:`CARRY`) for such an enqueue before
  it sends them itself. Sent by the sender, each was a transaction of its own
  on another connection (a commit that waits for its WAL flush, and the
  database-wide lock a committing NOTIFY takes), about one per window for as
  long as enqueues kept coming: one-run enqueues in a loop measured 1,109 µs
  each with them against 1,020 µs with every hint inline (ten alternating
  rounds, 2026-12-05).
* **Listening holds one connection** in a thread that waits on its socket
  (and on a wake-up socket, so a new ``listen()`` takes effect at once). When
  that connection dies (a server restart, a terminated backend, a failover),
  the thread reconnects with backoff, LISTENs again on every channel and calls
  every ``wake`` once, since anything sent while it was away is lost.
  ``listen()`` returns once its LISTEN is in effect (or after
  ``listen_timeout`` when the database cannot be reached), so a hint sent
  after a client started is not missed.

Connections come from a psycopg pool: the store's (the default, one pool to
size), or the application's, or a small one the notifier opens for
``conninfo``. The listener holds one of them for as long as anything listens.
LISTEN does not work through a pooler in transaction or statement mode
(PgBouncer): point the notifier at Postgres itself or turn notifications off.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import ConnStatus, TransactionStatus
from psycopg_pool import ConnectionPool

__all__ = ["MAX_CHANNEL_BYTES", "PgNotifier", "channel_name", "check_connection", "lend_alive"]

log = logging.getLogger("cairnflow.postgres")

MAX_CHANNEL_BYTES = 63
"""Postgres identifiers, channel names included, are at most 63 bytes (NAMEDATALEN - 1)."""

Wake = Callable[[], None]


def channel_name(schema: str | None, table_prefix: str) -> str:
    """The NOTIFY channel of one namespace: ``cairnflow_<schema>.<prefix>`` or a hash of it.

    Schemas and prefixes never contain a dot, so distinct namespaces get
    distinct names; one longer than 63 bytes becomes ``cairnflow_`` and 40 hex
    digits of its SHA-256. Channels are per database in Postgres, so clusters
    in two databases never hear each other either.
    """
    name = f"cairnflow_{schema}.{table_prefix}" if schema else f"cairnflow_{table_prefix}"
    if len(name.encode()) > MAX_CHANNEL_BYTES:
        name = f"cairnflow_{hashlib.sha256(name.encode()).hexdigest()[:40]}"
    return name


def check_connection(conn: psycopg.Connection[Any]) -> None:
    """Raise unless ``conn`` is usable; costs no round trip on a healthy idle connection.

    An idle connection's socket has nothing to read unless the server said
    something: usually that it is terminating the session (a restart, a
    ``pg_terminate_backend``). Only then is the connection checked for real
    (``ConnectionPool.check_connection``).
    """
    if conn.closed or conn.pgconn.status != ConnStatus.OK:
        raise psycopg.OperationalError("the connection is closed")
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError) as error:
        raise psycopg.OperationalError(f"the connection's socket is unusable: {error}") from error
    if readable:
        ConnectionPool.check_connection(conn)


def lend_alive(pool: ConnectionPool[Any], timeout: float) -> psycopg.Connection[Any]:
    """A live connection from ``pool``: dead ones are closed, handed back and replaced at once.

    psycopg_pool's own ``check=`` sleeps a growing backoff (1 s, 2 s, ...) after
    each connection that fails it, so after a server restart a pool full of
    dead connections would keep a caller waiting for many seconds, or until
    ``PoolTimeout``. Here each dead connection costs nothing but its discard
    (the pool opens a replacement in the background); when the server itself
    is down, waiting for a new connection ends in ``PoolTimeout`` as usual.
    """
    deadline = time.monotonic() + timeout
    for _ in range(max(pool.max_size, 1) + 1):
        conn: psycopg.Connection[Any] = pool.getconn(max(deadline - time.monotonic(), 0.001))
        try:
            check_connection(conn)
        except Exception:
            log.debug("discarding a dead pooled connection", exc_info=True)
            with contextlib.suppress(Exception):
                conn.close()
            pool.putconn(conn)
            continue
        return conn
    fresh: psycopg.Connection[Any] = pool.getconn(max(deadline - time.monotonic(), 0.001))
    return fresh


def _execute_now(conn: psycopg.Connection[Any], query: str, params: Any) -> None:
    """Run one statement and commit it, whatever the connection's autocommit setting."""
    conn.execute(query, params)
    if not conn.autocommit:
        conn.commit()


class _Source:
    """Where the notifier's connections come from: a pool it was given, or one it opened."""

    def __init__(self, pool: ConnectionPool[Any] | None, conninfo: str | None) -> None:
        self.owned = pool is None
        if pool is None:
            pool = ConnectionPool(
                conninfo or "",
                min_size=1,
                max_size=2,
                kwargs={"autocommit": True, "application_name": "cairnflow-notify"},
                name="cairnflow-notify",
                open=True,
            )
        self.pool = pool

    def acquire(self, timeout: float) -> psycopg.Connection[Any]:
        return lend_alive(self.pool, timeout)

    def release(self, conn: psycopg.Connection[Any]) -> None:
        with contextlib.suppress(Exception):
            if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
                conn.rollback()
        try:
            self.pool.putconn(conn)
        except Exception:
            log.debug("could not return a connection to the pool", exc_info=True)

    def close(self) -> None:
        if self.owned:
            self.pool.close()


CARRY = 0.5
"""The share of a debounce window that pending hints wait, past its end, for an enqueue
to carry them (:meth:`PgNotifier.reserve_inline`) before the sender sends them: a hint
inside a window reaches the listeners at most 1.5 windows after the last send."""

INLINE_COVERS = 1.0
"""Seconds a committed inline NOTIFY covers its thread's next hint of the channel (the
client sends that hint right after the enqueue returns; an enqueue followed by none, a
delayed run's, must not swallow a later one for long)."""


class _Covered(threading.local):
    """Per thread: the channels whose next hint an inline NOTIFY covers, until when; and
    the channels of this thread's reserved inline NOTIFYs, reserved when."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}
        self.reserved: dict[str, float] = {}


class _Pending:
    """The hints of one channel not sent yet: when the first and the last came."""

    __slots__ = ("first", "last")

    def __init__(self, at: float) -> None:
        self.first = at
        self.last = at


class PgNotifier:
    """A :class:`cairnflow.notify.Notifier` on Postgres LISTEN/NOTIFY (see the module docstring).

    Give it the pool to use (``pool=``, e.g. the application's; it is never
    closed here) or a ``conninfo`` to open a small pool of its own (two
    connections: the listener and the sender). ``debounce`` is the shortest
    time between two NOTIFYs of one channel. The listener reconnects after
    ``reconnect_min`` seconds, doubling up to ``reconnect_max``; it pings an
    idle connection every ``ping_interval`` seconds, so a half-open connection
    is noticed too.

    ``sent``, ``received`` and ``reconnects`` count NOTIFYs sent, notifications
    received and listener reconnections, for tests and metrics; ``inline`` the
    NOTIFYs of ``sent`` handed to an enqueue's own transaction (:meth:`reserve_inline`,
    counted when reserved: a transaction rolled back sends none).
    """

    def __init__(
        self,
        pool: ConnectionPool[Any] | None = None,
        *,
        conninfo: str | None = None,
        debounce: float = 0.01,
        reconnect_min: float = 0.05,
        reconnect_max: float = 5.0,
        ping_interval: float = 15.0,
        listen_timeout: float = 5.0,
        pool_timeout: float = 10.0,
    ) -> None:
        if (pool is None) == (conninfo is None):
            raise ValueError("PgNotifier takes exactly one of pool= and conninfo=")
        if debounce < 0:
            raise ValueError(f"debounce must be >= 0 seconds, got {debounce!r}")
        if not 0 < reconnect_min <= reconnect_max:
            raise ValueError("reconnect_min must be > 0 and at most reconnect_max")
        if ping_interval <= 0 or listen_timeout < 0 or pool_timeout <= 0:
            raise ValueError("ping_interval and pool_timeout must be > 0, listen_timeout >= 0")
        self._source = _Source(pool, conninfo)
        self.debounce = float(debounce)
        self._reconnect = (float(reconnect_min), float(reconnect_max))
        self._ping_interval = float(ping_interval)
        self._listen_timeout = float(listen_timeout)
        self._pool_timeout = float(pool_timeout)
        self._lock = threading.Lock()
        self._closed = False
        self.sent = 0
        self.inline = 0
        self.received = 0
        self.reconnects = 0
        # -- sending
        self._send_cond = threading.Condition(self._lock)
        self._pending: dict[str, _Pending] = {}
        self._last_send = float("-inf")
        self._sending = False  # the sender took the pending hints and is sending them
        self._sender: threading.Thread | None = None
        self._send_failures = 0
        self._inline = _Covered()
        # -- listening
        self._subscribers: dict[str, list[Wake]] = {}
        self._listening: frozenset[str] = frozenset()
        self._listen_cond = threading.Condition(self._lock)
        self._listener: threading.Thread | None = None
        self._interrupt_r, self._interrupt_w = socket.socketpair()
        self._interrupt_r.setblocking(False)
        self._interrupt_w.setblocking(False)
        self._listener_pid: int | None = None
        self._served = False

    # -- sending ---------------------------------------------------------------------------------
    def notify(self, channel: str) -> None:
        """Ask for a NOTIFY on ``channel``; returns at once (the sender thread sends it)."""
        _check_channel(channel)
        covered = self._inline.until.pop(channel, None)
        if covered is not None and time.monotonic() < covered:
            return  # the enqueue this hint follows carried its own (sent_inline)
        with self._lock:
            if self._closed:
                return
            idle = not self._pending
            now = time.monotonic()
            pending = self._pending.get(channel)
            if pending is None:
                self._pending[channel] = _Pending(now)
            else:
                pending.last = now
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_loop, name="cairnflow-pg-notify", daemon=True
                )
                self._sender.start()
            # Only a sender waiting for work needs waking: with hints pending it waits for
            # the window's end (or is sending) and takes this one with them. Woken at every
            # hint, it took the GIL from the enqueuing thread once per enqueue for nothing.
            if idle:
                self._send_cond.notify()

    def reserve_inline(self, channel: str) -> bool:
        """True when a NOTIFY of ``channel`` would go out now (no send within ``debounce``):
        it counts as sent, and the caller sends it in its transaction. Hints pending then
        are covered once that transaction commits (:meth:`sent_inline`); until then the
        sender keeps them, and sends them if it rolls back."""
        _check_channel(channel)
        # A mark this thread left before is stale now: the hint it covered would have come
        # before this enqueue began (its client may have had no notifier to send it).
        self._inline.until.pop(channel, None)
        with self._lock:
            now = time.monotonic()
            if self._closed or self._sending or now - self._last_send < self.debounce:
                return False
            self._last_send = now  # the sender, waiting, now waits for a window from here
            self.sent += 1
            self.inline += 1
        self._inline.reserved[channel] = now
        return True

    def sent_inline(self, channel: str) -> None:
        """The reserved NOTIFY committed: this thread's next :meth:`notify` of ``channel``,
        within a second, is the hint that follows that commit, and sends nothing; and the
        hints pending since before the reservation, whose runs committed before it, are
        covered by it."""
        self._inline.until[channel] = time.monotonic() + INLINE_COVERS
        reserved = self._inline.reserved.pop(channel, None)
        if reserved is None:
            return
        with self._lock:
            pending = self._pending.get(channel)
            if pending is not None and pending.last <= reserved:
                del self._pending[channel]

    def _send_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._send_cond.wait()
                if self._closed:
                    return
                # Leading edge: a hint after a quiet spell goes at once. One inside the
                # window waits for its end and for a share more (CARRY), in case an enqueue
                # carries it; an enqueue's reservation restarts the window, and its commit
                # may leave nothing to send. Everything pending then goes in one NOTIFY.
                while (hold := self._due() - time.monotonic()) > 0 and not self._is_closed():
                    self._send_cond.wait(hold)
                if self._is_closed():
                    return
                if not self._pending:
                    continue
                channels = sorted(self._pending)
                self._pending.clear()
                self._sending = True
            try:
                self._send(channels)
            finally:
                with self._lock:
                    self._sending = False
                    self._last_send = time.monotonic()

    def _due(self) -> float:
        """When the sender sends what is pending (called under the lock)."""
        if not self._pending:
            return float("-inf")  # covered meanwhile: back to waiting for a hint
        window_ends = self._last_send + self.debounce
        first = min(pending.first for pending in self._pending.values())
        if first >= window_ends:
            return first  # the leading edge
        return window_ends + self.debounce * CARRY

    def _is_closed(self) -> bool:
        # A method, not the attribute, so the type checker does not pin the flag across waits.
        return self._closed

    def _send(self, channels: list[str]) -> None:
        try:
            conn = self._source.acquire(self._pool_timeout)
        except Exception as error:  # noqa: BLE001 - a hint only: reported, then dropped
            self._send_failed(error)
            return
        try:
            _execute_now(conn, "SELECT pg_notify(c, '') FROM unnest(%s::text[]) AS c", (channels,))
        except Exception as error:  # noqa: BLE001 - a hint only: reported, then dropped
            self._send_failed(error)
        else:
            with self._lock:
                self.sent += len(channels)
                self._send_failures = 0
        finally:
            self._source.release(conn)

    def _send_failed(self, error: BaseException) -> None:
        with self._lock:
            self._send_failures += 1
            failures = self._send_failures
        # A hint only: polling finds the work. Say so once per streak, not per enqueue.
        if failures == 1:
            log.warning(
                "could not send a wake-up notification (%s); clients fall back to polling", error
            )
        else:
            log.debug("could not send a wake-up notification: %s", error)

    # -- listening -------------------------------------------------------------------------------
    def listen(self, channel: str, wake: Wake) -> Callable[[], None]:
        """Call ``wake`` on every notification on ``channel`` until the returned function is called.

        Returns once the LISTEN is in effect (at most ``listen_timeout`` later),
        and calls ``wake`` once then, to cover hints sent before.
        """
        _check_channel(channel)
        with self._lock:
            if self._closed:
                raise RuntimeError("this PgNotifier is closed")
            self._subscribers.setdefault(channel, []).append(wake)
            if self._listener is None or not self._listener.is_alive():
                self._listener = threading.Thread(
                    target=self._listen_loop, name="cairnflow-pg-listen", daemon=True
                )
                self._listener.start()
        self._interrupt()
        with self._lock:
            self._listen_cond.wait_for(
                lambda: channel in self._listening or self._closed, self._listen_timeout
            )
        wake()

        def stop() -> None:
            with self._lock:
                wakes = self._subscribers.get(channel)
                if wakes is not None and wake in wakes:
                    wakes.remove(wake)
                    if not wakes:
                        del self._subscribers[channel]
            self._interrupt()

        return stop

    @property
    def listening(self) -> frozenset[str]:
        """The channels the listener's connection LISTENs on right now."""
        with self._lock:
            return self._listening

    @property
    def listener_pid(self) -> int | None:
        """The backend pid of the listener's connection (None while it has none)."""
        with self._lock:
            return self._listener_pid

    def _interrupt(self) -> None:
        with contextlib.suppress(OSError):
            self._interrupt_w.send(b"\0")

    def _drain_interrupts(self) -> None:
        with contextlib.suppress(OSError):
            while self._interrupt_r.recv(4096):
                pass

    def _wanted(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._subscribers) if not self._closed else frozenset()

    def _listen_loop(self) -> None:
        delay = self._reconnect[0]
        while True:
            if not self._wanted():
                if self._retire():
                    return
                continue
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = self._source.acquire(self._pool_timeout)
                restore = conn.autocommit
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.rollback()
                conn.autocommit = True  # a LISTEN takes effect at commit: none to wait for
                conn.add_notify_handler(self._on_notify)
                try:
                    with self._lock:
                        self._listener_pid = conn.info.backend_pid
                    self._serve(conn)
                finally:
                    # UNLISTEN first: a notification arriving meanwhile still has a handler and
                    # is not left in the connection's backlog for the pool's next borrower.
                    self._stop_listening(conn, restore)
                    conn.remove_notify_handler(self._on_notify)
            except Exception as error:  # noqa: BLE001 - any failure: reconnect, keep polling
                if self._listening:
                    delay = self._reconnect[0]  # it was serving: try again soon
                if self._wanted():
                    log.warning(
                        "the notification listener lost its connection (%s); reconnecting in "
                        "%.2fs, polling meanwhile",
                        str(error).strip().splitlines()[0] if str(error).strip() else error,
                        delay,
                    )
                    with self._lock:
                        self._listening = frozenset()
                        self._listener_pid = None
                    if conn is not None:
                        self._source.release(conn)
                        conn = None
                    # Sleep the backoff, but wake for close(); jitter spreads a fleet's retries.
                    self._sleep(delay * random.uniform(0.8, 1.2))
                    delay = min(delay * 2, self._reconnect[1])
            finally:
                with self._lock:
                    self._listening = frozenset()
                    self._listener_pid = None
                if conn is not None:
                    self._source.release(conn)

    def _retire(self) -> bool:
        """Stop the listener thread when nothing listens; False if a listen() just came."""
        with self._lock:
            if self._subscribers and not self._closed:
                return False
            self._listener = None
            self._served = False  # the next listener's first connection is no reconnect
            return True

    def _sleep(self, seconds: float) -> None:
        ends = time.monotonic() + seconds
        while not self._closed:
            left = ends - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(OSError, ValueError):
                select.select([self._interrupt_r], [], [], left)
            self._drain_interrupts()

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        """LISTEN on what is wanted and dispatch notifications until told to stop or the
        connection dies (raises)."""
        listened: set[str] = set()
        first = True
        while True:
            wanted = self._wanted()
            if not wanted:
                return
            for channel in sorted(wanted - listened):
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                listened.add(channel)
            for channel in sorted(listened - wanted):
                conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
                listened.discard(channel)
            with self._lock:
                self._listening = frozenset(listened)
                self._listen_cond.notify_all()
            if first:
                first = False
                with self._lock:
                    back, self._served = self._served, True
                    if back:
                        self.reconnects += 1
                if back:
                    # Back after an outage: hints sent meanwhile are lost, so look for work now.
                    log.warning("the notification listener reconnected")
                    self._wake(listened)
            interrupt = self._interrupt_r.fileno()
            readable, _, _ = select.select([conn.fileno(), interrupt], [], [], self._ping_interval)
            if interrupt in readable:
                self._drain_interrupts()
            if conn.fileno() in readable:
                conn.pgconn.consume_input()
                got = self._drain(conn)
                if not got or conn.pgconn.status != ConnStatus.OK:
                    conn.execute("SELECT 1")  # readable, yet nothing for us: is it alive?
            elif not readable:
                conn.execute("SELECT 1")  # quiet for ping_interval: notice a half-open socket

    def _drain(self, conn: psycopg.Connection[Any]) -> int:
        count = 0
        while (notice := conn.pgconn.notifies()) is not None:
            count += 1
            self._dispatch(notice.relname.decode())
        return count

    def _on_notify(self, notice: psycopg.Notify) -> None:
        # Notifications that arrive while the listener runs a statement (LISTEN, the ping).
        self._dispatch(notice.channel)

    def _dispatch(self, channel: str) -> None:
        with self._lock:
            self.received += 1
            wakes = list(self._subscribers.get(channel, ()))
        for wake in wakes:
            _call(wake)

    def _wake(self, channels: set[str]) -> None:
        with self._lock:
            wakes = [w for c in channels for w in self._subscribers.get(c, ())]
        for wake in wakes:
            _call(wake)

    def _stop_listening(self, conn: psycopg.Connection[Any], autocommit: bool) -> None:
        """Leave a live connection as it was lent: no LISTEN, the original autocommit."""
        if conn.closed or conn.pgconn.status != ConnStatus.OK:
            return
        try:
            conn.execute("UNLISTEN *")
            conn.autocommit = autocommit
        except Exception:
            log.debug("could not reset the listener's connection; closing it", exc_info=True)
            with contextlib.suppress(Exception):
                conn.close()

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Stop both threads, return their connections, close a pool this notifier opened."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._send_cond.notify_all()
            self._listen_cond.notify_all()
            threads = [t for t in (self._sender, self._listener) if t is not None]
        self._interrupt()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(10)
        self._source.close()
        for end in (self._interrupt_r, self._interrupt_w):
            with contextlib.suppress(OSError):
                end.close()

    def __repr__(self) -> str:
        return f"<PgNotifier listening={sorted(self.listening)} sent={self.sent}>"


def _call(wake: Wake) -> None:
    try:
        wake()
    except Exception:
        log.exception("a wake-up callback raised")


def _check_channel(channel: str) -> None:
    if not isinstance(channel, str) or not channel or len(channel.encode()) > MAX_CHANNEL_BYTES:
        raise ValueError(
            f"a Postgres channel is a non-empty name of at most {MAX_CHANNEL_BYTES} bytes, "
            f"got {channel!r}"
        )
