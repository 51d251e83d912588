"""Wake-ups over core NATS subjects: :class:`NatsNotifier`.

MySQL, MariaDB and several processes on one SQLite file have no way to tell
another process "work is due": their clients find it at the next poll. A
NATS subject is that missing wire. A notification is a hint, never a
delivery: clients keep polling, so a lost, late or duplicated hint changes
when work starts, never whether it runs. That keeps the notifier simple:

* **One thread, one event loop, one connection.** nats-py is asyncio; the
  engine calls a notifier from plain threads. The notifier runs its own loop
  in a daemon thread, holding one connection for publishing and subscribing.
* **Sending never blocks.** ``notify()`` adds the channel to a set and pokes
  the loop (``call_soon_threadsafe``: a write to its self-pipe); the loop
  publishes every pending channel. Hints that arrive while the connection is
  down are dropped, and that is said once per outage.
* **Reconnection is the notifier's**, not nats-py's: when the connection is
  lost (a restart, a closed socket, missed PINGs) the loop reconnects with
  backoff (``reconnect_min`` doubling up to ``reconnect_max``), subscribes
  again and calls every ``wake`` once, since what was published meanwhile is
  lost. nats-py's own reconnection would buffer publishes for later, which a
  hint does not want, and would not say when to look for missed work.

The subject is derived from the store's channel (its engine, database or
file, schema and table prefix): ``[prefix.]cairnflow.<channel as a token>``.
Two namespaces never wake each other, and a ``prefix`` per cluster keeps
clusters apart on a shared NATS even when their databases have the same name
on different servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

from cairnflow.notify import Subscribers

__all__ = ["NatsNotifier", "subject_name"]

log = logging.getLogger("cairnflow.nats")

Wake = Callable[[], None]

_TOKEN_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_TOKEN_CHARS = 64
"""Store channels longer than this (a SQLite file's path) are cut, then told apart by a hash."""


def subject_name(prefix: str, channel: str) -> str:
    """The NATS subject of a store channel: ``[prefix.]cairnflow.<token>``.

    A subject token may not hold ``.``, ``*``, ``>`` or white space, and store
    channels do (a schema-qualified prefix, a file path): the token is the
    channel with every other character turned into ``_``, cut to 64
    characters, followed by 12 hex digits of its SHA-256, so two channels
    never share a subject.
    """
    digest = hashlib.sha256(channel.encode()).hexdigest()[:12]
    token = f"{_TOKEN_UNSAFE.sub('_', channel)[:_TOKEN_CHARS]}_{digest}"
    return f"{prefix}.cairnflow.{token}" if prefix else f"cairnflow.{token}"


class NatsNotifier:
    """A :class:`cairnflow.notify.Notifier` over core NATS (see the module docstring).

    ``url`` is a NATS URL (``nats://[user:password@]host:4222``, ``tls://``),
    or several separated by commas (a cluster). ``prefix`` goes in front of
    every subject as dot-separated tokens (e.g. ``"billing.prod"``): give each
    cluster its own when several share one NATS. ``name`` is the connection's
    name in the server's monitoring. Give the notifier to a store
    (``open_store(url, notifier=NatsNotifier(...))``): the store then
    declares ``Cap.NOTIFY``, and closes the notifier when it is closed.

    ``sent``, ``received`` and ``reconnects`` count hints published, received
    and reconnections, for tests and metrics.
    """

    def __init__(
        self,
        url: str = "nats://127.0.0.1:4222",
        *,
        prefix: str = "",
        name: str = "cairnflow-notify",
        reconnect_min: float = 0.05,
        reconnect_max: float = 5.0,
        ping_interval: float = 15.0,
        listen_timeout: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"url must be a NATS URL like nats://host:4222, got {url!r}")
        if not isinstance(prefix, str) or (prefix and not _PREFIX.fullmatch(prefix)):
            raise ValueError(
                f"prefix must be empty or dot-separated tokens of letters, digits, '_' and '-' "
                f"(no wildcards, no spaces), got {prefix!r}"
            )
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if not 0 < reconnect_min <= reconnect_max:
            raise ValueError("reconnect_min must be > 0 and at most reconnect_max")
        if ping_interval <= 0 or connect_timeout <= 0 or listen_timeout < 0:
            raise ValueError("ping_interval and connect_timeout must be > 0, listen_timeout >= 0")
        self.servers = [part.strip() for part in url.split(",") if part.strip()]
        self.url = url
        self.prefix = prefix
        self.name = name
        self._reconnect = (float(reconnect_min), float(reconnect_max))
        self._ping_interval = float(ping_interval)
        self._listen_timeout = float(listen_timeout)
        self._connect_timeout = float(connect_timeout)
        self._lock = threading.Lock()
        self._closed = False
        self.sent = 0
        self.received = 0
        self.reconnects = 0
        self._pending: set[str] = set()
        self._subscribers = Subscribers()
        self._listening: frozenset[str] = frozenset()
        self._listen_cond = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()  # bound to the notifier's loop at its first use there
        self._outage_said = False

    def subject_name(self, channel: str) -> str:
        """The NATS subject that carries the hints of the store channel ``channel``."""
        return subject_name(self.prefix, channel)

    # -- the loop's thread --------------------------------------------------------------------
    def _ensure_loop(self) -> None:
        """Start the loop's thread at the first notify() or listen() (called holding the lock)."""
        if self._thread is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._run, args=(self._loop,), name="cairnflow-nats", daemon=True
            )
            self._thread.start()

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        main = loop.create_task(self._main())
        self._main_task = main
        try:
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main)
        finally:
            loop.close()

    def _cancel(self) -> None:
        """Cancel the loop's work wherever it is (a connection attempt included)."""
        main = self._main_task
        if main is not None:
            main.cancel()

    def _poke(self) -> None:
        """Wake the loop (from any thread); never blocks, never raises."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
                loop.call_soon_threadsafe(self._kick.set)

    # -- sending ---------------------------------------------------------------------------------
    def notify(self, channel: str) -> None:
        """Ask for a publish on ``channel``'s subject; returns at once (the loop sends it)."""
        _check_channel(channel)
        with self._lock:
            if self._closed:
                return  # a hint only: nobody is left to send it
            first = not self._pending
            self._pending.add(channel)
            self._ensure_loop()
        if first:
            self._poke()

    def _take_pending(self) -> list[str]:
        with self._lock:
            channels = sorted(self._pending)
            self._pending.clear()
        return channels

    # -- listening -------------------------------------------------------------------------------
    def listen(self, channel: str, wake: Wake) -> Callable[[], None]:
        """Call ``wake`` on every hint on ``channel`` until the returned function is called.

        Returns once the subscription is in effect on the server (at most
        ``listen_timeout`` later, when NATS cannot be reached), and calls
        ``wake`` once then, to cover hints sent before.
        """
        _check_channel(channel)
        with self._lock:
            if self._closed:
                raise RuntimeError("this NatsNotifier is closed")
            remove = self._subscribers.add(channel, wake)
            self._ensure_loop()
        self._poke()
        with self._lock:
            self._listen_cond.wait_for(
                lambda: channel in self._listening or self._closed, self._listen_timeout
            )
        wake()

        def stop() -> None:
            remove()
            self._poke()

        return stop

    @property
    def listening(self) -> frozenset[str]:
        """The store channels subscribed to on the server right now."""
        with self._lock:
            return self._listening

    def _set_listening(self, channels: frozenset[str]) -> None:
        with self._lock:
            self._listening = channels
            self._listen_cond.notify_all()

    def _is_closed(self) -> bool:
        with self._lock:
            return self._closed

    # -- the loop --------------------------------------------------------------------------------
    async def _main(self) -> None:
        delay = self._reconnect[0]
        served = False
        while not self._is_closed():
            try:
                nc = await self._connect()
            except Exception as error:  # noqa: BLE001 - unreachable: back off, keep polling
                self._outage(f"cannot connect to NATS at {self._shown()} ({error})", delay)
                await self._sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self._reconnect[1])
                continue
            delay = self._reconnect[0]
            try:
                await self._serve(nc, back=served)
            except Exception as error:  # noqa: BLE001 - lost: reconnect, keep polling
                if not self._is_closed():
                    self._outage(f"the wake-up connection to NATS was lost ({error})", delay)
                    await self._sleep(delay * random.uniform(0.8, 1.2))
            finally:
                served = True
                self._set_listening(frozenset())
                with contextlib.suppress(Exception):
                    await nc.close()

    async def _connect(self) -> NatsClient:
        async def quiet(error: Exception) -> None:
            log.debug("NATS: %s", error)

        async def lost() -> None:
            self._kick.set()  # the serving loop sees the connection closed and reconnects

        connection: NatsClient = await nats.connect(
            self.servers,
            name=self.name,
            allow_reconnect=False,  # ours, with backoff and a wake-up after it (see above)
            # One quick try per server (nats-py counts from 0 and waits between tries);
            # the backoff between rounds is ours.
            max_reconnect_attempts=1,
            reconnect_time_wait=0,
            connect_timeout=max(1, round(self._connect_timeout)),
            ping_interval=max(1, round(self._ping_interval)),
            max_outstanding_pings=2,
            error_cb=quiet,
            disconnected_cb=lost,
            closed_cb=lost,
        )
        return connection

    async def _serve(self, nc: NatsClient, *, back: bool) -> None:
        """Keep the subscriptions as wanted and publish what is pending until closed (returns)
        or the connection is lost (raises)."""
        subscriptions: dict[str, Any] = {}
        first = True
        while True:
            self._kick.clear()
            if self._is_closed():
                return
            if not nc.is_connected:
                raise ConnectionError("the connection is closed")
            wanted = self._subscribers.channels()
            changed = False
            for channel in sorted(wanted - set(subscriptions)):
                subscriptions[channel] = await nc.subscribe(
                    self.subject_name(channel), cb=self._callback(channel)
                )
                changed = True
            for channel in sorted(set(subscriptions) - wanted):
                await subscriptions.pop(channel).unsubscribe()
                changed = True
            if changed or first:
                # A round trip: the server has the subscriptions once it answers.
                await nc.flush(timeout=max(1, round(self._connect_timeout)))
                self._set_listening(frozenset(subscriptions))
            if first:
                first = False
                self._outage_said = False
                if back:
                    with self._lock:
                        self.reconnects += 1
                    log.warning("the wake-up connection to NATS at %s is back", self._shown())
                    # Hints published meanwhile are lost: look for work now.
                    self._subscribers.wake_all()
            channels = self._take_pending()
            for channel in channels:
                await nc.publish(self.subject_name(channel), b"")
            if channels:
                with self._lock:
                    self.sent += len(channels)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self._ping_interval)

    def _callback(self, channel: str) -> Callable[[Msg], Any]:
        async def on_message(message: Msg) -> None:
            with self._lock:
                self.received += 1
            self._subscribers.wake(channel)

        return on_message

    def _outage(self, what: str, delay: float) -> None:
        dropped = self._take_pending()
        if not self._outage_said:
            self._outage_said = True
            log.warning(
                "%s; retrying in %.2fs, clients fall back to polling%s",
                what,
                delay,
                f" ({len(dropped)} wake-up(s) dropped)" if dropped else "",
            )
        else:
            log.debug("%s; retrying in %.2fs", what, delay)

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake for close()."""
        ends = asyncio.get_running_loop().time() + seconds
        while not self._is_closed():
            left = ends - asyncio.get_running_loop().time()
            if left <= 0:
                return
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), left)
            self._take_pending()  # nothing can be sent while NATS is away: drop the hints

    def _shown(self) -> str:
        """Where NATS is, for log lines (never a password)."""
        return ",".join(f"{urlsplit(s).hostname}:{urlsplit(s).port or 4222}" for s in self.servers)

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the loop's thread and close its connection (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._listen_cond.notify_all()
            thread = self._thread
        self._poke()
        loop = self._loop
        if loop is not None and thread is not None and thread is not threading.current_thread():
            thread.join(1.0)  # the loop sees the poke, closes its connection and ends
            if thread.is_alive():
                # Busy connecting (nats-py does not look at our flag meanwhile): cancel that.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._cancel)
                thread.join(10)

    def __repr__(self) -> str:
        return (
            f"<NatsNotifier {self._shown()} prefix={self.prefix!r} "
            f"listening={sorted(self.listening)} sent={self.sent}>"
        )


def _check_channel(channel: str) -> None:
    if not isinstance(channel, str) or not channel:
        raise ValueError(f"a channel is a non-empty string, got {channel!r}")
