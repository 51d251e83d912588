"""The peers ``bench/run_peers.py`` compares cairnflow with: one module per peer.

A module ``peer_NAME.py`` here defines ``PEER``, an instance of a :class:`Peer` subclass;
adding a peer is adding such a file. A peer module imports its library only inside its
methods, so a peer that is not installed is still listed (and marked "not installed").

What a peer gives, on a fresh database ``url`` (all async; the harness owns every clock):

- ``install(url)``: its schema;
- ``enqueuer(url)``: an async context manager whose object has ``enqueue(kind, i)`` (one run,
  its own transaction) and ``enqueue_many(kind, ids)`` (the peer's batch API);
- ``work(url, concurrency, stop)``: its workers, running every kind, until ``stop`` is set;
- ``counts(conn, kind)``: (runs stored, runs succeeded) of ``kind``, read from its tables
  through ``conn`` (a psycopg ``AsyncConnection``).

The kinds: ``noop`` (a no-op run), ``chain`` (step 1 -> step 2 -> step 3, no-op bodies; a
peer without workflows enqueues the next job from the job) and ``probe`` (records when it
started). Every body calls :func:`started` (``chain``: every step), which is how the harness
learns when the work began without asking the database.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

KINDS = ("noop", "chain", "probe")

# What the task bodies of this process record (appends are atomic under the GIL, so bodies
# running on another thread, as DBOS's may, record safely).
STARTS: list[float] = []
"""``time.perf_counter()`` at the start of every body (a chain's every step)."""
PROBES: dict[int, int] = {}
"""probe run's number -> ``time.time_ns()`` when its body started (the wall clock the
enqueuing process also reads)."""


def started(kind: str, i: int) -> None:
    """What every task body calls first."""
    STARTS.append(time.perf_counter())
    if kind == "probe":
        PROBES[int(i)] = time.time_ns()


def reset() -> None:
    STARTS.clear()
    PROBES.clear()


class Enqueuer(Protocol):
    async def enqueue(self, kind: str, i: int) -> None: ...

    async def enqueue_many(self, kind: str, ids: list[int]) -> None: ...


class Peer:
    """One engine in the comparison (subclass it in ``peer_NAME.py``)."""

    name: str = ""
    """Its column in the table."""
    order: int = 50
    """Its column's position (lower first)."""
    distributions: tuple[str, ...] = ()
    """What must be installed (the versions the table names)."""
    config: str = ""
    """How it is configured here (written under the table in docs/benchmarks.md)."""
    batch_api: str = ""
    """What the batch workload calls."""

    def missing(self) -> list[str]:
        """The distributions that are not installed (empty: the peer can run)."""
        out = []
        for dist in self.distributions:
            try:
                importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                out.append(dist)
        return out

    def versions(self) -> str:
        return ", ".join(
            f"{dist} {importlib.metadata.version(dist)}"
            for dist in self.distributions
            if dist not in self.missing()
        )

    async def install(self, url: str) -> None:
        raise NotImplementedError

    def enqueuer(self, url: str) -> AbstractAsyncContextManager[Enqueuer]:
        raise NotImplementedError

    async def work(self, url: str, concurrency: int, stop: Any) -> None:
        raise NotImplementedError

    async def counts(self, conn: Any, kind: str) -> tuple[int, int]:
        raise NotImplementedError

    def workload(self, name: str, url: str, sizes: dict[str, Any]) -> dict[str, Any] | None:
        """A peer that measures ``name`` its own way returns its figures (cairnflow: its
        own bench code); None lets the generic workload of ``peers._measure`` run."""
        return None


def discover() -> dict[str, Peer]:
    """Every ``peer_*.py`` module's ``PEER``, by module name (without ``peer_``), in order."""
    found: dict[str, Peer] = {}
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name.startswith("peer_"):
            peer = importlib.import_module(f"{__name__}.{module.name}").PEER
            found[module.name.removeprefix("peer_")] = peer
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))
