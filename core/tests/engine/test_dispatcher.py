"""The dispatcher's polls: what they do first, and their cadence."""

from __future__ import annotations

import threading
import time
from typing import Any

import cairnflow as cf
from cairnflow.store import MemoryStore
from cairnflow.testing import CountingNotifier, wait_until


class Recorder:
    """The memory store, recording when the dispatcher claims and keeps house."""

    def __init__(self, inner: MemoryStore, housekeeping: float = 0.0) -> None:
        self._inner = inner
        self._housekeeping = housekeeping
        self.calls: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in {"claim", "advance_due", "reclaim_expired"}:
            return target

        def recorded(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append((name, time.monotonic()))
            if name == "advance_due":
                time.sleep(self._housekeeping)
            return target(*args, **kwargs)

        return recorded


def test_a_poll_claims_before_it_keeps_house(make_client: Any, store: MemoryStore) -> None:
    recorder = Recorder(store)
    wf = cf.Workflow("poll", steps=[cf.Step("a", lambda ctx, d: d)])
    make_client(wf, on=recorder, poll_interval=0.05)
    wait_until(lambda: sum(1 for n, _ in recorder.calls if n == "advance_due") >= 3, what="polls")
    names = [name for name, _ in recorder.calls]
    for i, name in enumerate(names):
        if name == "advance_due":
            assert names[i - 1] == "claim", names  # each poll's claim came first


def test_a_slow_housekeeping_does_not_push_the_polls_back(
    make_client: Any, store: MemoryStore
) -> None:
    # Each poll's housekeeping takes 80 ms of a 100 ms period: the polls keep their cadence
    # (on a cadence measured from the end of the housekeeping they would come every 180 ms;
    # the bound is halfway).
    recorder = Recorder(store, housekeeping=0.08)
    wf = cf.Workflow("cadence", steps=[cf.Step("a", lambda ctx, d: d)])
    make_client(wf, on=recorder, poll_interval=0.1)
    wait_until(lambda: sum(1 for n, _ in recorder.calls if n == "advance_due") >= 8, what="polls")
    polls = [at for name, at in recorder.calls if name == "advance_due"][1:8]
    period = (polls[-1] - polls[0]) / (len(polls) - 1)
    assert 0.09 < period < 0.14, f"polls every {period * 1000:.0f} ms, 100 expected"


def test_wake_tells_the_other_clients_only_when_asked(store: MemoryStore) -> None:
    # A client that is never started (a web application's) wakes the workers after its
    # application's transaction committed: through the notifier, with others=True only.
    notifier = CountingNotifier()
    app = cf.Client(store, notifier=notifier)
    app.wake()
    assert notifier.sent == 0
    app.wake(others=True)
    assert notifier.sent == 1
