"""Run deadlines (RUN_TIMEOUT): a run past its workflow's run_timeout fails, once.

Every client judges the runs of its workflows at each housekeeping pass, so the
store must end a run once however many judge it at the same moment: the test at
the SPI races peer stores on one overdue run. Through a client, a run whose step
stalls past the deadline fails with ``RunTimeout``, the stalled step is
cancelled (its late outcome refused) and the step after it never starts.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import cairnflow as cf
from cairnflow import Cap, ErrorInfo
from cairnflow.store import RunDeadlines

from .._kit import Kit
from .._markers import proves
from ._shared import TIMEOUT

__all__ = ["RunTimeoutTests"]


class RunTimeoutTests:
    """``Cap.RUN_TIMEOUT``: a run past its deadline fails, its steps cancelled, judged once."""

    @proves(Cap.RUN_TIMEOUT, Cap.CANCEL)
    def test_a_run_past_its_deadline_fails_and_its_steps_are_cancelled(
        self, cairnflow_kit: Kit
    ) -> None:
        started = threading.Event()
        release = threading.Event()
        returned = threading.Event()
        after_ran: list[int] = []
        wf = cf.Workflow("kit-run-timeout", run_timeout=1.0)

        @wf.step
        def stall(ctx: cf.StepContext, data: Any) -> str:
            started.set()
            release.wait(TIMEOUT)  # stalled past the run's deadline
            returned.set()
            return "late"

        @wf.step(after=[stall])
        def after(ctx: cf.StepContext, data: Any) -> int:
            after_ran.append(1)
            return 1

        client = cairnflow_kit.client(wf, lease=1, interrupt=False)
        ref = client.enqueue("kit-run-timeout")
        assert started.wait(TIMEOUT)
        info = client.wait(ref, timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert info.error.type == "RunTimeout"
        assert info.steps["stall"].status is cf.StepStatus.CANCELLED
        assert info.steps["after"].status is cf.StepStatus.CANCELLED
        finished_at = info.finished_at_ns
        release.set()  # the stalled attempt returns: its outcome is refused
        assert returned.wait(TIMEOUT)
        client.stop(timeout=TIMEOUT)
        again = client.info(ref)
        assert again.status is cf.Status.FAILED
        assert again.finished_at_ns == finished_at
        assert again.steps["stall"].status is cf.StepStatus.CANCELLED
        assert after_ran == [], "a step of a timed-out run started"

    @proves(Cap.RUN_TIMEOUT)
    def test_an_overdue_run_is_failed_once_by_racing_judges(self, cairnflow_kit: Kit) -> None:
        wf = cf.Workflow("kit-deadline-spi", steps=[cf.Step("a", lambda c, d: d)])
        client = cairnflow_kit.client(wf, start=False)
        ref = client.enqueue("kit-deadline-spi")
        other = client.enqueue("kit-deadline-spi", delay=3600)  # due in an hour: not overdue
        run_at = cairnflow_kit.stored(ref).run_at
        error = ErrorInfo(type="RunTimeout", message="kit: past its deadline")
        judges = cairnflow_kit.peer_stores(4)
        for store in judges:
            assert isinstance(store, RunDeadlines), "a store declaring RUN_TIMEOUT has it"
        first = judges[0]
        assert isinstance(first, RunDeadlines)
        now = time.time_ns()
        assert first.time_out_runs("kit-deadline-spi", run_at - 1, error, now, 10) == []
        ended: list[list[str]] = []
        barrier = threading.Barrier(len(judges))

        def judge(store: object) -> None:
            assert isinstance(store, RunDeadlines)
            barrier.wait(TIMEOUT)
            ended.append(store.time_out_runs("kit-deadline-spi", run_at, error, now, 10))

        threads = [threading.Thread(target=judge, args=(peer,)) for peer in judges]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
        assert sorted(run for runs in ended for run in runs) == [ref.id], "judged once"
        info = client.info(ref)
        assert info.status is cf.Status.FAILED
        assert info.error is not None
        assert (info.error.type, info.error.message) == ("RunTimeout", "kit: past its deadline")
        assert info.steps["a"].status is cf.StepStatus.CANCELLED
        assert client.info(other).status is not cf.Status.FAILED
        assert first.time_out_runs("kit-deadline-spi", run_at, error, now, 10) == []
