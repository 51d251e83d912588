"""Helpers for testing code that uses cairnflow (and for cairnflow's own tests).

:class:`Partition` wraps a real store and makes chosen operations hang, the
way a lost network or a stalled process would: a client behind a cut
partition cannot renew its leases or write its outcomes. It fakes nothing
about the store itself.

:func:`enqueue_through_kills` enqueues from several threads while a killer
cuts the store's database connections, and :func:`runs_by_marker` reads back
what the store recorded: a driver's proof that every ``enqueue()`` makes
exactly one run through connection loss. The kill is the driver's: the server
ends the sessions its test finds its own, or :class:`CuttableProxy` cuts the
network between the store and the server.

:func:`faults` arms the engine's named fault points (:data:`FAULT_POINTS`) in
this process: a crash, an error or a stall at the worst places, for chaos
tests. Worker subprocesses are armed through the :data:`FAULTS_ENV`
environment variable instead. The points are the engine's internals: they
move with its code, and nothing outside tests should rely on them.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _faults
from ._faults import Fault, FaultInjected
from ._models import Job, RunInfo, RunRef
from .notify import LocalNotifier, Notifier
from .store import FACETS

if TYPE_CHECKING:
    from ._engine._client import Client

__all__ = [
    "FAULTS_ENV",
    "FAULT_POINTS",
    "CountingNotifier",
    "CuttableProxy",
    "EnqueueStorm",
    "Fault",
    "FaultInjected",
    "Faults",
    "NotifierSpec",
    "Partition",
    "build_notifier",
    "enqueue_through_kills",
    "faults",
    "runs_by_marker",
    "wait_until",
]

DEFAULT_BLOCKED = frozenset(method for facet in FACETS for method in facet.methods) - {
    "describe",
    "default_notifier",
    "migrate",
    "check_schema",
    "close",
}
"""Every Store SPI operation that talks to the database, the facets' included."""


class Partition:
    """A real store behind a switch: ``cut()`` hangs the ``blocked`` operations.

    ``heal()`` lets hung calls through again (so their threads can finish).
    ``calls`` records the blocked operations that went through, in order.
    """

    def __init__(self, inner: Any, blocked: Iterable[str] = DEFAULT_BLOCKED) -> None:
        self._inner = inner
        self._blocked = frozenset(blocked)
        self._open = threading.Event()
        self._open.set()
        self.calls: list[str] = []

    @property
    def inner(self) -> Any:
        """The wrapped store."""
        return self._inner

    def cut(self) -> None:
        """From now on, the blocked operations hang."""
        self._open.clear()

    def heal(self) -> None:
        """Let every hung and future call through."""
        self._open.set()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name not in self._blocked or not callable(target):
            return target

        def gated(*args: Any, **kwargs: Any) -> Any:
            self._open.wait()
            self.calls.append(name)
            return target(*args, **kwargs)

        return gated


def wait_until(
    predicate: Callable[[], bool], timeout: float = 10.0, what: str = "a condition"
) -> None:
    """Poll ``predicate`` every 10 ms until it is true; ``TimeoutError`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.01)


@dataclass
class EnqueueStorm:
    """What :func:`enqueue_through_kills` saw.

    ``returned`` maps each marker to the run its call returned; ``failed`` holds
    the markers of every call that raised, with what it raised.
    """

    returned: dict[str, RunRef] = field(default_factory=dict)
    failed: list[tuple[tuple[str, ...], BaseException]] = field(default_factory=list)
    calls: int = 0
    kills: int = 0
    """Connections the killer reported cut."""


def enqueue_through_kills(
    client: Client,
    workflow: str,
    kill: Callable[[], int],
    *,
    threads: int = 4,
    seconds: float = 3.0,
    until: Callable[[], bool] = lambda: True,
    longest: float = 30.0,
    pause: tuple[float, float] = (0.02, 0.05),
) -> EnqueueStorm:
    """Enqueue runs of ``workflow`` from ``threads`` threads while ``kill()`` cuts connections.

    Every thread calls in turn ``enqueue()`` without a key, ``enqueue()`` with
    one, ``enqueue_many()`` of three runs (one keyed) and of two (none keyed).
    Each run carries a unique marker as its payload (``{"marker": ...}``), and a
    keyed run the marker as its key. Meanwhile ``kill()`` runs every ``pause``
    seconds (drawn uniformly) and returns how many of the client's connections
    it cut. The storm lasts ``seconds``, and then goes on until ``until()``
    holds (what the test needs to have happened), ``longest`` seconds at most.
    """
    storm = EnqueueStorm()
    lock = threading.Lock()
    started = time.monotonic()
    stop = threading.Event()

    def going() -> bool:
        elapsed = time.monotonic() - started
        return elapsed < seconds or (elapsed < longest and not until())

    def jobs(thread: int, call: int) -> list[Job]:
        shape = call % 4
        made = []
        for index in range((1, 1, 3, 2)[shape]):
            marker = f"t{thread}-c{call}-r{index}"
            keyed = shape == 1 or (shape == 2 and index == 0)
            made.append(Job(workflow, {"marker": marker}, key=marker if keyed else None))
        return made

    def enqueuer(thread: int) -> None:
        call = 0
        while not stop.is_set():
            batch = jobs(thread, call)
            markers = tuple(job.payload["marker"] for job in batch)
            try:
                if call % 4 < 2:
                    refs = [client.enqueue(workflow, batch[0].payload, key=batch[0].key)]
                else:
                    refs = client.enqueue_many(batch)
            except Exception as error:  # noqa: BLE001 - reported to the test
                with lock:
                    storm.calls += 1
                    storm.failed.append((markers, error))
            else:
                with lock:
                    storm.calls += 1
                    storm.returned.update(zip(markers, refs, strict=True))
            call += 1

    workers = [threading.Thread(target=enqueuer, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    try:
        while going():
            time.sleep(random.uniform(*pause))
            cut = kill()
            with lock:
                storm.kills += cut
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    return storm


def runs_by_marker(client: Client, workflow: str) -> dict[str, list[RunInfo]]:
    """Every run of ``workflow`` in the client's store, by the marker of its payload."""
    found: dict[str, list[RunInfo]] = {}
    cursor: str | None = None
    while True:
        page = client.runs(workflow=workflow, limit=500, cursor=cursor)
        for run in page.runs:
            info = client.info(run.id)
            found.setdefault(info.payload["marker"], []).append(info)
        cursor = page.cursor
        if cursor is None:
            return found


class CuttableProxy:
    """A TCP proxy from ``127.0.0.1:<port>`` to ``host:port`` whose :meth:`cut` drops every
    connection through it at once, as a failing network does.

    Point a store at :attr:`port`: a cut closes both ends of each connection, so
    the client sees its connection lost while the server finishes what it was
    doing (a COMMIT it had begun lands) and finds its client gone when it answers.
    Use it as a context manager.

    ``cut(older_than=...)`` spares connections younger than that many seconds:
    a pool whose new connections are cut in their handshake backs off before it
    connects again, and a test of what happens to statements wants connections
    that can carry some.
    """

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: dict[tuple[socket.socket, socket.socket], float] = {}
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def __enter__(self) -> CuttableProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cut(self, older_than: float = 0.0) -> int:
        """Drop every connection opened ``older_than`` seconds ago or before; return how many."""
        oldest = time.monotonic() - older_than
        with self._lock:
            cut = [pair for pair, opened in self._open.items() if opened <= oldest]
            for pair in cut:
                del self._open[pair]
        for pair in cut:
            for sock in pair:
                _drop(sock)
        return len(cut)

    def close(self) -> None:
        """Stop accepting and drop every connection."""
        with self._lock:
            self._closed = True
        _drop(self._listener)
        self.cut()
        self._acceptor.join(5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self._target, timeout=10)
                server.settimeout(None)
            except OSError:
                _drop(client)
                continue
            with self._lock:
                if self._closed:
                    _drop(client)
                    _drop(server)
                    return
                self._open[(client, server)] = time.monotonic()
            for source, sink in ((client, server), (server, client)):
                pump = threading.Thread(
                    target=self._pump, args=(source, sink, (client, server)), daemon=True
                )
                pump.start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        pair: tuple[socket.socket, socket.socket],
    ) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._open.pop(pair, None)
        for sock in pair:
            _drop(sock)


def _drop(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways (waking a thread blocked on it) and close it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


# -- fault points ------------------------------------------------------------------------------
FAULT_POINTS: Mapping[str, str] = _faults.POINTS
"""Every named fault point, and where it sits in the engine."""

FAULTS_ENV = _faults.ENV
"""``CAIRNFLOW_FAULTS``: the faults a process arms when it imports cairnflow, e.g.
``"outcome.before_commit=kill@0.02,sql.after_commit=raise@0.05,claim.before_commit=stall:2#1"``
(``point=action[:seconds][@probability][#times]``; actions ``kill``, ``raise``, ``stall``)."""


class Faults:
    """The faults :func:`faults` armed: how often each point fired so far."""

    def __init__(self, armed: list[Fault]) -> None:
        self.armed = armed

    def fired(self, point: str | None = None) -> int:
        """How many times ``point`` fired (every point's total when None)."""
        counts = _faults.fired()
        return sum(counts.values()) if point is None else counts.get(point, 0)


@contextmanager
def faults(
    spec: str, *, observe: Callable[[Fault], None] | None = None, threads: str | None = None
) -> Iterator[Faults]:
    """Arm the faults ``spec`` (the :data:`FAULTS_ENV` format) in this process for the block.

    ``kill`` would end the test process itself: use it in subprocesses only.
    ``observe`` is called with each fault that fires, before it acts. ``threads``:
    fire only in threads whose name starts with it (``"cairnflow-committer"``: the
    outcomes' writes, not a claim or a heartbeat that passes the same point). Whatever
    was armed before (from the environment) is armed again after the block.
    """
    armed = _faults.parse(spec)
    before = _faults.plan
    _faults.arm(armed, [observe] if observe is not None else [], threads)
    try:
        yield Faults(armed)
    finally:
        _faults.plan = before


class CountingNotifier:
    """A notifier counting the wake-ups sent through it (:attr:`sent`), passed on to ``inner``.

    What a test asserts on to prove when a wake-up went out (after a commit, never
    before it, never after a rollback) instead of timing how soon work started.
    ``inner`` is a fresh in-process bus by default: clients given it (or this) wake
    each other.
    """

    def __init__(self, inner: Notifier | None = None) -> None:
        self.inner: Notifier = inner if inner is not None else LocalNotifier()
        self._lock = threading.Lock()
        self.sent = 0

    def notify(self, channel: str) -> None:
        """Count the wake-up, then send it through ``inner``."""
        with self._lock:
            self.sent += 1
        self.inner.notify(channel)

    def listen(self, channel: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Listen through ``inner``."""
        return self.inner.listen(channel, wake)


NotifierSpec = tuple[str, Mapping[str, Any]] | list[Any]
"""``("module:callable", {keyword arguments})``: a notifier a worker process can build.

It travels in the conformance kit's JSON ``worker_config`` (as a two-item list), so a
driver's test helpers can open a store with a notifier without importing its package."""


def build_notifier(spec: NotifierSpec | None) -> Notifier | None:
    """The notifier ``spec`` describes, built by importing its callable (None: no notifier)."""
    if spec is None:
        return None
    if len(spec) != 2 or not isinstance(spec[0], str) or not isinstance(spec[1], Mapping):
        raise ValueError(f"a notifier spec is ('module:callable', {{kwargs}}), got {spec!r}")
    module, sep, name = spec[0].partition(":")
    if not sep or not module or not name:
        raise ValueError(f"a notifier spec names 'module:callable', got {spec[0]!r}")
    notifier = getattr(importlib.import_module(module), name)(**spec[1])
    if not isinstance(notifier, Notifier):
        raise TypeError(f"{spec[0]} returned {notifier!r}, which is not a Notifier")
    return notifier
