"""``Cap.NOTIFY``: idle clients are woken at once when another makes work due.

Notifications are hints: polling stays on. So these tests give the woken
client a poll interval far longer than the test may take: only a wake-up can
make it run the work in time. And a wake-up must stay inside its namespace.
"""

from __future__ import annotations

import threading
import time

import cairnflow as cf
from cairnflow import Cap

from .. import workflows
from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

__all__ = ["NotifyTests"]

_LONG_POLL = 120.0
"""Longer than any of these tests may take: a poll cannot be what admits the work."""


def _echo() -> cf.Workflow:
    return cf.Workflow("kit-wake", steps=[cf.Step("echo", lambda c, d: d)])


class NotifyTests:
    """``Cap.NOTIFY``."""

    @proves(Cap.NOTIFY, requires=(Cap.MULTI_PROCESS,))
    def test_an_idle_worker_process_is_woken_by_an_enqueue_elsewhere(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        worker = kit.processes.spawn("kit-sleeper", poll=_LONG_POLL)
        time.sleep(1.0)  # its first poll (at start) is behind it: from now on only a wake-up helps
        client = kit.client(workflows.fanout(), start=False)
        started = time.monotonic()
        refs = []
        for _ in range(3):
            ref = client.enqueue(workflows.FANOUT, {"traces": str(kit.traces.directory)})
            refs.append(ref)
            info = client.wait(ref, timeout=TIMEOUT)
            assert info.status is cf.Status.SUCCEEDED, (info.error, worker.log())
            time.sleep(0.5)  # idle again before the next one
        assert time.monotonic() - started < _LONG_POLL, "the test outlived the poll interval"
        for ref in refs:
            assert {s.node for s in kit.stored(ref).steps} == {"kit-sleeper"}

    @proves(Cap.NOTIFY)
    def test_an_idle_client_is_woken_by_an_enqueue_on_another_store_object(
        self, cairnflow_kit: Kit
    ) -> None:
        kit = cairnflow_kit
        sleeper = kit.client(_echo(), store=kit.open_store(), poll_interval=_LONG_POLL)
        time.sleep(1.0)
        enqueuer = kit.client(_echo(), store=kit.open_store(), start=False)
        started = time.monotonic()
        ref = enqueuer.enqueue("kit-wake", "hello")
        info = sleeper.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.SUCCEEDED
        assert info.result == "hello"
        assert time.monotonic() - started < _LONG_POLL

    @proves(Cap.NOTIFY)
    def test_wake_ups_stay_inside_their_namespace(self, cairnflow_kit: Kit) -> None:
        kit = cairnflow_kit
        listening = kit.open_store()
        notifier = listening.default_notifier()
        assert notifier is not None, "a store declaring NOTIFY must offer a notifier"
        woken = threading.Event()
        stop = notifier.listen(listening.channel, woken.set)
        try:
            time.sleep(1.0)  # a listener may wake once when it (re)connects
            woken.clear()
            # Another namespace on the same database: its work must not wake us.
            elsewhere = kit.open_store(kit.fresh_namespace())
            elsewhere.migrate()
            assert elsewhere.channel != listening.channel
            other = kit.client(_echo(), store=elsewhere, start=False)
            other.enqueue("kit-wake", 1)
            assert not woken.wait(1.5), "work in another namespace woke this one"
            # Our own namespace's work does.
            ours = kit.client(_echo(), start=False)
            ours.enqueue("kit-wake", 2)
            wait_until(woken.is_set, timeout=TIMEOUT, what="the wake-up of our own namespace")
        finally:
            stop()

    @proves(Cap.NOTIFY)
    def test_notify_returns_at_once_even_when_its_transport_is_gone(
        self, cairnflow_kit: Kit
    ) -> None:
        # The engine calls notify() right after an enqueue and from the committer, so it
        # must never block or raise there: a notifier hands slow I/O to a thread of its
        # own and drops what it cannot send. Here its store is closed: nothing answers.
        kit = cairnflow_kit
        store = kit.open_store()
        notifier = store.default_notifier()
        assert notifier is not None, "a store declaring NOTIFY must offer a notifier"
        channel = store.channel
        kit.close_store(store)
        returned = threading.Event()
        problems: list[BaseException] = []

        def notify_many() -> None:
            try:
                for _ in range(100):
                    notifier.notify(channel)
            except BaseException as error:  # noqa: BLE001 - reported below
                problems.append(error)
            finally:
                returned.set()

        threading.Thread(target=notify_many, daemon=True).start()
        # A liveness check with the kit's generous timeout, not a speed assertion.
        assert returned.wait(TIMEOUT), "notify() blocked its caller with no transport"
        assert not problems, f"notify() raised: {problems[0]!r}"
