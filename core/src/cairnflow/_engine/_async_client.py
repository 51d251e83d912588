"""The asyncio face of a client: what an ``async def`` endpoint awaits instead of blocking.

A sync call in an ``async def`` (``client.enqueue`` from a FastAPI endpoint)
holds the event loop for its whole database round trip: about a millisecond per
enqueue, during which no other request of that process moves. The engine's
store SPI is synchronous (every driver's is: DB-API), and writing it twice is
not worth a millisecond, so :class:`AsyncClient` sends the sync calls to a small
thread pool of its own and awaits them; the loop only schedules and resumes.

The one call that cannot go to a thread is the transactional enqueue: the
application's ``psycopg.AsyncConnection`` belongs to its event loop, and its
transaction is open there. ``enqueue_tx`` builds the runs like the sync client
and the store awaits its own statements on that connection
(:class:`~cairnflow.store.AsyncTransactionalEnqueue`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, TypeVar

from .._caps import Cap
from .._checks import check_int
from .._errors import CairnError, RunFailed
from .._models import Job, RunError, RunInfo, RunRef, Status
from ..store import SignalResult
from ..workflow import Workflow
from ._attempt import monotonic
from ._client import Client, _seconds
from ._reads import RunLike, RunList, still_running

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """Awaitable enqueue, signal, cancel and reads over a :class:`~cairnflow.Client`.

    ``AsyncClient(client)`` wraps a client, started (a worker in the same
    process) or never started (a web application that only enqueues and
    reads; it must still ``register()`` the workflows it enqueues). None of its
    methods blocks the event loop:

    * :meth:`enqueue`, :meth:`enqueue_many`, :meth:`signal`, :meth:`cancel`,
      :meth:`info`, :meth:`errors` and :meth:`runs` run the client's sync method
      in a bounded pool of ``threads`` threads owned by this object, and await
      it. At most ``threads`` such calls hold a database connection at once;
      more wait their turn in the pool, not on the loop. Each behaves exactly as
      the client's method (same errors, same retry of a lost commit).
    * :meth:`wait` and :meth:`result` read the run in the pool and sleep on the
      loop (``asyncio.sleep``) between reads, from 5 ms up to the client's poll
      interval (a quarter of a second at most).
    * :meth:`enqueue_tx` takes the application's *async* connection
      (``psycopg.AsyncConnection``, or an ``AsyncTransaction``/``AsyncCursor``
      of it) with its transaction open, and awaits the enqueue's statements on
      it: the run commits or rolls back with the application's writes. Call
      :meth:`wake` after the commit.

    :meth:`aclose` (or ``async with``) shuts the thread pool down; the client
    itself is the caller's to stop and its store the caller's to close.
    """

    def __init__(self, client: Client, *, threads: int = 4) -> None:
        check_int("threads", threads, minimum=1)
        self._client = client
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cairnflow-async")

    @property
    def client(self) -> Client:
        """The wrapped sync client."""
        return self._client

    async def _call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    # -- enqueueing --------------------------------------------------------------------------
    async def enqueue(
        self,
        workflow: str | Workflow,
        payload: Any = None,
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        labels: Mapping[str, str] | None = None,
        queue: str | None = None,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> RunRef:
        """:meth:`Client.enqueue <cairnflow.Client.enqueue>`, in the thread pool."""
        enqueue = self._client.enqueue
        return await self._call(
            enqueue, workflow, payload, key=key, delay=delay, labels=labels, queue=queue,
            headers=headers, tenant=tenant,
        )  # fmt: skip

    async def enqueue_many(self, jobs: Iterable[Job]) -> list[RunRef]:
        """:meth:`Client.enqueue_many <cairnflow.Client.enqueue_many>`, in the thread pool."""
        return await self._call(self._client.enqueue_many, list(jobs))

    async def enqueue_tx(
        self,
        tx: Any,
        workflow: str | Workflow,
        payload: Any = None,
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        labels: Mapping[str, str] | None = None,
        queue: str | None = None,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> RunRef:
        """Enqueue inside the application's async transaction ``tx``; awaited on it.

        ``tx`` is the driver library's async connection with a transaction open
        (Postgres: ``psycopg.AsyncConnection``, or an ``AsyncTransaction`` or
        ``AsyncCursor`` of it). The run commits or rolls back with the
        application's writes; a :class:`~cairnflow.DuplicateRun` leaves that
        transaction usable (a savepoint). The statements are those of
        :meth:`Client.enqueue_tx <cairnflow.Client.enqueue_tx>`, awaited on
        ``tx`` by the store, never in a thread. Nothing is sent again when the
        connection fails: the transaction is the application's. Call
        :meth:`wake` after the commit.
        """
        client = self._client
        state = client._state
        state.require(Cap.TRANSACTIONAL_ENQUEUE, "enqueue_tx()")
        store = state.facets.async_transactional
        if store is None:
            raise CairnError(
                f"the {state.store.describe().driver} store cannot enqueue on an async "
                "connection: use client.enqueue_tx() with its sync connection"
            )
        name = workflow.name if isinstance(workflow, Workflow) else workflow
        job = Job(name, payload, key, _seconds(delay), labels, queue, headers, tenant)
        # Built in the pool: the run's "now" may be the database's clock, which reads the
        # database when it resyncs (database_clock=True, once a minute).
        new = await self._call(lambda: client._new_run(job, state.now()))
        (run_id,) = await store.create_runs_in_async(tx, [new])
        return RunRef(run_id, new.workflow)

    def wake(self) -> None:
        """:meth:`Client.wake <cairnflow.Client.wake>` (never blocks: it sets an event)."""
        self._client.wake()

    # -- acting on runs ----------------------------------------------------------------------
    async def signal(self, run: RunLike, name: str, payload: Any = None) -> SignalResult:
        """:meth:`Client.signal <cairnflow.Client.signal>`, in the thread pool."""
        return await self._call(self._client.signal, run, name, payload)

    async def cancel(self, run: RunLike) -> bool:
        """:meth:`Client.cancel <cairnflow.Client.cancel>`, in the thread pool."""
        return await self._call(self._client.cancel, run)

    # -- reading -----------------------------------------------------------------------------
    async def info(self, run: RunLike) -> RunInfo:
        """:meth:`Client.info <cairnflow.Client.info>` (a snapshot of the run), in the pool."""
        return await self._call(self._client.info, run)

    async def errors(self, run: RunLike) -> list[RunError]:
        """:meth:`Client.errors <cairnflow.Client.errors>`, in the thread pool."""
        return await self._call(self._client.errors, run)

    async def runs(self, **query: Any) -> RunList:
        """:meth:`Client.runs <cairnflow.Client.runs>` (same keyword filters), in the pool."""
        return await self._call(self._client.runs, **query)

    async def wait(self, run: RunLike, timeout: float | None = None) -> RunInfo:
        """Until the run finishes, its info; :class:`~cairnflow.WaitTimeout` after ``timeout``.

        Reads the run in the thread pool and sleeps on the event loop between
        reads (see the class docstring): a pending wait holds no thread.
        """
        ends = None if timeout is None else monotonic() + timeout
        pause = 0.005
        ceiling = min(0.25, self._client._state.settings.poll_interval)
        while True:
            info = await self.info(run)
            if info.finished:
                return info
            left = None if ends is None else ends - monotonic()
            if left is not None and left <= 0:
                raise still_running(info, timeout)
            await asyncio.sleep(pause if left is None else min(pause, left))
            pause = min(pause * 2, ceiling)

    async def result(self, run: RunLike, timeout: float | None = None) -> Any:
        """:meth:`wait` for the run, then its result, as :meth:`Client.result
        <cairnflow.Client.result>` (:class:`~cairnflow.RunFailed` unless it succeeded)."""
        self._client._state.require(Cap.RESULT, "result()")
        info = await self.wait(run, timeout)
        if info.status is not Status.SUCCEEDED:
            raise RunFailed(info)
        return info.result

    # -- lifecycle ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Shut the thread pool down once the calls under way return (the client stays)."""
        await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncClient over {self._client!r}>"
