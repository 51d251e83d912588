"""NatsNotifier against a real NATS: wake-ups, isolation, reconnection, never blocking, close.

The kit (test_conformance.py) proves ``Cap.NOTIFY`` on stores given the notifier; these
tests pin what the kit cannot see: the notifier's own connection (cut from the test side
by a TCP proxy between it and the real server: NATS has no ``CLIENT KILL``), subject
prefixes on a shared NATS, and what ``open_store(..., notifier=)`` declares.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import cairnflow as cf
from cairnflow.testing import CuttableProxy, wait_until
from cairnflow_nats import NatsNotifier, subject_name

TIMEOUT = 30.0
"""Generous: a wake-up takes milliseconds, but the machine may be busy."""


class Counter:
    """A ``wake`` callback that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.calls += 1

    def count(self) -> int:
        with self._lock:
            return self.calls


Make = Callable[..., NatsNotifier]


@pytest.fixture
def make(nats_url: str, session_prefix: str) -> Iterator[Make]:
    """NatsNotifier(...) on the test NATS (or ``url=``), the session's prefix, closed after."""
    made: list[NatsNotifier] = []

    def build(url: str = nats_url, **options: object) -> NatsNotifier:
        options.setdefault("prefix", session_prefix)
        notifier = NatsNotifier(url, **options)  # type: ignore[arg-type]
        made.append(notifier)
        return notifier

    yield build
    for notifier in made:
        notifier.close()


@pytest.fixture
def proxy(nats_url: str) -> Iterator[CuttableProxy]:
    """A TCP proxy to the test NATS whose ``cut()`` drops the connections through it."""
    parts = urlsplit(nats_url)
    with CuttableProxy(parts.hostname or "127.0.0.1", parts.port or 4222) as cuttable:
        yield cuttable


def test_a_listener_is_woken_once_at_subscribe_and_on_each_hint(make: Make) -> None:
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
    # A listener of another channel on the same notifier, woken after the publish: the
    # stopped one would have had its message by then.
    other = Counter()
    listener.listen("other", other)
    sender.notify("other")
    wait_until(lambda: other.count() >= 2, TIMEOUT, "the other channel's hint")
    assert woken.count() == before, "a stopped listener was woken"


def test_two_clusters_on_one_nats_never_wake_each_other(make: Make, session_prefix: str) -> None:
    # Same store channel (say, databases of the same name on two servers), two prefixes.
    channel = "cairnflow_mysql_app.cf_"
    red, blue = make(prefix=f"{session_prefix}.red"), make(prefix=f"{session_prefix}.blue")
    red_woken, blue_woken = Counter(), Counter()
    red.listen(channel, red_woken)
    blue.listen(channel, blue_woken)
    red.notify(channel)
    wait_until(lambda: red_woken.count() >= 2, TIMEOUT, "red's own hint")
    # blue's connection receives in order: its own later hint proves red's reached nobody.
    blue.notify("some-other-channel")
    blue_other = Counter()
    blue.listen("some-other-channel", blue_other)
    blue.notify("some-other-channel")
    wait_until(lambda: blue_other.count() >= 2, TIMEOUT, "blue's own later hint")
    assert blue_woken.count() == 1, "a hint of another cluster woke this one"
    assert red.subject_name(channel) != blue.subject_name(channel)


def test_subjects_are_valid_and_distinct_for_any_store_channel() -> None:
    channels = [
        "cairnflow_sqlite:/tmp/a b/kit.db::cf_",
        "cairnflow_sqlite:/tmp/a_b/kit.db::cf_",
        "cairnflow_postgres_app.cf_",
        "cairnflow_mysql_app.cf_",
        "x" * 500,
    ]
    subjects = [subject_name("acme.prod", c) for c in channels]
    assert len(set(subjects)) == len(subjects)
    for subject in subjects:
        assert subject.startswith("acme.prod.cairnflow.")
        assert not any(c in subject for c in " *>\t"), subject
        assert len(subject.split(".")) == 4, subject  # the channel is one token
        assert len(subject) < 120


def test_the_connection_comes_back_after_it_is_cut(make: Make, proxy: CuttableProxy) -> None:
    sender = make()
    listener = make(f"nats://127.0.0.1:{proxy.port}", reconnect_min=0.05)
    woken = Counter()
    listener.listen("jobs", woken)
    assert proxy.cut() == 1  # the listener's one connection, from the test side
    wait_until(lambda: listener.reconnects >= 1, TIMEOUT, "the reconnection")
    # Back after an outage: it looked for work once (hints meanwhile were lost)...
    wait_until(lambda: woken.count() >= 2, TIMEOUT, "the wake-up after reconnecting")
    wait_until(lambda: "jobs" in listener.listening, TIMEOUT, "the subscription again")
    after = woken.count()
    # ...and hints reach it again, and it sends again.
    sender.notify("jobs")
    wait_until(lambda: woken.count() > after, TIMEOUT, "a hint after the reconnection")
    back = Counter()
    sender.listen("back", back)
    listener.notify("back")
    wait_until(lambda: back.count() >= 2, TIMEOUT, "a hint sent by the reconnected notifier")


def test_notify_never_blocks_and_listen_gives_up_when_nats_is_unreachable() -> None:
    # Port 9 (discard) on loopback: nothing listens, connections are refused.
    notifier = NatsNotifier("nats://127.0.0.1:9", listen_timeout=0.2, reconnect_max=0.2)
    try:
        returned = threading.Event()

        def notify_many() -> None:
            for _ in range(1000):
                notifier.notify("nowhere")
            returned.set()

        threading.Thread(target=notify_many, daemon=True).start()
        assert returned.wait(TIMEOUT), "notify() blocked with NATS unreachable"
        woken = Counter()
        notifier.listen("nowhere", woken)  # returns after listen_timeout, polling covers it
        assert woken.count() == 1
        assert notifier.listening == frozenset()
        assert notifier.sent == 0
    finally:
        notifier.close()


def test_close_releases_the_thread_and_the_connection(make: Make, proxy: CuttableProxy) -> None:
    before = set(threading.enumerate())
    notifier = make(f"nats://127.0.0.1:{proxy.port}")
    notifier.listen("jobs", Counter())
    notifier.notify("jobs")
    wait_until(lambda: notifier.sent >= 1, TIMEOUT, "a publish")
    notifier.close()
    notifier.close()  # idempotent
    started = set(threading.enumerate()) - before
    assert not [t for t in started if t.name == "cairnflow-nats"], started
    # The client closed its socket: the proxy has no connection left to cut.
    wait_until(lambda: proxy.cut() == 0, TIMEOUT, "the connection closed")
    notifier.notify("jobs")  # dropped, never raises
    with pytest.raises(RuntimeError, match="closed"):
        notifier.listen("jobs", Counter())


def test_bad_options_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="url"):
        NatsNotifier("127.0.0.1:4222")
    with pytest.raises(ValueError, match="prefix"):
        NatsNotifier(prefix="a.*")
    with pytest.raises(ValueError, match="prefix"):
        NatsNotifier(prefix="trailing.")
    with pytest.raises(ValueError, match="reconnect_min"):
        NatsNotifier(reconnect_min=0)
    with pytest.raises(ValueError, match="channel"):
        NatsNotifier().notify("")


# -- stores opened with a notifier ----------------------------------------------------------------
def test_a_sqlite_file_opened_with_it_declares_notify_and_closes_it(
    make: Make, tmp_path: Path
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


def test_a_mariadb_store_opened_with_it_declares_notify(make: Make) -> None:
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


def test_wake_after_an_enqueue_tx_commits_starts_it_on_an_idle_worker_elsewhere(
    make: Make, tmp_path: Path
) -> None:
    # A broker cannot send the hint at the application's commit (Postgres's NOTIFY can):
    # Client.wake(others=True) after the commit tells the other clients.
    import sqlite3

    from cairnflow_sqlite import SQLiteStore

    path = str(tmp_path / "tx.db")
    workflow = cf.Workflow("tx-wake", steps=[cf.Step("echo", lambda ctx, data: data)])
    worker_store = SQLiteStore(path, notifier=make())
    front_store = SQLiteStore(path, notifier=make())
    conn = sqlite3.connect(path, timeout=30)
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
