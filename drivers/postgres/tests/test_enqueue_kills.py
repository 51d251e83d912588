"""Enqueues while the client's connections are killed: every call makes exactly one run.

A connection lost while its COMMIT is under way may have committed or not; the
client cannot tell, so it sends the write again under the run ids it made
before writing, and a retry that finds its runs written returns them instead
of writing them again. Four threads enqueue (with keys, without, and in
batches) while a killer ends this test's connections every 20 to 50 ms, and
no one else's, in one of two ways:

* ``terminate``: the server ends every backend of this test's store, found by
  its own ``application_name`` (``pg_terminate_backend``). A backend finishes
  a COMMIT it began, and answers, before it ends, so these kills land before
  the commits they cut: the client must send those runs again.
* ``network``: a :class:`~cairnflow.testing.CuttableProxy` between the store
  and the server drops every connection (older than 50 ms: none in its
  handshake, which would only make the pool back off), so COMMITs under way
  land while their client sees its connection lost: the retry must find
  those runs written, which the store counts (``stats.landed``).
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import cairnflow as cf
from cairnflow.testing import CuttableProxy, enqueue_through_kills, runs_by_marker
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(180)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]
Killer = tuple[PostgresStore, Callable[[], int]]

LANDED = 3
"""Commits the network kills must catch landing, for the test to have proven the retry finds
them (the storm goes on until it has, 60 seconds at most)."""


def marked() -> cf.Workflow:
    wf = cf.Workflow("marked")
    wf.step(lambda ctx, d: d, name="one")
    wf.step(lambda ctx, d: d, name="two", after=["one"])
    return wf


@contextmanager
def terminating(postgres_url: str, make_store: StoreFactory) -> Iterator[Killer]:
    """A store whose backends the server terminates, found by their application_name."""
    name = f"cf_enqueue_kills_{secrets.token_hex(4)}"
    store = make_store(dsn=f"{postgres_url}?application_name={name}", max_size=8)
    with psycopg.connect(postgres_url, autocommit=True) as admin:

        def kill() -> int:
            row: Any = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (name,),
            ).fetchone()
            return int(row[0])

        yield store, kill


@contextmanager
def cutting(postgres_url: str, make_store: StoreFactory) -> Iterator[Killer]:
    """A store reaching the server through a proxy that drops its connections."""
    url = urlsplit(postgres_url)
    with CuttableProxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        user = f"{url.username}@" if url.username else ""
        through = urlunsplit(url._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
        store = make_store(dsn=through, max_size=8)
        try:
            yield store, lambda: proxy.cut(older_than=0.05)
        finally:
            store.close()  # before the proxy goes: its pool would reconnect meanwhile


@pytest.mark.parametrize("how", ["terminate", "network"])
def test_every_enqueue_makes_exactly_one_run_while_connections_are_killed(
    postgres_url: str,
    make_store: StoreFactory,
    make_client: ClientFactory,
    how: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    killing = terminating if how == "terminate" else cutting
    with killing(postgres_url, make_store) as (store, kill):
        # Batches of three go as two chunks (Dialect.batch_chunk): a kill between the
        # chunks' statements must leave the whole batch written once, or not at all.
        monkeypatch.setattr(store.dialect, "batch_chunk", 2)
        client = make_client(store, marked(), start=False, notifier=False)

        def landed() -> int:
            return store.stats.snapshot()["landed"]

        storm = enqueue_through_kills(
            client,
            "marked",
            kill,
            seconds=4.0,
            until=lambda: how == "terminate" or landed() >= LANDED,
            longest=60.0,
            pause=(0.02, 0.05) if how == "terminate" else (0.05, 0.1),
        )
        assert storm.kills > 0
        failed = storm.failed
        assert not failed, f"{len(failed)} of {storm.calls} calls raised: {failed[:3]}"
        runs = runs_by_marker(client, "marked")
        assert set(runs) == set(storm.returned)
        twice = {marker: [r.id for r in found] for marker, found in runs.items() if len(found) != 1}
        assert not twice, f"markers with more than one run: {twice}"
        for marker, (info,) in runs.items():
            assert info.id == storm.returned[marker].id
            assert set(info.steps) == {"one", "two"}
        if how == "network":
            assert landed() >= LANDED, f"{storm.kills} cuts caught {landed()} commits landing"


def test_a_batch_cut_while_it_streams_is_sent_again_with_the_runs_it_made(
    postgres_url: str,
    make_store: StoreFactory,
    make_client: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch of 300 goes as three chunks of 100 (Dialect.batch_chunk), each chunk's runs
    # made just before it is sent (cairnflow.store.RunStream). The store's connections are
    # ended while the third chunk is being made, two chunks already sent in the open
    # transaction: the write must be sent again with the runs made the first time (each
    # made once, under the same ids), and land once.
    with terminating(postgres_url, make_store) as (store, kill):
        assert store.dialect.batch_chunk == 100
        client = make_client(store, marked(), start=False, notifier=False)
        made: Counter[str] = Counter()
        kills: list[int] = []
        new_run = client._new_run

        def making(job: cf.Job, now: int, names: Any = None) -> Any:
            made[job.payload["marker"]] += 1
            if job.payload["marker"] == "r250" and not kills:
                kills.append(kill())
            return new_run(job, now, names)

        monkeypatch.setattr(client, "_new_run", making)
        before = store.stats.snapshot()["transactions"]
        refs = client.enqueue_many(cf.Job("marked", {"marker": f"r{n}"}) for n in range(300))
        assert kills and kills[0] >= 1, "no connection of the store was ended"
        assert store.stats.snapshot()["transactions"] - before >= 2, "the write was not resent"
        assert len(made) == 300
        assert set(made.values()) == {1}, "a run was made again for the resent write"
        runs = runs_by_marker(client, "marked")
        assert sorted(runs) == sorted(f"r{n}" for n in range(300))
        for n, ref in enumerate(refs):
            (info,) = runs[f"r{n}"]
            assert info.id == ref.id
            assert set(info.steps) == {"one", "two"}
