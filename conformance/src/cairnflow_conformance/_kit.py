""":class:`Kit`: what every kit test gets, and everything it must clean up."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import pytest

import cairnflow as cf
from cairnflow import Cap
from cairnflow.codec import JSONCodec
from cairnflow.store import RunQuery, Store, StoredRun, StoredStep
from cairnflow.testing import DEFAULT_BLOCKED, Partition

from ._holds import claim_holder
from ._processes import WorkerProcesses
from ._target import ClaimHolder, StoreTarget, new_namespace
from .traces import Traces

__all__ = ["Kit"]

_log = logging.getLogger("cairnflow_conformance")

CLIENT_DEFAULTS: dict[str, Any] = {"workers": 4, "poll_interval": 0.05, "lease": 2.0}
"""Test-friendly client timings: short polls and leases, never asserted on for speed."""


class Kit:
    """A migrated store on a fresh namespace, and helpers that clean up after themselves.

    Clients made by :meth:`client` are stopped, partitions healed (first, so no
    client hangs on its way out), worker processes killed and every store object
    closed when the test ends.
    """

    def __init__(
        self,
        target: StoreTarget,
        namespace: str,
        tmp_path: Path,
        capabilities: frozenset[Cap],
    ) -> None:
        self.target = target
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.capabilities = capabilities
        self.codec = JSONCodec()
        self._clients: list[cf.Client] = []
        self._partitions: list[Partition] = []
        self._stores: list[Store] = []
        self._namespaces: list[str] = [namespace]
        self._connections: list[Any] = []
        self.processes = WorkerProcesses(target, namespace, tmp_path / "workers")
        self.traces = Traces(tmp_path / "traces")
        self.store: Store = self.open_store()
        self.store.migrate()

    # -- what the store declares --------------------------------------------------------------
    def declares(self, *caps: Cap) -> bool:
        """True when the store declares every one of ``caps``."""
        return set(caps) <= self.capabilities

    @property
    def shares_state(self) -> bool:
        """True when store objects on one namespace see each other's rows.

        Then races are run through separate store objects (separate
        connections); otherwise through the one object the test has.
        """
        return self.declares(Cap.MULTI_PROCESS) or self.declares(Cap.DURABLE)

    # -- stores --------------------------------------------------------------------------------
    def open_store(self, namespace: str | None = None) -> Store:
        """Another store object on this test's namespace (or ``namespace``), closed at teardown.

        It is not migrated: the kit migrated this test's namespace once.
        """
        if namespace is not None and namespace not in self._namespaces:
            self._namespaces.append(namespace)
        store = self.target.open(namespace or self.namespace)
        self._stores.append(store)
        return store

    def close_store(self, store: Store) -> None:
        """Close a store object made by :meth:`open_store` now (a restart, a crash)."""
        self._stores.remove(store)
        store.close()

    def fresh_namespace(self) -> str:
        """A namespace nothing was written to (for tests of migration); cleaned up after."""
        namespace = new_namespace()
        self._namespaces.append(namespace)
        return namespace

    def peer_stores(self, count: int) -> list[Store]:
        """``count`` store objects on this namespace to race each other.

        Separate objects when the store shares state across them, so a race
        reaches the database through separate connections; otherwise the
        test's own store ``count`` times.
        """
        if self.shares_state:
            return [self.open_store() for _ in range(count)]
        return [self.store] * count

    def app_connection(self) -> Any:
        """An application's own connection to the store's database (for ``enqueue_tx``).

        Fails the test when the target gives no ``app_connection``: a store that
        declares ``Cap.TRANSACTIONAL_ENQUEUE`` must say what its users pass.
        """
        if self.target.app_connection is None:
            pytest.fail(
                "this store declares TRANSACTIONAL_ENQUEUE: give the StoreTarget an "
                "app_connection(namespace) returning an application's DB-API connection",
                pytrace=False,
            )
        connection = self.target.app_connection(self.namespace)
        self._connections.append(connection)
        return connection

    def claim_holder(self, store: Store) -> ClaimHolder | None:
        """How to hold a claim of ``store`` open (see :attr:`StoreTarget.hold_claim`).

        None when the store's claims never overlap (one writer), so there is
        nothing a claim could skip.
        """
        return claim_holder(store, self.target.hold_claim)

    def partition(
        self, store: Store | None = None, blocked: Iterable[str] = DEFAULT_BLOCKED
    ) -> Partition:
        """``store`` (default: the test's) behind a switch; healed at teardown."""
        partition = Partition(store if store is not None else self.store, blocked)
        self._partitions.append(partition)
        return partition

    def stored(self, run: cf.RunRef | str) -> StoredRun:
        """The run as the store keeps it (through the SPI, no client involved)."""
        run_id = run.id if isinstance(run, cf.RunRef) else run
        found = self.store.get_run(run_id)
        assert found is not None, f"run {run_id} is not in the store"
        return found

    def stored_step(self, run: cf.RunRef | str, step: str) -> StoredStep:
        """One step of the run as the store keeps it."""
        for candidate in self.stored(run).steps:
            if candidate.name == step:
                return candidate
        raise AssertionError(f"run {run} has no step {step!r}")

    def stored_output(self, run: cf.RunRef | str, step: str) -> Any:
        """The decoded output the store holds for ``step`` (None when it holds none)."""
        raw = self.stored_step(run, step).output
        return None if raw is None else self.codec.decode(raw)

    def run_count(self) -> int:
        """How many runs the store holds, read through the mandatory SPI."""
        count = 0
        cursor: str | None = None
        while True:
            page = self.store.list_runs(RunQuery(limit=500, cursor=cursor))
            count += len(page.runs)
            cursor = page.cursor
            if cursor is None:
                return count

    # -- clients -------------------------------------------------------------------------------
    def client(
        self,
        *workflows: cf.Workflow,
        start: bool = True,
        store: Store | Partition | None = None,
        **options: Any,
    ) -> cf.Client:
        """A client on the test's store (or ``store``) with short timings; stopped at teardown."""
        for key, value in CLIENT_DEFAULTS.items():
            options.setdefault(key, value)
        chosen = cast(Store, store) if store is not None else self.store
        client = cf.Client(chosen, **options)
        client.register(*workflows)
        self._clients.append(client)
        if start:
            client.start()
        return client

    # -- teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Heal, stop, kill and close everything the test made, in that order."""
        problems: list[BaseException] = []
        for partition in self._partitions:
            partition.heal()
        for client in self._clients:
            try:
                client.stop(timeout=5)
            except Exception as error:  # noqa: BLE001 - keep cleaning up; raise the first below
                problems.append(error)
        self.processes.close()
        for connection in self._connections:
            try:
                connection.close()
            except Exception as error:  # noqa: BLE001 - keep cleaning up; raise the first below
                problems.append(error)
        for store in reversed(self._stores):
            try:
                store.close()
            except Exception as error:  # noqa: BLE001 - keep cleaning up; raise the first below
                problems.append(error)
        if self.target.cleanup is not None:
            for namespace in self._namespaces:
                try:
                    self.target.cleanup(namespace)
                except Exception as error:  # noqa: BLE001 - keep cleaning up; raise the first below
                    problems.append(error)
        if problems:
            raise problems[0]
