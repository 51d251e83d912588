"""``Cap.RETENTION`` and ``Cap.ARCHIVE`` (#16): tables that stay small.

Old runs are made old by a client whose scheduling clock runs two days behind
(its runs are created and finished "two days ago"), so no test waits for
anything to age. A chunk is checked at the SPI (``prune_runs``): at most its
limit, oldest finish first, never a young or unfinished run, and nothing at
all without the prune lock. The background pruner of running clients is then
watched through a proxy of their stores that records every chunk: two clients
never prune at once, and a pruner killed holding the lock (its row left
behind, as a killed process leaves it) is succeeded once the lock expires,
never before. Archived runs must be in exactly one place and read back with
their steps' outputs, newest finish first, page after page.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import cairnflow as cf
from cairnflow import Cap
from cairnflow.store import PRUNE_LOCK, Locking, PruneChunk, Retention, Store

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT, wait_until

__all__ = ["ArchiveTests", "RetentionTests"]

_DAY = 86_400
_HOUR = 3_600


class _Behind:
    """A scheduling clock ``seconds`` behind the machine's (movable while clients run)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def now_ns(self) -> int:
        return time.time_ns() - int(self.seconds * 1e9)


class _Watched:
    """A store seen through a proxy that records every chunk of ``prune_runs`` it passes on.

    ``overlaps`` counts chunks that began while another chunk (of any proxy
    sharing ``inflight``) was in flight; each chunk is held a little inside the
    call, so two pruners running at once would meet there.
    """

    def __init__(self, inner: Store, shared: dict[str, Any]) -> None:
        self._inner = inner
        self._shared = shared

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def prune_runs(self, chunk: PruneChunk) -> list[str] | None:
        shared = self._shared
        with shared["lock"]:
            shared["inflight"] += 1
            if shared["inflight"] > 1:
                shared["overlaps"] += 1
        try:
            threading.Event().wait(0.02)
            done: list[str] | None = self._inner.prune_runs(chunk)  # type: ignore[attr-defined]
            with shared["lock"]:
                shared["chunks"].append((chunk, done))
            return done
        finally:
            with shared["lock"]:
                shared["inflight"] -= 1


def _shared() -> dict[str, Any]:
    return {"lock": threading.Lock(), "inflight": 0, "overlaps": 0, "chunks": []}


def _recorded(shared: dict[str, Any]) -> int:
    """How many runs the watched stores' prune chunks deleted, as recorded so far."""
    with shared["lock"]:
        return sum(len(done or ()) for _, done in shared["chunks"])


def _pair(name: str) -> cf.Workflow:
    wf = cf.Workflow(name)

    @wf.step
    def a(ctx: cf.StepContext, n: int) -> int:
        return n + 1

    @wf.step(after=[a])
    def b(ctx: cf.StepContext, n: int) -> dict[str, int]:
        return {"b": n * 10}

    return wf


def _finished(kit: Kit, wf: cf.Workflow, count: int, *, behind: float = 0.0) -> list[cf.RunRef]:
    """``count`` runs of ``wf`` run to success by a client ``behind`` seconds in the past."""
    client = kit.client(wf, clock=_Behind(behind))
    refs = [client.enqueue(wf.name, i) for i in range(count)]
    for ref in refs:
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
    client.stop()
    return refs


def _facets(kit: Kit) -> tuple[Retention, Locking]:
    store = kit.store
    assert isinstance(store, Retention), "the store declares RETENTION without its facet"
    assert isinstance(store, Locking), "the store declares RETENTION without LOCKS (its lock)"
    return store, store


def _gone(kit: Kit, refs: list[cf.RunRef]) -> bool:
    return all(kit.store.get_run(ref.id) is None for ref in refs)


class RetentionTests:
    """``Cap.RETENTION``: old finished runs are pruned in chunks, by one node at a time."""

    @proves(Cap.RETENTION)
    def test_old_finished_runs_go_in_chunks_and_young_and_unfinished_ones_stay(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-prune")
        old = _finished(cairnflow_kit, wf, 5, behind=2 * _DAY)
        young = _finished(cairnflow_kit, wf, 2)
        idle = cairnflow_kit.client(wf, start=False, clock=_Behind(3 * _DAY))
        unfinished = idle.enqueue(wf.name, 99)  # as old as can be, never finished
        store, locks = _facets(cairnflow_kit)
        now = time.time_ns()
        cut = now - _DAY * 10**9

        def chunk(token: str, lock_now: int = now) -> PruneChunk:
            return PruneChunk(
                before=cut, limit=2, lock=PRUNE_LOCK, token=token, lock_now=lock_now, now=now
            )

        # Without the prune lock a chunk writes nothing.
        assert store.prune_runs(chunk("kit-nobody")) is None
        assert locks.take_lock(PRUNE_LOCK, "kit-pruner", now=now, until=now + _HOUR * 10**9)
        assert store.prune_runs(chunk("kit-other")) is None, "a chunk ran under another's lock"
        assert store.prune_runs(chunk("kit-pruner", now + 2 * _HOUR * 10**9)) is None, (
            "a chunk ran on an expired lock"
        )
        assert cairnflow_kit.run_count() == 8
        finish = {ref.id: cairnflow_kit.stored(ref).finished_at for ref in old}
        sizes: list[int] = []
        pruned: list[str] = []
        while True:
            done = store.prune_runs(chunk("kit-pruner"))
            assert done is not None
            sizes.append(len(done))
            pruned.extend(done)
            if not done:
                break
        assert sizes == [2, 2, 1, 0], f"chunks of at most 2 runs, got {sizes}"
        assert sorted(pruned) == sorted(finish), "exactly the old finished runs go"
        order = [finish[i] or 0 for i in pruned]
        assert order == sorted(order), "oldest finish first"
        assert _gone(cairnflow_kit, old)
        for kept in (*young, unfinished):
            assert cairnflow_kit.store.get_run(kept.id) is not None, "a young or live run went"
        assert cairnflow_kit.stored(unfinished).state == "active"

    @proves(Cap.RETENTION)
    def test_running_clients_prune_old_runs_one_client_at_a_time(self, cairnflow_kit: Kit) -> None:
        wf = _pair("kit-prune-bg")
        old = _finished(cairnflow_kit, wf, 24, behind=2 * _DAY)
        young = _finished(cairnflow_kit, wf, 2)
        shared = _shared()
        for store in cairnflow_kit.peer_stores(2):
            cairnflow_kit.client(
                wf,
                store=_Watched(store, shared),
                prune_after=_DAY,
                prune_interval=0.05,
                prune_chunk=3,
            )
        # Gone once the last chunk committed; recorded when prune_runs returned to the watcher.
        wait_until(
            lambda: _gone(cairnflow_kit, old) and _recorded(shared) >= len(old),
            TIMEOUT,
            "the old runs to be pruned",
        )
        with shared["lock"]:
            chunks = list(shared["chunks"])
        assert shared["overlaps"] == 0, "two clients pruned at once"
        assert all(done is not None and len(done) <= 3 for _, done in chunks), chunks
        assert sum(len(done or ()) for _, done in chunks) == len(old)
        for kept in young:
            assert cairnflow_kit.store.get_run(kept.id) is not None, "a young run was pruned"

    @proves(Cap.RETENTION, requires=[Cap.LOCKS])
    def test_a_killed_pruners_lock_expires_and_another_client_goes_on(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-prune-killed")
        old = _finished(cairnflow_kit, wf, 7, behind=2 * _DAY)
        store, _ = _facets(cairnflow_kit)
        # The killed pruner: it took the lock, pruned one chunk, and died holding it (a lock is
        # a row, not a session: a dead process leaves it until it expires).
        locks = cf.Locks(cairnflow_kit.store)
        token = locks.lock(PRUNE_LOCK, 1.0)
        assert token is not None
        held = locks.holder(PRUNE_LOCK)
        assert held is not None
        now = time.time_ns()
        first = store.prune_runs(
            PruneChunk(
                before=now - _DAY * 10**9,
                limit=2,
                lock=PRUNE_LOCK,
                token=token,
                lock_now=locks.now(),
                now=now,
            )
        )
        assert first is not None
        assert len(first) == 2
        shared = _shared()
        cairnflow_kit.client(
            wf,
            store=_Watched(cairnflow_kit.peer_stores(1)[0], shared),
            prune_after=_DAY,
            prune_interval=0.05,
            prune_chunk=2,
        )

        # The runs are gone once the successor's last chunk committed; the watched store
        # records that chunk a moment later, when prune_runs returns to it.
        wait_until(
            lambda: _gone(cairnflow_kit, old) and _recorded(shared) >= len(old) - 2,
            TIMEOUT,
            "a successor to prune the rest",
        )
        with shared["lock"]:
            chunks = list(shared["chunks"])
        assert sum(len(done or ()) for _, done in chunks) == len(old) - 2
        for chunk, done in chunks:
            assert chunk.token != token
            if done:
                assert chunk.lock_now >= held.expires_at, "pruned before the dead lock expired"
        after = locks.holder(PRUNE_LOCK)
        assert after is None or after.token != token

    @proves(Cap.RETENTION, Cap.MULTI_PROCESS)
    def test_a_pruner_process_killed_holding_the_lock_is_succeeded_once_it_expires(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-prune-process")
        old = _finished(cairnflow_kit, wf, 150, behind=2 * _DAY)
        _, locks = _facets(cairnflow_kit)
        # One run per chunk, each followed by a rest: the pass outlasts the wait below.
        worker = cairnflow_kit.processes.spawn("kit-pruner", lease=2.0, prune=(_DAY, 1))
        wait_until(
            lambda: (
                locks.read_lock(PRUNE_LOCK) is not None and cairnflow_kit.run_count() < len(old)
            ),
            TIMEOUT,
            "the pruner process to hold the lock and prune",
        )
        worker.kill()  # SIGKILL: its lock row stays behind
        held = locks.read_lock(PRUNE_LOCK)
        assert held is not None, "the pruner process finished its pass before it was killed"
        assert not _gone(cairnflow_kit, old), "the pruner process pruned everything already"
        shared = _shared()
        cairnflow_kit.client(
            wf,
            store=_Watched(cairnflow_kit.open_store(), shared),
            prune_after=_DAY,
            prune_interval=0.05,
            prune_chunk=20,
        )
        wait_until(
            lambda: _gone(cairnflow_kit, old) and _recorded(shared) > 0,
            TIMEOUT,
            "a successor to prune the rest",
        )
        with shared["lock"]:
            chunks = list(shared["chunks"])
        assert chunks, "the successor pruned nothing"
        for chunk, done in chunks:
            assert chunk.token != held.token
            if done:
                assert chunk.lock_now >= held.expires_at, "pruned before the dead lock expired"


class ArchiveTests:
    """``Cap.ARCHIVE``: pruned runs move to cold tables, in one place, and read back."""

    @proves(Cap.ARCHIVE, Cap.RETENTION)
    def test_an_archived_run_is_in_exactly_one_place_and_reads_back_with_its_outputs(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-archive")
        old = _finished(cairnflow_kit, wf, 3, behind=2 * _DAY)
        young = _finished(cairnflow_kit, wf, 1)
        before = {ref.id: cairnflow_kit.store.get_run(ref.id) for ref in old}
        shared = _shared()
        pruner = cairnflow_kit.client(
            wf,
            start=False,
            store=_Watched(cairnflow_kit.store, shared),
            prune_after=_DAY,
            archive=True,
            prune_chunk=2,
        )
        assert pruner.archived_runs().runs == ()
        assert pruner.prune() == 3
        assert [len(done or ()) for _, done in shared["chunks"]] == [2, 1, 0]
        page = pruner.archived_runs()
        archived = {info.id: info for info in page.runs}
        assert set(archived) == {ref.id for ref in old}, "exactly the old runs are archived"
        assert page.cursor is None
        for ref in old:
            assert cairnflow_kit.store.get_run(ref.id) is None, "an archived run is in two places"
            info = archived[ref.id]
            stored = before[ref.id]
            assert stored is not None
            assert info.status is cf.Status.SUCCEEDED
            assert info.finished_at_ns == stored.finished_at
            assert info.payload == cairnflow_kit.codec.decode(stored.payload)
            n = info.payload
            assert info.steps["a"].output == n + 1
            assert info.steps["b"].output == {"b": (n + 1) * 10}
            assert info.result == {"b": (n + 1) * 10}
        assert cairnflow_kit.store.get_run(young[0].id) is not None
        assert young[0].id not in archived
        assert pruner.prune() == 0  # nothing old is left

    @proves(Cap.ARCHIVE, Cap.RETENTION)
    def test_archived_runs_are_read_newest_finish_first_page_by_page(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = _pair("kit-archive-pages")
        clock = _Behind(10 * _DAY)
        client = cairnflow_kit.client(wf, clock=clock)
        refs: list[cf.RunRef] = []
        for i in range(5):
            clock.seconds = (10 - i) * _DAY  # each run finishes a day after the one before
            ref = client.enqueue(wf.name, i)
            assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
            refs.append(ref)
        client.stop()
        finish = {ref.id: cairnflow_kit.stored(ref).finished_at for ref in refs}
        pruner = cairnflow_kit.client(wf, start=False, prune_after=_DAY, archive=True)
        assert pruner.prune() == 5
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = pruner.archived_runs(limit=2, cursor=cursor)
            assert len(page.runs) <= 2
            seen.extend(info.id for info in page.runs)
            pages += 1
            cursor = page.cursor
            if cursor is None:
                break
        assert pages == 3
        assert seen == sorted(finish, key=lambda i: finish[i] or 0, reverse=True), "newest first"
        with_bad_cursor = _raises(lambda: pruner.archived_runs(cursor="r12"))
        assert isinstance(with_bad_cursor, cf.InvalidQuery)


def _raises(act: Any) -> BaseException | None:
    try:
        act()
    except BaseException as error:  # noqa: BLE001 - returned to the test to judge
        return error
    return None
