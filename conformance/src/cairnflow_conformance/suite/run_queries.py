"""Finding runs (#17): every filter of ``Client.runs`` (RUN_QUERY), labels by prefix (LABEL_PREFIX).

Each test builds runs in known states and asserts on what the store lists:
whole pages of the status asked for (a store that filtered on "active" and
thinned the page afterwards fails them), cursors that neither repeat nor skip
a run while others are created, counts, ranges, and the failed step named.
"""

from __future__ import annotations

import re
import threading

import pytest

import cairnflow as cf
from cairnflow import Cap

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["LabelPrefixTests", "RunFilterTests"]


def _ids(listing: cf.RunList) -> list[str]:
    return [run.id for run in listing.runs]


def _every_page(client: cf.Client, limit: int, **filters: object) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = client.runs(limit=limit, cursor=cursor, **filters)  # type: ignore[arg-type]
        pages.append(_ids(page))
        cursor = page.cursor
        if cursor is None:
            return pages


class RunFilterTests:
    """``Cap.RUN_QUERY``: filters by status (derived ones exactly), queue, ranges; counts."""

    @proves(Cap.RUN_QUERY)
    def test_active_statuses_are_filtered_exactly_in_full_pages(self, cairnflow_kit: Kit) -> None:
        release = threading.Event()
        started = threading.Semaphore(0)
        busy = cf.Workflow("kit-busy")

        @busy.step
        def hold(ctx: cf.StepContext, n: int) -> int:
            started.release()
            release.wait(TIMEOUT)
            return n

        idle = cf.Workflow("kit-idle", steps=[cf.Step("a", lambda c, d: d)])
        worker = cairnflow_kit.client(busy, workers=4)
        enqueuer = cairnflow_kit.client(idle, start=False)  # nobody runs kit-idle
        try:
            queued = [enqueuer.enqueue("kit-idle", n) for n in range(3)]
            running = [worker.enqueue("kit-busy", n) for n in range(3)]
            for _ in running:
                assert started.acquire(timeout=TIMEOUT), "a step of kit-busy never started"
            pending = []
            if cairnflow_kit.declares(Cap.DELAYED_START):
                pending = [enqueuer.enqueue("kit-idle", n, delay=3600) for n in range(2)]
            # Newer runs of other statuses lie between the queued ones and the page's end:
            # a page of 2 queued runs is 2 queued runs, not 2 active runs thinned.
            first = enqueuer.runs(status="queued", limit=2, count=True)
            assert _ids(first) == [r.id for r in reversed(queued)][:2]
            assert first.total == 3
            assert first.cursor is not None
            rest = enqueuer.runs(status="queued", limit=2, cursor=first.cursor)
            assert _ids(rest) == [queued[0].id]
            assert rest.cursor is None
            assert all(r.status is cf.Status.QUEUED for r in (*first.runs, *rest.runs))
            listed = enqueuer.runs(status="running", limit=100, count=True)
            assert sorted(_ids(listed)) == sorted(r.id for r in running)
            assert listed.total == 3
            assert _ids(enqueuer.runs(status="pending")) == [r.id for r in reversed(pending)]
            both = enqueuer.runs(status=["queued", "pending"], limit=100)
            assert sorted(_ids(both)) == sorted(r.id for r in [*queued, *pending])
            assert enqueuer.runs(status="waiting").runs == ()
            assert enqueuer.runs(status="succeeded", count=True).total == 0
            unfinished = [s for s in cf.Status if not s.finished]
            assert enqueuer.runs(status=unfinished, count=True).total == 3 + 3 + len(pending)
        finally:
            release.set()
        for ref in running:
            assert worker.wait(ref, timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert sorted(_ids(worker.runs(status="succeeded"))) == sorted(r.id for r in running)

    @proves(Cap.RUN_QUERY, requires=[Cap.SIGNAL])  # no run can wait without signals
    def test_waiting_runs_are_listed_as_waiting(self, cairnflow_kit: Kit) -> None:
        gated = cf.Workflow("kit-gated")
        gated.wait("gate", signal="go")
        client = cairnflow_kit.client(gated)
        refs = [client.enqueue("kit-gated", n) for n in range(2)]
        for ref in refs:
            _until_status(client, ref, cf.Status.WAITING)
        assert sorted(_ids(client.runs(status="waiting"))) == sorted(r.id for r in refs)
        assert client.runs(status=["queued", "running", "pending"]).runs == ()
        client.signal(refs[0], "go", 1)
        assert client.wait(refs[0], timeout=TIMEOUT).status is cf.Status.SUCCEEDED
        assert _ids(client.runs(status="waiting")) == [refs[1].id]

    @proves(Cap.RUN_QUERY)
    def test_runs_are_filtered_by_queue_labels_and_time_ranges(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-ranged", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf)
        refs = [
            client.enqueue("kit-ranged", n, labels={"team": "a" if n % 2 else "b"})
            for n in range(6)
        ]
        for ref in refs:
            client.wait(ref, timeout=TIMEOUT)
        listed = client.runs(workflow="kit-ranged", limit=100)
        assert _ids(listed) == [r.id for r in reversed(refs)]
        created = sorted(r.created_at_ns for r in listed.runs)
        since, until = created[2], created[4]
        within = client.runs(created_since=since, created_until=until, limit=100, count=True)
        expected = sorted(r.id for r in listed.runs if since <= r.created_at_ns < until)
        assert sorted(_ids(within)) == expected
        assert within.total == len(expected)
        finished = sorted(r.finished_at_ns or 0 for r in listed.runs)
        ended = client.runs(finished_since=finished[3], limit=100)
        assert sorted(_ids(ended)) == sorted(
            r.id for r in listed.runs if (r.finished_at_ns or 0) >= finished[3]
        )
        team_a = client.runs(labels={"team": "a"}, limit=100, count=True)
        assert _ids(team_a) == [refs[n].id for n in (5, 3, 1)]
        assert team_a.total == 3
        assert client.runs(labels={"team": "c"}, count=True).total == 0
        assert _ids(client.runs(queue="default", workflow="kit-ranged", limit=100)) == _ids(listed)
        assert client.runs(queue="kit-elsewhere").runs == ()
        if cairnflow_kit.declares(Cap.QUEUE_OVERRIDE):
            idle = cairnflow_kit.client(wf, start=False)
            moved = idle.enqueue("kit-ranged", 9, queue="kit-elsewhere")
            assert _ids(client.runs(queue="kit-elsewhere")) == [moved.id]
            assert client.runs(queue="kit-elsewhere", status="queued", count=True).total == 1

    @proves(Cap.RUN_QUERY)
    def test_a_listing_names_the_failed_step_and_sums_up_its_error(
        self, cairnflow_kit: Kit
    ) -> None:
        wf = cf.Workflow("kit-broken")

        @wf.step
        def fine(ctx: cf.StepContext, n: int) -> int:
            return n

        @wf.step(after=[fine])
        def broken(ctx: cf.StepContext, n: int) -> int:
            raise cf.Permanent(ValueError(f"card {n} declined\nsecond line of detail"))

        client = cairnflow_kit.client(wf)
        ref = client.enqueue("kit-broken", 7)
        assert client.wait(ref, timeout=TIMEOUT).status is cf.Status.FAILED
        (run,) = client.runs(workflow="kit-broken", status="failed").runs
        assert run.failed_step == "broken"
        assert run.error_summary == "ValueError: card 7 declined"
        ok = cf.Workflow("kit-fine", steps=[cf.Step("a", lambda c, d: d)])
        other = cairnflow_kit.client(ok)
        good = other.enqueue("kit-fine", 1)
        other.wait(good, timeout=TIMEOUT)
        (fine_run,) = other.runs(workflow="kit-fine").runs
        assert fine_run.failed_step is None
        assert fine_run.error_summary is None

    @proves(Cap.RUN_QUERY)
    def test_pages_neither_repeat_nor_skip_while_runs_are_created(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-paged", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        refs = [client.enqueue("kit-paged", n) for n in range(7)]
        first = client.runs(workflow="kit-paged", limit=3)
        newer = [client.enqueue("kit-paged", n) for n in range(4)]  # between two pages
        seen = _ids(first)
        cursor = first.cursor
        while cursor is not None:
            page = client.runs(workflow="kit-paged", limit=3, cursor=cursor)
            seen += _ids(page)
            cursor = page.cursor
        assert seen == [r.id for r in reversed(refs)]
        assert client.runs(workflow="kit-paged", count=True).total == len(refs) + len(newer)
        pages = _every_page(client, 4, workflow="kit-paged")
        assert [len(p) for p in pages] == [4, 4, 3]

    @proves(Cap.RUN_QUERY)
    def test_a_malformed_filter_is_refused_naming_what_is_wrong(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-plain", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        client.enqueue("kit-plain", 1)
        bad: list[tuple[dict[str, object], str]] = [
            ({"status": "finished"}, "unknown run status 'finished'"),
            ({"limit": 0}, "limit must be an int from 1 to 1000"),
            ({"cursor": "page-2"}, "invalid run cursor 'page-2'"),
            ({"created_since": 10, "created_until": 5}, "created_since (10) is after"),
            ({"finished_since": -1}, "finished_since must be an int >= 0"),
            ({"label_prefix": "tenant"}, "label_prefix must be a (label name, prefix) pair"),
        ]
        for filters, message in bad:
            with pytest.raises(cf.InvalidQuery, match=re.escape(message)):
                client.runs(**filters)  # type: ignore[arg-type]
        with pytest.raises(cf.InvalidName, match="invalid label key 'Team'"):
            client.runs(labels={"Team": "a"})
        with pytest.raises(cf.InvalidName, match="invalid queue name"):
            client.runs(queue="no spaces")
        assert cairnflow_kit.run_count() == 1


class LabelPrefixTests:
    """``Cap.LABEL_PREFIX``: runs found by the start of a label's value, exactly."""

    @proves(Cap.LABEL_PREFIX)
    def test_runs_are_found_by_label_prefix_newest_first(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-tenants")

        @wf.step
        def check(ctx: cf.StepContext, n: int) -> int:
            if n % 2:
                raise cf.Permanent("odd")
            return n

        client = cairnflow_kit.client(wf)
        values = [
            "acme-1", "acme-12", "acme-2", "acm", "ACME-1", "acme_1", "acme%x", "acme-1é",
            "é-acme", "acme-\U0010ffff",
        ]  # fmt: skip
        refs = {
            value: client.enqueue("kit-tenants", n, labels={"tenant": value, "n": str(n)})
            for n, value in enumerate(values)
        }
        decoy = client.enqueue("kit-tenants", 100, labels={"owner": "acme-1"})
        for ref in [*refs.values(), decoy]:
            client.wait(ref, timeout=TIMEOUT)

        def found(prefix: str, **filters: object) -> list[str]:
            page = client.runs(label_prefix=("tenant", prefix), limit=100, **filters)  # type: ignore[arg-type]
            return [run.labels["tenant"] for run in page.runs]

        # Newest first; case, '_' and '%' are matched as themselves (no LIKE wildcards).
        assert found("acme-1") == ["acme-1é", "acme-12", "acme-1"]
        assert found("acme_") == ["acme_1"]
        assert found("acme%") == ["acme%x"]
        assert found("ACME") == ["ACME-1"]
        assert found("é") == ["é-acme"]
        assert found("acme-\U0010ffff") == ["acme-\U0010ffff"]
        assert found("") == list(reversed(values))  # every run with the label, not the decoy
        assert found("acme-", status="failed") == [
            v for v in reversed(values) if v.startswith("acme-") and values.index(v) % 2
        ]
        both = client.runs(label_prefix=("tenant", "acme"), labels={"n": "1"}, count=True)
        assert [r.labels["tenant"] for r in both.runs] == ["acme-12"]
        assert both.total == 1
        counted = client.runs(label_prefix=("tenant", "acme-"), limit=2, count=True)
        assert counted.total == 5
        assert len(counted.runs) == 2
        pages = _every_page(client, 2, label_prefix=("tenant", "acme-"))
        assert [len(p) for p in pages] == [2, 2, 1]
        listed = [run_id for page in pages for run_id in page]
        assert listed == [refs[v].id for v in reversed(values) if v.startswith("acme-")]
        assert client.runs(label_prefix=("owner", "acme")).runs[0].id == decoy.id
        assert client.runs(label_prefix=("tenant", "zeta"), count=True).total == 0


def _until_status(client: cf.Client, ref: cf.RunRef, status: cf.Status) -> None:
    """Wait (bounded) until ``ref`` reads as ``status``."""
    done = threading.Event()
    for _ in range(int(TIMEOUT / 0.02)):
        if client.info(ref).status is status:
            return
        done.wait(0.02)
    raise AssertionError(f"run {ref.id} never became {status}: {client.info(ref).status}")
