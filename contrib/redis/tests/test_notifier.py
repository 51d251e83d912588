"""RedisNotifier against a real Redis: wake-ups, isolation, reconnection, never blocking, close.

The kit (test_conformance.py) proves ``Cap.NOTIFY`` on stores given the notifier; these
tests pin what the kit cannot see: the notifier's own connections (killed from the test
side with ``CLIENT KILL``, found by their client name), prefixes on a shared Redis, and
what ``open_store(..., notifier=)`` declares.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import cairnflow as cf
from cairnflow.testing import wait_until
from cairnflow_redis import RedisNotifier

TIMEOUT = 30.0
"""Generous: a wake-up takes milliseconds, but the machine may be busy."""


class Counter:
    """A ``wake`` callback that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()
        self.event = threading.Event()

    def __call__(self) -> None:
        with self._lock:
            self.calls += 1
        self.event.set()

    def count(self) -> int:
        with self._lock:
            return self.calls


@pytest.fixture
def make(redis_url: str, session_prefix: str) -> Iterator[type[RedisNotifier]]:
    """RedisNotifier(...) on the test Redis, under the session's prefix, closed afterwards."""
    made: list[RedisNotifier] = []

    def build(**options: object) -> RedisNotifier:
        options.setdefault("prefix", session_prefix)
        options.setdefault("client_name", f"cftest-{uuid.uuid4().hex[:10]}")
        notifier = RedisNotifier(redis_url, **options)  # type: ignore[arg-type]
        made.append(notifier)
        return notifier

    yield build  # type: ignore[misc]
    for notifier in made:
        notifier.close()


def connections(admin: redis.Redis, name: str) -> list[dict[str, object]]:
    """The server's connections named ``name`` (CLIENT LIST)."""
    return [c for c in admin.client_list() if c.get("name") == name]


def test_a_listener_is_woken_once_at_subscribe_and_on_each_hint(make: type) -> None:
    sender, listener = make(), make()
    woken = Counter()
    stop = listener.listen("orders", woken)
    assert woken.count() == 1, "listen() wakes once at once, to cover earlier hints"
    assert "orders" in listener.listening
    for n in range(2, 5):
        sender.notify("orders")
        wait_until(lambda n=n: woken.count() >= n, TIMEOUT, f"hint {n}")
    stop()
    wait_until(lambda: "orders" not in listener.listening, TIMEOUT, "the unsubscribe")
    before = woken.count()
    sender.notify("orders")
    wait_until(lambda: sender.sent >= 4, TIMEOUT, "the last publish")
    assert woken.count() == before, "a stopped listener was woken"


def test_two_clusters_on_one_redis_never_wake_each_other(make: type) -> None:
    # Same store channel (say, databases of the same name on two servers), two prefixes.
    channel = "cairnflow_mysql_app.cf_"
    red, blue = make(prefix="red:"), make(prefix="blue:")
    red_woken, blue_woken = Counter(), Counter()
    red.listen(channel, red_woken)
    blue.listen(channel, blue_woken)
    red.notify(channel)
    wait_until(lambda: red_woken.count() >= 2, TIMEOUT, "red's own hint")
    wait_until(lambda: red.sent >= 1, TIMEOUT, "red's publish")
    # Both listen on one connection each, through one server: red's message reached red's
    # listener, so blue's (subscribed before) has had every chance to see it too.
    blue.notify("some-other-channel")
    wait_until(lambda: blue.sent >= 1, TIMEOUT, "blue's unrelated publish")
    assert blue_woken.count() == 1, "a hint of another cluster woke this one"
    assert red.channel_name(channel) != blue.channel_name(channel)


def test_the_listener_reconnects_after_its_connection_is_killed(
    make: type, admin: redis.Redis
) -> None:
    sender, listener = make(), make(reconnect_min=0.05)
    woken = Counter()
    listener.listen("jobs", woken)
    subscribed = [c for c in connections(admin, listener.client_name) if c.get("sub") != "0"]
    assert len(subscribed) == 1, subscribed
    # Kill the listener's connection only (by id), never the server or anyone else's.
    admin.execute_command("CLIENT", "KILL", "ID", subscribed[0]["id"])
    wait_until(lambda: listener.reconnects >= 1, TIMEOUT, "the reconnection")
    # Back after an outage: it looked for work once (hints meanwhile were lost)...
    wait_until(lambda: woken.count() >= 2, TIMEOUT, "the wake-up after reconnecting")
    after = woken.count()
    # ...and hints reach it again.
    sender.notify("jobs")
    wait_until(lambda: woken.count() > after, TIMEOUT, "a hint after the reconnection")
    assert len(connections(admin, listener.client_name)) == 1


def test_the_sender_recovers_after_its_connection_is_killed(make: type, admin: redis.Redis) -> None:
    sender, listener = make(), make()
    woken = Counter()
    listener.listen("jobs", woken)
    sender.notify("jobs")
    wait_until(lambda: sender.sent >= 1, TIMEOUT, "the first publish")
    for conn in connections(admin, sender.client_name):
        admin.execute_command("CLIENT", "KILL", "ID", conn["id"])
    # The first hint after the kill may be dropped (a hint only); later ones get through.
    wait_until(
        lambda: sender.notify("jobs") is None and sender.sent >= 2, TIMEOUT, "a publish again"
    )
    wait_until(lambda: woken.count() >= 3, TIMEOUT, "the listener woken again")


def test_notify_never_blocks_and_listen_gives_up_when_redis_is_unreachable() -> None:
    # Port 9 (discard) on loopback: nothing listens, connections are refused.
    notifier = RedisNotifier(
        "redis://127.0.0.1:9/0", listen_timeout=0.2, socket_timeout=0.5, reconnect_max=0.2
    )
    try:
        returned = threading.Event()

        def notify_many() -> None:
            for _ in range(1000):
                notifier.notify("nowhere")
            returned.set()

        threading.Thread(target=notify_many, daemon=True).start()
        assert returned.wait(TIMEOUT), "notify() blocked with Redis unreachable"
        woken = Counter()
        notifier.listen("nowhere", woken)  # returns after listen_timeout, polling covers it
        assert woken.count() == 1
        assert notifier.listening == frozenset()
        assert notifier.sent == 0
    finally:
        notifier.close()


def test_close_releases_threads_and_connections(make: type, admin: redis.Redis) -> None:
    before = set(threading.enumerate())
    notifier = make()
    notifier.listen("jobs", Counter())
    notifier.notify("jobs")
    wait_until(lambda: notifier.sent >= 1, TIMEOUT, "a publish")
    assert len(connections(admin, notifier.client_name)) == 2  # the publisher, the listener
    notifier.close()
    notifier.close()  # idempotent
    started = set(threading.enumerate()) - before
    assert not [t for t in started if t.name.startswith("cairnflow-redis")], started
    wait_until(
        lambda: not connections(admin, notifier.client_name), TIMEOUT, "the connections closed"
    )
    notifier.notify("jobs")  # dropped, never raises
    with pytest.raises(RuntimeError, match="closed"):
        notifier.listen("jobs", Counter())


def test_bad_options_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="url"):
        RedisNotifier("127.0.0.1:6379")
    with pytest.raises(ValueError, match="reconnect_min"):
        RedisNotifier(reconnect_min=0)
    with pytest.raises(ValueError, match="client_name"):
        RedisNotifier(client_name="two words")
    with pytest.raises(ValueError, match="channel"):
        RedisNotifier().notify("")


# -- stores opened with a notifier ----------------------------------------------------------------
def test_a_sqlite_file_opened_with_it_declares_notify_and_closes_it(
    make: type, tmp_path: Path
) -> None:
    notifier = make()
    store = cf.open_store(f"sqlite:///{tmp_path / 'n.db'}", notifier=notifier)
    try:
        assert cf.Cap.NOTIFY in store.capabilities
        assert store.default_notifier() is notifier
    finally:
        store.close()
    with pytest.raises(RuntimeError, match="closed"):
        notifier.listen("x", Counter())
    plain = cf.open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        assert cf.Cap.NOTIFY not in plain.capabilities, "an in-process bus reaches no process"
    finally:
        plain.close()


def test_a_mariadb_store_opened_with_it_declares_notify(make: type) -> None:
    url = os.environ.get("CAIRNFLOW_TEST_MARIADB_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("CAIRNFLOW_TEST_MARIADB_URL is not set and $CI is")
        pytest.skip("set CAIRNFLOW_TEST_MARIADB_URL")
    notifier = make()
    store = cf.open_store(url, notifier=notifier, table_prefix="cfnotify_unused_")
    try:
        assert cf.Cap.NOTIFY in store.capabilities
        assert store.default_notifier() is notifier
    finally:
        store.close()
    plain = cf.open_store(url, table_prefix="cfnotify_unused_")
    try:
        assert cf.Cap.NOTIFY not in plain.capabilities
    finally:
        plain.close()


def test_a_private_memory_database_refuses_a_notifier(make: type) -> None:
    with pytest.raises(ValueError, match="memory"):
        cf.open_store("sqlite:///:memory:", notifier=make())


def test_a_notifier_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="Notifier"):
        cf.open_store(f"sqlite:///{tmp_path / 'n.db'}", notifier="redis://127.0.0.1:6379")


def test_wake_after_an_enqueue_tx_commits_starts_it_on_an_idle_worker_elsewhere(
    make: type,
) -> None:
    # A broker cannot send the hint at the application's commit (Postgres's NOTIFY can):
    # Client.wake(others=True) after the commit tells the other clients.
    from cairnflow_mysql import MySQLStore
    from cairnflow_mysql.testing import app_connection, drop_namespace

    url = os.environ.get("CAIRNFLOW_TEST_MARIADB_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("CAIRNFLOW_TEST_MARIADB_URL is not set and $CI is")
        pytest.skip("set CAIRNFLOW_TEST_MARIADB_URL")
    prefix = f"cfn{uuid.uuid4().hex[:8]}_"
    workflow = cf.Workflow("tx-wake", steps=[cf.Step("echo", lambda ctx, data: data)])
    worker_store = MySQLStore(url, table_prefix=prefix, notifier=make())
    front_store = MySQLStore(url, table_prefix=prefix, notifier=make())
    conn = app_connection(url)
    try:
        worker_store.migrate()
        # Two minutes between polls: only a wake-up can start the run within the wait below.
        worker = cf.Client(worker_store, poll_interval=120.0, node_id="idle-worker")
        worker.register(workflow)
        front = cf.Client(front_store, enqueue_only=True)  # a web front: never started
        front.register(workflow)
        with worker:
            time.sleep(1.0)  # the worker's first poll (at start) is behind it
            ref = front.enqueue_tx(conn, "tx-wake", "committed")
            conn.commit()
            front.wake(others=True)
            info = front.wait(ref, timeout=60.0)
        assert (info.status, info.result) == (cf.Status.SUCCEEDED, "committed")
    finally:
        conn.close()
        front_store.close()
        worker_store.close()
        drop_namespace(url, prefix)
