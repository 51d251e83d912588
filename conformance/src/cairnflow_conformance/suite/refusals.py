"""Refusals: what a store does not declare, the client refuses, and nothing is written.

Each check runs only on a store that does *not* declare its capability (a store
that declares it runs the tests that prove it instead). The client must raise
:class:`~cairnflow.Unsupported` naming the capability, before any write: the
store, read through its mandatory SPI, still holds no run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import cairnflow as cf
from cairnflow import Cap

from .._kit import Kit
from .._markers import refuses
from ._shared import TIMEOUT

__all__ = ["REFUSALS", "STEP_REFUSALS", "Refusal", "RefusalTests"]


def _plain() -> cf.Workflow:
    return cf.Workflow("kit-plain", steps=[cf.Step("a", lambda c, d: d)])


def _idle(kit: Kit, *workflows: cf.Workflow) -> cf.Client:
    return kit.client(_plain(), *workflows, start=False)


def _started(kit: Kit) -> cf.Client:
    return kit.client(_plain())


def _stopped(kit: Kit) -> cf.Client:
    client = kit.client(_plain())
    client.stop()
    return client


def _needs(cap: Cap, build: Callable[[cf.Workflow], object]) -> Callable[[Kit], None]:
    """A refusal at ``start()``, then at ``register()`` on a running client."""

    def act(kit: Kit) -> None:
        needy = cf.Workflow("kit-needy")
        build(needy)
        client = kit.client(needy, start=False)
        with pytest.raises(cf.Unsupported) as caught:
            client.start()
        assert caught.value.capability is cap
        assert not client.running, "a client started with a workflow it cannot run"
        # A client that already runs refuses the workflow at register() (raised to the test).
        late = cf.Workflow("kit-needy-late")
        build(late)
        kit.client(_plain()).register(late)

    return act


def _sleep_step(wf: cf.Workflow) -> object:
    return wf.sleep("nap", seconds=1)


def _wait_step(wf: cf.Workflow) -> object:
    return wf.wait("gate", signal="go")


def _branch_wait(wf: cf.Workflow) -> object:
    wf.wait("gate", signal="go", timeout=60, on_timeout="late")
    return wf.step(lambda c, d: d, name="late", branch=True)


def _compensated_step(wf: cf.Workflow) -> object:
    wf.step(lambda c, d: d, name="charge")
    return wf.compensation(for_="charge", name="refund")(lambda c, d: d)


def _retry_step(wf: cf.Workflow) -> object:
    return wf.step(lambda c, d: d, name="r", retry=cf.RetryPolicy(max_attempts=2))


def _timeout_step(wf: cf.Workflow) -> object:
    return wf.step(lambda c, d: d, name="t", timeout=5)


def _until_step(wf: cf.Workflow) -> object:
    # One attempt: the deadline alone is asked for, not Cap.RETRY.
    return wf.step(lambda c, d: d, name="u", retry=cf.RetryPolicy(until=60))


def _discard_step(wf: cf.Workflow) -> object:
    return wf.step(lambda c, d: d, name="d", retry=cf.RetryPolicy(on_exhausted="discard"))


def _max_errors(wf: cf.Workflow) -> object:
    wf.max_errors = 3  # as Workflow(..., max_errors=3) sets it
    return wf.step(lambda c, d: d, name="m")


def _history(wf: cf.Workflow) -> object:
    wf.error_history = 5  # as Workflow(..., error_history=5) sets it
    return wf.step(lambda c, d: d, name="h")


def _on_failure(wf: cf.Workflow) -> object:
    wf.on_failure(print)
    return wf.step(lambda c, d: d, name="f")


def _run_timeout(wf: cf.Workflow) -> object:
    wf.run_timeout = 5.0  # as Workflow(..., run_timeout=5) sets it
    return wf.step(lambda c, d: d, name="t")


def _keyed_step(wf: cf.Workflow) -> object:
    key = cf.Concurrency(key=lambda payload: "kit-k", limit=1)
    return wf.step(lambda c, d: d, name="k", concurrency=key)


def _fifo_key(wf: cf.Workflow) -> object:
    wf.concurrency = cf.Concurrency(key=lambda payload: "kit-k", fifo=True)
    return wf.step(lambda c, d: d, name="f")


def _cron(wf: cf.Workflow, **options: Any) -> object:
    wf.step(lambda c, d: d, name="a")
    return wf.schedule("kit-every-minute", cron="* * * * *", **options)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One operation that needs ``cap``; ``act`` performs it and must be refused."""

    cap: Cap
    id: str
    act: Callable[[Kit], object]


REFUSALS: tuple[Refusal, ...] = (
    Refusal(Cap.IDEMPOTENCY, "enqueue-key", lambda k: _idle(k).enqueue("kit-plain", 1, key="k")),
    Refusal(Cap.DELAYED_START, "enqueue-delay", lambda k: _idle(k).enqueue("kit-plain", delay=5)),
    Refusal(
        Cap.BATCH_ENQUEUE,
        "enqueue-many",
        lambda k: _idle(k).enqueue_many([cf.Job("kit-plain", 1), cf.Job("kit-plain", 2)]),
    ),
    Refusal(
        Cap.TRANSACTIONAL_ENQUEUE,
        "enqueue-tx",
        lambda k: _idle(k).enqueue_tx(object(), "kit-plain", 1),
    ),
    Refusal(Cap.CLOSURE, "submit", lambda k: _idle(k).submit(print, "never printed")),
    Refusal(Cap.SIGNAL, "signal", lambda k: _idle(k).signal("run_kitnosuchrun", "go")),
    Refusal(Cap.SIGNAL, "wait-step", _needs(Cap.SIGNAL, _wait_step)),
    Refusal(Cap.WAIT_BRANCH, "wait-branch", _needs(Cap.WAIT_BRANCH, _branch_wait)),
    Refusal(Cap.COMPENSATION, "compensation", _needs(Cap.COMPENSATION, _compensated_step)),
    Refusal(Cap.CANCEL, "cancel", lambda k: _idle(k).cancel("run_kitnosuchrun")),
    Refusal(Cap.SLEEP, "sleep-step", _needs(Cap.SLEEP, _sleep_step)),
    Refusal(Cap.RETRY, "retry-policy", _needs(Cap.RETRY, _retry_step)),
    Refusal(Cap.STEP_TIMEOUT, "step-timeout", _needs(Cap.STEP_TIMEOUT, _timeout_step)),
    Refusal(Cap.PAYLOAD_LIMIT, "payload-limit", lambda k: cf.Client(k.store, payload_limit=10)),
    Refusal(
        Cap.DATABASE_CLOCK, "database-clock", lambda k: cf.Client(k.store, database_clock=True)
    ),
    Refusal(Cap.RESULT, "result", lambda k: _idle(k).result("run_kitnosuchrun", timeout=1)),
    Refusal(Cap.RUN_QUERY, "runs", lambda k: _idle(k).runs()),
    Refusal(Cap.STATS, "stats", lambda k: _idle(k).stats()),
    Refusal(Cap.SERVERS, "servers", lambda k: _idle(k).servers()),
    Refusal(
        Cap.LABEL_PREFIX,
        "runs-label-prefix",
        lambda k: _idle(k).runs(label_prefix=("tenant", "acme-")),
    ),
    Refusal(Cap.CRON, "schedule-declared", _needs(Cap.CRON, _cron)),
    Refusal(
        Cap.CRON,
        "add-schedule",
        lambda k: _idle(k).add_schedule("kit-plain", cf.Schedule("s", "* * * * *")),
    ),
    Refusal(
        Cap.OVERLAP_SKIP,
        "overlap-skip",
        _needs(Cap.OVERLAP_SKIP, lambda wf: _cron(wf, overlap=cf.Overlap.SKIP)),
    ),
    Refusal(
        Cap.SCHEDULE_WINDOW,
        "schedule-window",
        _needs(Cap.SCHEDULE_WINDOW, lambda wf: _cron(wf, windows=[cf.Window(days="mon-fri")])),
    ),
    Refusal(
        Cap.SCHEDULE_WHEN,
        "schedule-when",
        _needs(Cap.SCHEDULE_WHEN, lambda wf: _cron(wf, when=lambda tick: True)),
    ),
    Refusal(Cap.SCHEDULE_PAUSE, "pause-schedule", lambda k: _idle(k).pause_schedule("w", "s")),
    Refusal(Cap.SCHEDULE_PAUSE, "resume-schedule", lambda k: _idle(k).resume_schedule("w", "s")),
    Refusal(
        Cap.SCHEDULE_TRIGGER, "trigger-schedule", lambda k: _idle(k).trigger_schedule("w", "s")
    ),
    Refusal(Cap.SCHEDULE_LIST, "schedules", lambda k: _idle(k).schedules()),
    Refusal(
        Cap.SCHEDULE_HISTORY, "schedule-history", lambda k: _idle(k).schedule_history("w", "s")
    ),
    Refusal(Cap.TICK_EVENTS, "on-tick", lambda k: cf.Client(k.store, on_tick=print)),
    Refusal(
        Cap.LEADER_ELECTION,
        "leader-election",
        lambda k: cf.Client(k.store, leader_election=True),
    ),
    Refusal(Cap.QUEUE, "client-queues", lambda k: cf.Client(k.store, queues=["kit-a"])),
    Refusal(
        Cap.QUEUE_OVERRIDE,
        "enqueue-queue",
        lambda k: _idle(k).enqueue("kit-plain", 1, queue="kit-elsewhere"),
    ),
    Refusal(
        Cap.QUEUE_LIMIT_GLOBAL,
        "queue-limit",
        lambda k: cf.Client(k.store, queues=[cf.QueueConfig("kit-a", limit=2)]),
    ),
    Refusal(
        Cap.RATE_LIMIT,
        "queue-rate",
        lambda k: cf.Client(k.store, queues=[cf.QueueConfig("kit-a", rate=cf.Rate(5))]),
    ),
    Refusal(Cap.RATE_LIMIT, "rate-limiter", lambda k: cf.RateLimiter(k.store)),
    Refusal(Cap.RATE_LIMIT, "client-take", lambda k: _idle(k).take("kit-bucket", cf.Rate(5))),
    Refusal(
        Cap.RATE_LIMIT, "client-try-take", lambda k: _idle(k).try_take("kit-bucket", cf.Rate(5))
    ),
    Refusal(Cap.CONCURRENCY_KEY, "concurrency-key", _needs(Cap.CONCURRENCY_KEY, _keyed_step)),
    Refusal(Cap.KEY_FIFO, "fifo-key", _needs(Cap.KEY_FIFO, _fifo_key)),
    Refusal(Cap.PAUSE_QUEUE, "pause-queue", lambda k: _idle(k).pause_queue("kit-q")),
    Refusal(Cap.PAUSE_QUEUE, "resume-queue", lambda k: _idle(k).resume_queue("kit-q")),
    Refusal(Cap.PAUSE_QUEUE, "pauses", lambda k: _idle(k).pauses()),
    Refusal(Cap.PAUSE_WORKFLOW, "pause-workflow", lambda k: _idle(k).pause_workflow("kit-plain")),
    Refusal(Cap.PAUSE_WORKFLOW, "resume-workflow", lambda k: _idle(k).resume_workflow("kit-plain")),
    Refusal(Cap.DRAIN, "drain", lambda k: _started(k).drain(timeout=1)),
    Refusal(Cap.DRAIN, "stop-when-idle", lambda k: _started(k).stop_when_idle(1)),
    Refusal(Cap.DRAIN, "recycle", lambda k: cf.Client(k.store, recycle=cf.Recycle(jobs=1))),
    Refusal(Cap.SHUTDOWN_REQUEUE, "wait-stopped", lambda k: _stopped(k).wait_stopped(1)),
    Refusal(
        Cap.HEADERS,
        "enqueue-headers",
        lambda k: _idle(k).enqueue("kit-plain", 1, headers={"a": "b"}),
    ),
    Refusal(
        Cap.HEADERS, "enqueue-hook", lambda k: cf.Client(k.store, enqueue_hooks=[lambda w, h: None])
    ),
    Refusal(
        Cap.TENANT, "enqueue-tenant", lambda k: _idle(k).enqueue("kit-plain", 1, tenant="acme")
    ),
    Refusal(Cap.TENANT, "runs-tenant", lambda k: _idle(k).runs(tenant="acme")),
    Refusal(Cap.TENANT, "schedule-tenant", _needs(Cap.TENANT, lambda wf: _cron(wf, tenant="acme"))),
    Refusal(
        Cap.TENANT,
        "add-schedule-tenant",
        lambda k: _idle(k).add_schedule("kit-plain", cf.Schedule("s", "* * * * *", tenant="acme")),
    ),
    Refusal(Cap.ENQUEUE_ONLY, "enqueue-only", lambda k: cf.Client(k.store, enqueue_only=True)),
    Refusal(Cap.JOURNAL, "journal", lambda k: cf.Journal(k.store)),
    Refusal(Cap.LOCKS, "locks", lambda k: cf.Locks(k.store)),
    Refusal(Cap.LOCKS, "client-lock", lambda k: _idle(k).lock("kit-lock", 5)),
    Refusal(Cap.LOCKS, "client-unlock", lambda k: _idle(k).unlock("kit-lock", "token")),
    Refusal(Cap.LOCKS, "client-extend-lock", lambda k: _idle(k).extend_lock("kit-lock", "t", 5)),
    Refusal(
        Cap.RESCHEDULE, "reschedule", lambda k: _idle(k).reschedule("run_kitnosuchrun", delay=5)
    ),
    Refusal(Cap.RETRY_RUN, "retry-run", lambda k: _idle(k).retry_run("run_kitnosuchrun")),
    Refusal(Cap.JOB_RETRY, "retry-step", lambda k: _idle(k).retry_step("run_kitnosuchrun", "a")),
    Refusal(Cap.DELETE_RUN, "delete-runs", lambda k: _idle(k).delete_runs("run_kitnosuchrun")),
    Refusal(
        Cap.DELETE_RUN, "delete-runs-filter", lambda k: _idle(k).delete_runs(workflow="kit-plain")
    ),
    Refusal(Cap.CANCEL_ALL, "cancel-runs", lambda k: _idle(k).cancel_runs(workflow="kit-plain")),
    Refusal(
        Cap.CANCEL_STEP, "cancel-step", lambda k: _idle(k).cancel_step("run_kitnosuchrun", "a")
    ),
    Refusal(Cap.FORCE_RUN, "force-run", lambda k: _idle(k).force_run("run_kitnosuchrun")),
    Refusal(Cap.DUE_QUERY, "next-due", lambda k: _idle(k).next_due()),
    Refusal(Cap.RETRY_UNTIL, "retry-until", _needs(Cap.RETRY_UNTIL, _until_step)),
    Refusal(Cap.DISCARD, "discard", _needs(Cap.DISCARD, _discard_step)),
    Refusal(Cap.RETRY_MAX_ERRORS, "max-errors", _needs(Cap.RETRY_MAX_ERRORS, _max_errors)),
    Refusal(Cap.ERROR_HISTORY, "errors", lambda k: _idle(k).errors("run_kitnosuchrun")),
    Refusal(Cap.RETENTION, "prune-after", lambda k: k.client(_plain(), prune_after=3600)),
    Refusal(Cap.RETENTION, "prune", lambda k: _idle(k).prune(older_than=3600)),
    Refusal(
        Cap.ARCHIVE,
        "archive",
        lambda k: k.client(_plain(), start=False, prune_after=3600, archive=True),
    ),
    Refusal(Cap.ARCHIVE, "archived-runs", lambda k: _idle(k).archived_runs()),
    Refusal(
        Cap.ERROR_HISTORY, "client-error-history", lambda k: cf.Client(k.store, error_history=5)
    ),
    Refusal(Cap.ERROR_HISTORY, "workflow-error-history", _needs(Cap.ERROR_HISTORY, _history)),
    Refusal(Cap.RUN_TIMEOUT, "run-timeout", _needs(Cap.RUN_TIMEOUT, _run_timeout)),
    Refusal(Cap.STEP_HISTORY, "step-history", lambda k: _idle(k).step_history("run_kitnosuchrun")),
    Refusal(Cap.LIFECYCLE, "on-event", lambda k: _idle(k).on_event(print)),
    Refusal(Cap.LIFECYCLE, "on-failure", _needs(Cap.LIFECYCLE, _on_failure)),
)
"""Every client API whose capability a store may leave out."""


def _snoozes(ctx: cf.StepContext, data: Any) -> None:
    raise cf.Snooze(1)


def _beats(ctx: cf.StepContext, data: Any) -> None:
    ctx.heartbeat()


def _reports(ctx: cf.StepContext, data: Any) -> None:
    ctx.progress({"done": 1})


def _memoises(ctx: cf.StepContext, data: Any) -> None:
    ctx.memo("kit-memo", print, "never printed")


def _locks(ctx: cf.StepContext, data: Any) -> None:
    ctx.lock("kit-lock", 5)


def _takes(ctx: cf.StepContext, data: Any) -> None:
    ctx.try_take("kit-bucket", cf.Rate(5))


STEP_REFUSALS: tuple[tuple[Cap, str, Callable[[cf.StepContext, Any], None]], ...] = (
    (Cap.SNOOZE, "snooze", _snoozes),
    (Cap.HEARTBEAT, "heartbeat", _beats),
    (Cap.PROGRESS, "progress", _reports),
    (Cap.JOURNAL, "memo", _memoises),
    (Cap.LOCKS, "lock", _locks),
    (Cap.RATE_LIMIT, "take", _takes),
)
"""What a step asks of the store while it runs; refused by failing the step."""


class RefusalTests:
    """Undeclared capabilities are refused, loudly and before any write."""

    @pytest.mark.parametrize(
        "refusal", [pytest.param(r, marks=refuses(r.cap), id=f"{r.cap}-{r.id}") for r in REFUSALS]
    )
    def test_an_undeclared_capability_is_refused_and_nothing_is_written(
        self, cairnflow_kit: Kit, refusal: Refusal
    ) -> None:
        with pytest.raises(cf.Unsupported, match=refusal.cap.name) as caught:
            refusal.act(cairnflow_kit)
        assert caught.value.capability is refusal.cap
        assert cairnflow_kit.run_count() == 0, "a refused operation wrote a run"

    @pytest.mark.parametrize(
        ("cap", "code"),
        [
            pytest.param(cap, code, marks=refuses(cap), id=str(cap))
            for cap, _, code in STEP_REFUSALS
        ],
    )
    def test_an_undeclared_step_capability_fails_the_step(
        self, cairnflow_kit: Kit, cap: Cap, code: Callable[[cf.StepContext, Any], None]
    ) -> None:
        wf = cf.Workflow("kit-asks", steps=[cf.Step("asks", code)])
        client = cairnflow_kit.client(wf)
        info = client.wait(client.enqueue("kit-asks"), timeout=TIMEOUT)
        assert info.status is cf.Status.FAILED
        error = info.steps["asks"].error
        assert error is not None
        assert (error.type, info.steps["asks"].attempts) == ("Unsupported", 1)
        assert cap.name in error.message
