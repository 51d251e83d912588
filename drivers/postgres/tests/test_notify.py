"""LISTEN/NOTIFY wake-ups: across stores, per namespace, debounced, and back after a loss."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import cairnflow as cf
from cairnflow.testing import wait_until
from cairnflow_postgres import PgNotifier, PostgresStore

pytestmark = pytest.mark.timeout(120)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]


def stamp() -> cf.Workflow:
    """One step that returns when it started (the wall clock of this machine)."""
    wf = cf.Workflow("stamp")
    wf.step(lambda ctx, d: time.time_ns(), name="now")
    return wf


class Counter:
    """A ``wake`` that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.event = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.event.set()


@pytest.fixture
def raw_listener(postgres_url: str) -> Iterator[Callable[[str], Callable[[float], int]]]:
    """``listen(channel)`` on a plain connection; ``count(seconds)`` then counts what arrived."""
    conns: list[psycopg.Connection[Any]] = []

    def listen(channel: str) -> Callable[[float], int]:
        conn = psycopg.connect(postgres_url, autocommit=True)
        conns.append(conn)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

        def count(seconds: float) -> int:
            return sum(1 for _ in conn.notifies(timeout=seconds))

        return count

    yield listen
    for conn in conns:
        conn.close()


def test_an_idle_client_on_another_store_starts_at_once(
    make_store: StoreFactory, make_client: ClientFactory
) -> None:
    enqueuer_store = make_store()
    worker_store = make_store(prefix=enqueuer_store.tables.prefix, migrate=False)
    # Polling every 30 s: only a notification can start the step in time.
    worker = make_client(worker_store, stamp(), poll_interval=30)
    enqueuer = make_client(enqueuer_store, stamp(), start=False)
    latencies = []
    for _ in range(5):
        sent = time.time_ns()
        ref = enqueuer.enqueue("stamp")
        started = worker.result(ref, timeout=10)
        latencies.append((started - sent) / 1e9)
        time.sleep(0.03)  # past the debounce window: each enqueue is a leading edge
    assert max(latencies) < 2.0, latencies
    assert worker_store.notifier is not None
    assert worker_store.notifier.received >= 5


def test_two_clusters_on_one_database_never_wake_each_other(make_store: StoreFactory) -> None:
    first, second = make_store(), make_store()
    assert first.notifier is not None and second.notifier is not None
    heard_first, heard_second = Counter(), Counter()
    stops = [
        first.notifier.listen(first.channel, heard_first),
        second.notifier.listen(second.channel, heard_second),
    ]
    try:
        assert (heard_first.calls, heard_second.calls) == (1, 1)  # listen() wakes once
        heard_first.event.clear()
        for _ in range(5):
            second.notifier.notify(second.channel)
            time.sleep(0.03)
        wait_until(lambda: heard_second.calls >= 2, timeout=5, what="the second cluster's hint")
        time.sleep(0.3)
        assert heard_first.calls == 1
        first.notifier.notify(first.channel)
        assert heard_first.event.wait(5)
    finally:
        for stop in stops:
            stop()


def test_a_burst_of_enqueues_is_a_few_notifies(
    make_store: StoreFactory,
    make_client: ClientFactory,
    raw_listener: Callable[[str], Callable[[float], int]],
) -> None:
    enqueuer_store = make_store(notify_debounce=0.05)
    count = raw_listener(enqueuer_store.channel)
    enqueuer = make_client(enqueuer_store, stamp(), start=False)
    started = time.monotonic()
    for _ in range(300):
        enqueuer.enqueue("stamp")
    elapsed = time.monotonic() - started
    arrived = count(1.0)
    assert enqueuer_store.notifier is not None
    # At most one NOTIFY per 50 ms window (plus the edges), however many enqueues.
    assert 1 <= arrived <= elapsed / 0.05 + 3, (arrived, elapsed)
    assert arrived == enqueuer_store.notifier.sent
    worker = make_client(
        make_store(prefix=enqueuer_store.tables.prefix, migrate=False), stamp(), workers=8
    )
    runs = cf.Client(enqueuer_store).runs(limit=1000).runs
    for run in runs:
        worker.wait(run.ref, timeout=30)


def test_the_first_hint_of_a_quiet_spell_goes_in_the_enqueue_and_no_second_follows(
    make_store: StoreFactory,
    make_client: ClientFactory,
    raw_listener: Callable[[str], Callable[[float], int]],
) -> None:
    store = make_store(notify_debounce=1.0)  # long: a slow machine stays inside the window
    notifier = store.notifier
    assert notifier is not None
    count = raw_listener(store.channel)
    client = make_client(store, stamp(), start=False)
    client.enqueue("stamp")
    # One NOTIFY, the enqueue's own; the client's hint after it was covered (a trailing
    # NOTIFY at the end of the 1 s window would make two).
    assert (count(1.5), notifier.inline, notifier.sent) == (1, 1, 1)
    client.enqueue_many([cf.Job("stamp"), cf.Job("stamp")])  # quiet again: a batch carries one
    assert (count(1.5), notifier.inline, notifier.sent) == (1, 2, 2)
    client.enqueue("stamp")
    client.enqueue("stamp")  # inside the window: coalesced into a NOTIFY after its end
    assert (count(2.5), notifier.inline, notifier.sent) == (2, 3, 4)
    client.enqueue("stamp", delay=3600)  # nothing due: no hint at all
    assert (count(0.5), notifier.inline, notifier.sent) == (0, 3, 4)


def test_a_trailing_hint_rides_on_the_first_enqueue_after_the_window(
    make_store: StoreFactory,
    make_client: ClientFactory,
    raw_listener: Callable[[str], Callable[[float], int]],
) -> None:
    """A hint inside a window waits for its end and half a window more (CARRY): an enqueue
    in between carries a NOTIFY that covers it, and the sender sends none of its own."""
    store = make_store(notify_debounce=3.0)
    notifier = store.notifier
    assert notifier is not None
    count = raw_listener(store.channel)
    client = make_client(store, stamp(), start=False)
    client.enqueue("stamp")  # inline: the window starts (reserved before this returned)
    first_returned = time.monotonic()
    client.enqueue("stamp")  # inside the window: its hint is pending
    # Past the window (3 s after the reservation), before the sender's turn (4.5 s after
    # it): 1.3 s for a stalled scheduler.
    time.sleep(max(0.0, first_returned + 3.2 - time.monotonic()))
    client.enqueue("stamp")
    # Two NOTIFYs, both inline: the sender's (before, at the window's end) made three.
    assert (count(2.5), notifier.inline, notifier.sent) == (2, 2, 2)


def test_a_pending_hint_outlives_an_enqueue_that_reserved_a_notify_and_rolled_back(
    make_store: StoreFactory,
    make_client: ClientFactory,
    raw_listener: Callable[[str], Callable[[float], int]],
) -> None:
    store = make_store(notify_debounce=3.0)
    notifier = store.notifier
    assert notifier is not None
    count = raw_listener(store.channel)
    client = make_client(store, stamp(), start=False)
    client.enqueue("stamp", key="held")  # inline
    first_returned = time.monotonic()
    client.enqueue("stamp")  # pending
    time.sleep(max(0.0, first_returned + 3.2 - time.monotonic()))  # as in the test above
    with pytest.raises(cf.DuplicateRun):
        client.enqueue("stamp", key="held")  # reserves a NOTIFY, which its rollback drops
    # The pending hint is the sender's to send again (4.5 s after that reservation): the
    # first NOTIFY, then that one.
    assert (count(6.5), notifier.inline, notifier.sent) == (2, 2, 3)


def test_a_refused_enqueue_sends_no_hint_and_covers_none(
    make_store: StoreFactory,
    make_client: ClientFactory,
    raw_listener: Callable[[str], Callable[[float], int]],
) -> None:
    store = make_store(notify_debounce=0.05)
    notifier = store.notifier
    assert notifier is not None
    count = raw_listener(store.channel)
    client = make_client(store, stamp(), start=False)
    client.enqueue("stamp", key="held")
    assert count(0.3) == 1
    with pytest.raises(cf.DuplicateRun):
        client.enqueue("stamp", key="held")
    # The refused transaction reserved its hint and rolled it back: nothing arrives, and
    # the next hint of this thread is not taken for one that was covered.
    assert (count(0.3), notifier.inline) == (0, 2)
    notifier.notify(store.channel)
    assert count(0.5) == 1


def test_a_hint_is_not_taken_for_covered_by_an_earlier_clients_enqueue(
    make_store: StoreFactory,
    make_client: ClientFactory,
    raw_listener: Callable[[str], Callable[[float], int]],
) -> None:
    """A client without a notifier sends no hint after its enqueue carried one: the mark
    it left must not swallow the hint of the next enqueue of this thread (another client)."""
    store = make_store(notify_debounce=1.0)  # long: both enqueues fall inside one window
    count = raw_listener(store.channel)
    quiet = make_client(store, stamp(), start=False, notifier=False)
    loud = make_client(store, stamp(), start=False)
    quiet.enqueue("stamp")  # inline; no hint of its own follows to take the mark
    loud.enqueue("stamp")  # inside the window: not inline, its hint goes after the window
    assert count(2.5) == 2
    assert store.notifier is not None and (store.notifier.inline, store.notifier.sent) == (1, 2)


def test_the_listener_comes_back_after_its_backend_is_terminated(
    make_store: StoreFactory,
    make_client: ClientFactory,
    admin_conn: psycopg.Connection[Any],
) -> None:
    store = make_store()
    notifier = store.notifier
    assert notifier is not None
    worker = make_client(store, stamp(), poll_interval=30)
    other = make_store(prefix=store.tables.prefix, migrate=False)
    enqueuer = make_client(other, stamp(), start=False)
    assert worker.result(enqueuer.enqueue("stamp"), timeout=5)
    old_pid = notifier.listener_pid
    assert old_pid is not None
    # Only the listener's own backend: nothing else on the shared server is touched.
    admin_conn.execute("SELECT pg_terminate_backend(%s)", (old_pid,))
    wait_until(lambda: notifier.reconnects == 1, timeout=10, what="the listener to reconnect")
    wait_until(
        lambda: notifier.listener_pid not in (None, old_pid) and bool(notifier.listening),
        timeout=10,
        what="a new listening backend",
    )
    listening = admin_conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (old_pid,)
    ).fetchone()
    assert listening == (0,)
    sent = time.time_ns()
    started = worker.result(enqueuer.enqueue("stamp"), timeout=10)
    assert (started - sent) / 1e9 < 2.0  # woken by a notification, not the 30 s poll


def test_a_lost_hint_delays_work_and_never_loses_it(
    make_store: StoreFactory, make_client: ClientFactory
) -> None:
    store = make_store()
    # The worker hears nothing (no notifier): it finds the run at its next poll.
    worker = make_client(
        make_store(prefix=store.tables.prefix, migrate=False),
        stamp(),
        notifier=False,
        poll_interval=0.3,
    )
    enqueuer = make_client(store, stamp(), start=False)
    assert worker.result(enqueuer.enqueue("stamp"), timeout=5)


def test_listen_is_in_effect_when_it_returns(make_store: StoreFactory) -> None:
    store = make_store()
    notifier = PgNotifier(store.pool, debounce=0)
    try:
        heard = Counter()
        stop = notifier.listen(store.channel, heard)
        assert store.channel in notifier.listening
        heard.event.clear()
        notifier.notify(store.channel)  # sent right after listen() returned: not missed
        assert heard.event.wait(5)
        stop()
        wait_until(lambda: not notifier.listening, timeout=5, what="the listener to stop")
    finally:
        notifier.close()
    # The listener's connection went back to the pool with no LISTEN left on it.
    with store.pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM pg_listening_channels()").fetchone() == (0,)


def test_a_notifier_of_its_own_opens_and_closes_its_connections(postgres_url: str) -> None:
    notifier = PgNotifier(conninfo=postgres_url, debounce=0)
    try:
        heard = Counter()
        stop = notifier.listen("cairnflow_own_test_", heard)
        heard.event.clear()
        notifier.notify("cairnflow_own_test_")
        assert heard.event.wait(5)
        stop()
    finally:
        notifier.close()
    with pytest.raises(RuntimeError, match="closed"):
        notifier.listen("cairnflow_own_test_", heard)
