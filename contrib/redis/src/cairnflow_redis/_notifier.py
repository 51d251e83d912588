"""Wake-ups over Redis pub/sub: :class:`RedisNotifier`.

MySQL, MariaDB and several processes on one SQLite file have no way to tell
another process "work is due": their clients find it at the next poll. Redis
pub/sub is that missing wire. A notification is a hint, never a delivery:
clients keep polling, so a lost, late or duplicated hint changes when work
starts, never whether it runs. That keeps the notifier simple:

* **Sending never blocks.** ``notify()`` adds the channel to a set and wakes a
  sender thread, which PUBLISHes every pending channel on a connection of its
  own. Hints arriving while it sends are coalesced into the next round; a
  round that fails (Redis is down) is dropped and said once per streak.
* **Listening holds one connection** in a thread that SUBSCRIBEs to what is
  wanted and calls the ``wake`` callbacks of each message. When that
  connection dies (a restart, a ``CLIENT KILL``, a failover) the thread
  reconnects with backoff (``reconnect_min`` doubling up to
  ``reconnect_max``), subscribes again and calls every ``wake`` once, since
  what was published meanwhile is lost. An idle connection is PINGed every
  ``ping_interval`` seconds, so a half-open one is noticed too.

The Redis channel is the store's channel (its engine, database or file,
schema and table prefix) behind an optional ``prefix``: two namespaces never
wake each other, and a ``prefix`` per cluster keeps clusters apart on a shared
Redis even when their databases have the same name on different servers.
Pub/sub is not scoped by Redis's database number, so the ``/0`` of the URL
does not separate them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cairnflow.notify import Subscribers

__all__ = ["RedisNotifier", "channel_name"]

log = logging.getLogger("cairnflow.redis")

Wake = Callable[[], None]

_TICK = 0.05
"""How long the listener waits for a message before it looks at new ``listen()`` calls.

redis-py's PubSub is not safe to subscribe on from another thread while the listener
reads, so the listener subscribes itself: a new ``listen()`` takes effect within a tick."""


def channel_name(prefix: str, channel: str) -> str:
    """The Redis channel of a store's channel: ``prefix`` + ``channel`` (bytes are fine)."""
    return f"{prefix}{channel}"


class RedisNotifier:
    """A :class:`cairnflow.notify.Notifier` over Redis pub/sub (see the module docstring).

    ``url`` is a redis-py URL (``redis://[:password@]host:port/db``,
    ``rediss://`` for TLS, ``unix://``). ``prefix`` goes in front of every
    channel (e.g. ``"billing-prod:"``): give each cluster its own when several
    share one Redis. ``client_name`` is what ``CLIENT LIST`` shows for the
    notifier's two connections. Give the notifier to a store
    (``open_store(url, notifier=RedisNotifier(...))``): the store then declares
    ``Cap.NOTIFY``, and closes the notifier when it is closed.

    ``sent``, ``received`` and ``reconnects`` count channels published,
    messages received and listener reconnections, for tests and metrics.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "",
        client_name: str = "cairnflow-notify",
        reconnect_min: float = 0.05,
        reconnect_max: float = 5.0,
        ping_interval: float = 15.0,
        listen_timeout: float = 5.0,
        socket_timeout: float = 5.0,
    ) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise ValueError(f"url must be a Redis URL like redis://host:6379/0, got {url!r}")
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, got {prefix!r}")
        if (
            not isinstance(client_name, str)
            or not client_name
            or any(c.isspace() for c in client_name)
        ):
            raise ValueError(
                f"client_name must be a non-empty name without spaces, got {client_name!r}"
            )
        if not 0 < reconnect_min <= reconnect_max:
            raise ValueError("reconnect_min must be > 0 and at most reconnect_max")
        if ping_interval <= 0 or socket_timeout <= 0 or listen_timeout < 0:
            raise ValueError("ping_interval and socket_timeout must be > 0, listen_timeout >= 0")
        self.url = url
        self.prefix = prefix
        self.client_name = client_name
        self._reconnect = (float(reconnect_min), float(reconnect_max))
        self._ping_interval = float(ping_interval)
        self._listen_timeout = float(listen_timeout)
        self._socket_timeout = float(socket_timeout)
        # Connecting is lazy: nothing touches Redis before the first notify() or listen().
        self._publisher = self._client()
        self._lock = threading.Lock()
        self._closed = False
        self.sent = 0
        self.received = 0
        self.reconnects = 0
        # -- sending
        self._send_cond = threading.Condition(self._lock)
        self._pending: set[str] = set()
        self._sender: threading.Thread | None = None
        self._send_failures = 0
        # -- listening
        self._subscribers = Subscribers()
        self._listening: frozenset[str] = frozenset()
        self._listen_cond = threading.Condition(self._lock)
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._served = False

    def _client(self) -> redis.Redis:
        # No retries inside redis-py: a failed command is the notifier's to handle (a
        # dropped hint for the sender; a reconnection with backoff for the listener).
        return redis.Redis.from_url(
            self.url,
            client_name=self.client_name,
            socket_connect_timeout=self._socket_timeout,
            socket_timeout=self._socket_timeout,
            socket_keepalive=True,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )

    def _where(self) -> str:
        """Where Redis is, for log lines (never the password)."""
        kwargs = self._publisher.connection_pool.connection_kwargs
        return str(kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}")

    def channel_name(self, channel: str) -> str:
        """The Redis channel that carries the hints of the store channel ``channel``."""
        return channel_name(self.prefix, channel)

    # -- sending ---------------------------------------------------------------------------------
    def notify(self, channel: str) -> None:
        """Ask for a PUBLISH on ``channel``; returns at once (the sender thread sends it)."""
        _check_channel(channel)
        with self._lock:
            if self._closed:
                return  # a hint only: nobody is left to send it
            self._pending.add(channel)
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_loop, name="cairnflow-redis-notify", daemon=True
                )
                self._sender.start()
            self._send_cond.notify()

    def _send_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._send_cond.wait()
                if self._closed:
                    return
                channels = sorted(self._pending)
                self._pending.clear()
            self._send(channels)

    def _send(self, channels: list[str]) -> None:
        try:
            with self._publisher.pipeline(transaction=False) as pipe:
                for channel in channels:
                    pipe.publish(self.channel_name(channel), b"")
                pipe.execute()
        except Exception as error:  # noqa: BLE001 - a hint only: reported, then dropped
            with self._lock:
                self._send_failures += 1
                failures = self._send_failures
            # Polling finds the work. Say so once per streak, not once per enqueue.
            if failures == 1:
                log.warning(
                    "could not publish a wake-up on %s (%s); clients fall back to polling",
                    self._where(),
                    error,
                )
            else:
                log.debug("could not publish a wake-up: %s", error)
        else:
            with self._lock:
                self.sent += len(channels)
                if self._send_failures:
                    log.info("wake-ups are published again on %s", self._where())
                self._send_failures = 0

    # -- listening -------------------------------------------------------------------------------
    def listen(self, channel: str, wake: Wake) -> Callable[[], None]:
        """Call ``wake`` on every hint on ``channel`` until the returned function is called.

        Returns once the SUBSCRIBE is in effect (at most ``listen_timeout``
        later, when Redis cannot be reached), and calls ``wake`` once then, to
        cover hints sent before.
        """
        _check_channel(channel)
        with self._lock:
            if self._closed:
                raise RuntimeError("this RedisNotifier is closed")
            remove = self._subscribers.add(channel, wake)
            if self._listener is None:
                self._listener = threading.Thread(
                    target=self._listen_loop, name="cairnflow-redis-listen", daemon=True
                )
                self._listener.start()
            self._listen_cond.wait_for(
                lambda: channel in self._listening or self._closed, self._listen_timeout
            )
        wake()
        return remove

    @property
    def listening(self) -> frozenset[str]:
        """The store channels the listener's connection is subscribed to right now."""
        with self._lock:
            return self._listening

    def _listen_loop(self) -> None:
        delay = self._reconnect[0]
        while True:
            if not self._subscribers.channels() or self._stop.is_set():
                if self._retire():
                    return
                continue
            client = self._client()
            pubsub = client.pubsub(ignore_subscribe_messages=False)  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis 8.2
            try:
                self._serve(pubsub)
            except Exception as error:  # noqa: BLE001 - any failure: reconnect, keep polling
                if self._listening:
                    delay = self._reconnect[0]  # it was serving: try again soon
                if not self._stop.is_set():
                    log.warning(
                        "the wake-up listener lost Redis at %s (%s); reconnecting in %.2fs, "
                        "polling meanwhile",
                        self._where(),
                        error,
                        delay,
                    )
                    self._set_listening(frozenset())
                    # Sleep the backoff, but wake for close(); jitter spreads a fleet's retries.
                    self._stop.wait(delay * random.uniform(0.8, 1.2))
                    delay = min(delay * 2, self._reconnect[1])
            finally:
                self._set_listening(frozenset())
                with contextlib.suppress(Exception):
                    pubsub.close()
                with contextlib.suppress(Exception):
                    client.close()

    def _retire(self) -> bool:
        """End the listener thread when nothing listens; False if a listen() just came."""
        with self._lock:
            if self._subscribers.channels() and not self._closed:
                return False
            self._listener = None
            self._served = False  # the next listener's first connection is no reconnection
            return True

    def _set_listening(self, channels: frozenset[str]) -> None:
        with self._lock:
            self._listening = channels
            self._listen_cond.notify_all()

    def _serve(self, pubsub: Any) -> None:
        """Subscribe to what is wanted and dispatch messages until nothing is wanted or the
        connection dies (raises)."""
        names: dict[str, str] = {}  # Redis channel -> store channel, subscribed or asked
        confirmed: set[str] = set()
        first = True
        quiet_since = time.monotonic()
        while not self._stop.is_set():
            wanted = self._subscribers.channels()
            if not wanted:
                return
            asked = set(names.values())
            new = sorted(wanted - asked)
            gone = sorted(asked - wanted)
            if new:
                for channel in new:
                    names[self.channel_name(channel)] = channel
                pubsub.subscribe(*[self.channel_name(c) for c in new])
            if gone:
                pubsub.unsubscribe(*[self.channel_name(c) for c in gone])
                for channel in gone:
                    del names[self.channel_name(channel)]
                    confirmed.discard(channel)
                self._set_listening(frozenset(confirmed))
            message = pubsub.get_message(timeout=_TICK)
            if message is None:
                if time.monotonic() - quiet_since >= self._ping_interval:
                    pubsub.ping()  # quiet for ping_interval: notice a half-open socket
                    quiet_since = time.monotonic()
                continue
            quiet_since = time.monotonic()
            kind = message.get("type")
            name = _text(message.get("channel"))
            found = names.get(name)
            if kind == "message" and found is not None:
                with self._lock:
                    self.received += 1
                self._subscribers.wake(found)
            elif kind == "subscribe" and found is not None:
                confirmed.add(found)
                self._set_listening(frozenset(confirmed))
                if first and confirmed >= set(names.values()):
                    first = False
                    self._connected()

    def _connected(self) -> None:
        """The first subscriptions of a connection are in effect: after an outage, look for
        work now (hints published meanwhile are lost)."""
        with self._lock:
            back, self._served = self._served, True
            if back:
                self.reconnects += 1
        if back:
            log.warning("the wake-up listener reconnected to Redis at %s", self._where())
            self._subscribers.wake_all()

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop both threads and close their connections (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop.set()
            self._send_cond.notify_all()
            self._listen_cond.notify_all()
            threads = [t for t in (self._sender, self._listener) if t is not None]
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(10)
        with contextlib.suppress(Exception):
            self._publisher.close()

    def __repr__(self) -> str:
        return (
            f"<RedisNotifier {self._where()} prefix={self.prefix!r} "
            f"listening={sorted(self.listening)} sent={self.sent}>"
        )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _check_channel(channel: str) -> None:
    if not isinstance(channel, str) or not channel:
        raise ValueError(f"a channel is a non-empty string, got {channel!r}")
