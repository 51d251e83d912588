"""Reading runs back: the read model behind ``Client.info``, ``wait``, ``result`` and ``runs``.

It turns what a store keeps (:class:`~cairnflow.store.StoredRun`,
:class:`~cairnflow.store.RunSummary`) into what applications see
(:class:`~cairnflow.RunInfo`, :class:`RunOverview`): statuses derived from the
stored state and the steps, payloads and outputs decoded by the client's codec.
It only reads; nothing here changes a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._caps import Cap
from .._errors import RunFailed, RunNotFound, WaitTimeout
from .._models import ErrorInfo, RunInfo, RunRef, Status, StepInfo, StepKind, StepStatus
from ..store import RunQuery, StoredRun, derive_status
from ._attempt import monotonic
from ._state import EngineState

__all__ = ["RunLike", "RunList", "RunOverview", "RunReader", "run_id_of"]

RunLike = RunRef | str
"""A run, by reference or by id."""


@dataclass(frozen=True, slots=True)
class RunOverview:
    """One run in a listing (``Client.runs``): no payload, no step outputs."""

    id: str
    workflow: str
    queue: str
    status: Status
    key: str | None
    labels: Mapping[str, str]
    created_at_ns: int
    run_at_ns: int
    finished_at_ns: int | None
    error: ErrorInfo | None
    step_counts: Mapping[str, int]
    tenant: str | None = None
    """The run's tenant (``Cap.TENANT``), None for a run without one."""

    @property
    def failed_step(self) -> str | None:
        """The step whose failure ended the run (None: it did not fail, or not in a step)."""
        return self.error.step if self.error is not None else None

    @property
    def error_summary(self) -> str | None:
        """The error in one line: its type and the first line of its message, cut at 120."""
        if self.error is None:
            return None
        lines = self.error.message.strip().splitlines()
        line = f"{self.error.type}: {lines[0]}" if lines else self.error.type
        return line if len(line) <= 120 else line[:119] + "\u2026"

    @property
    def ref(self) -> RunRef:
        """A :class:`RunRef` to this run."""
        return RunRef(self.id, self.workflow)


@dataclass(frozen=True, slots=True)
class RunList:
    """A page of runs, newest first; pass ``cursor`` back for the next page.

    ``total``: how many runs the whole filter matches, when asked (``count=True``).
    """

    runs: tuple[RunOverview, ...]
    cursor: str | None
    total: int | None = None


def still_running(info: RunInfo, timeout: float | None) -> WaitTimeout:
    """The :class:`~cairnflow.WaitTimeout` of a wait for the unfinished run ``info``."""
    return WaitTimeout(
        f"run {info.id} of workflow {info.workflow!r} is still {info.status} "
        f"after {timeout or 0:g}s"
    )


class RunReader:
    """The read side of one client (see the module docstring)."""

    def __init__(self, state: EngineState) -> None:
        self._state = state

    def info(self, run: RunLike) -> RunInfo:
        """A snapshot of the run: status, steps, result and error."""
        stored = self._state.store.get_run(run_id_of(run))
        if stored is None:
            raise RunNotFound(run_id_of(run))
        return self._run_info(stored)

    def wait(self, run: RunLike, timeout: float | None = None) -> RunInfo:
        """Block until the run finishes and return its info.

        Raises :class:`~cairnflow.WaitTimeout` after ``timeout`` seconds (the run
        goes on).
        """
        state = self._state
        ends = None if timeout is None else monotonic() + timeout
        pause = 0.005
        while True:
            info = self.info(run)
            if info.finished:
                return info
            left = None if ends is None else ends - monotonic()
            if left is not None and left <= 0:
                raise still_running(info, timeout)
            with state.finished:
                state.finished.wait(pause if left is None else min(pause, left))
            pause = min(pause * 2, 0.25, state.settings.poll_interval)

    def result(self, run: RunLike, timeout: float | None = None) -> Any:
        """Wait for the run and return its result; raise :class:`~cairnflow.RunFailed` otherwise.

        The result is the output of the run's last step, or a dict of outputs
        by step name when it has several last steps.
        """
        self._state.require(Cap.RESULT, "result()")
        info = self.wait(run, timeout)
        if info.status is not Status.SUCCEEDED:
            raise RunFailed(info)
        return info.result

    def runs(
        self,
        *,
        workflow: str | None = None,
        queue: str | None = None,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: Mapping[str, str] | None = None,
        label_prefix: tuple[str, str] | None = None,
        tenant: str | None = None,
        created_since: int | None = None,
        created_until: int | None = None,
        finished_since: int | None = None,
        finished_until: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
        count: bool = False,
    ) -> RunList:
        """List runs of every workflow in the store, newest first (``Cap.RUN_QUERY``).

        Every filter given must hold: ``status`` one or several statuses (the
        active ones, pending, queued, running and waiting, as exactly as the
        final ones); ``labels`` every given label; ``label_prefix`` a
        ``(name, prefix)`` pair, the label ``name`` starting with ``prefix``
        (``Cap.LABEL_PREFIX``); ``tenant`` one tenant's runs (``Cap.TENANT``);
        ``*_since`` / ``*_until`` Unix nanoseconds, the
        lower end included. Pass the returned ``cursor`` for the next page;
        ``count`` also returns how many runs match (``RunList.total``). A bad
        filter raises :class:`~cairnflow.InvalidQuery` naming it.
        """
        state = self._state
        state.require(Cap.RUN_QUERY, "runs()")
        statuses = None
        if status is not None:
            statuses = frozenset([status] if isinstance(status, str | Status) else status)
        query = RunQuery(
            workflow=workflow,
            queue=queue,
            statuses=statuses,  # type: ignore[arg-type]  # checked by RunQuery
            labels=labels or {},
            label_prefix=label_prefix,
            tenant=tenant,
            created_since=created_since,
            created_until=created_until,
            finished_since=finished_since,
            finished_until=finished_until,
            now=state.now(),
            limit=limit,
            cursor=cursor,
            count=count,
        )
        if label_prefix is not None:  # a malformed filter is refused first, whatever the store
            state.require(Cap.LABEL_PREFIX, "runs(label_prefix=...)")
        if tenant is not None:
            state.require(Cap.TENANT, "runs(tenant=...)")
        page = state.store.list_runs(query)
        now = state.now()
        overviews = tuple(
            RunOverview(
                id=summary.id,
                workflow=summary.workflow,
                queue=summary.queue,
                status=derive_status(summary.state, summary.run_at, now, summary.step_counts),
                key=summary.key,
                labels=summary.labels,
                created_at_ns=summary.created_at,
                run_at_ns=summary.run_at,
                finished_at_ns=summary.finished_at,
                error=summary.error,
                step_counts={str(k): v for k, v in summary.step_counts.items()},
                tenant=summary.tenant,
            )
            for summary in page.runs
        )
        return RunList(overviews, page.cursor, page.total)

    def run_info(self, stored: StoredRun) -> RunInfo:
        """The run as a :class:`~cairnflow.RunInfo` (outputs and result decoded)."""
        return self._run_info(stored)

    def _run_info(self, stored: StoredRun) -> RunInfo:
        state = self._state
        counts: dict[Any, int] = {}
        for step in stored.steps:
            counts[step.status] = counts.get(step.status, 0) + 1
        status = derive_status(stored.state, stored.run_at, state.now(), counts)
        with_results = Cap.RESULT in state.caps
        steps = {
            s.name: StepInfo(
                name=s.name,
                kind=s.kind,
                status=s.status,
                attempts=s.attempt,
                failures=s.failures,
                reclaims=s.reclaims,
                output=self._decode(s.output) if with_results else None,
                error=s.error,
                node=s.node,
                progress=self._decode(s.progress),
                due_at_ns=s.due_at,
                started_at_ns=s.started_at,
                finished_at_ns=s.finished_at,
                heartbeat_at_ns=s.heartbeat_at,
            )
            for s in stored.steps
        }
        result = None
        if status is Status.SUCCEEDED and with_results:
            # The sinks that succeeded: a branch not taken, or the path a wait's timeout
            # left, was skipped (Cap.WAIT_BRANCH); compensations are never sinks.
            dag = [s for s in stored.steps if s.kind is not StepKind.COMPENSATION]
            parents = {p for s in dag for p in s.parents}
            sinks = [s for s in dag if s.name not in parents and s.status is StepStatus.SUCCEEDED]
            if len(sinks) == 1:
                result = steps[sinks[0].name].output
            else:
                result = {s.name: steps[s.name].output for s in sinks}
        return RunInfo(
            id=stored.id,
            workflow=stored.workflow,
            queue=stored.queue,
            status=status,
            payload=self._decode(stored.payload),
            key=stored.key,
            labels=stored.labels,
            created_at_ns=stored.created_at,
            run_at_ns=stored.run_at,
            finished_at_ns=stored.finished_at,
            steps=steps,
            result=result,
            error=stored.error,
            headers=stored.headers,
            tenant=stored.tenant,
        )

    def _decode(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._state.codec.decode(data)
        except Exception:  # noqa: BLE001 - show what is stored rather than fail a read
            return data


def run_id_of(run: RunLike) -> str:
    if isinstance(run, RunRef):
        return run.id
    if isinstance(run, str) and run:
        return run
    raise TypeError(f"expected a RunRef or a run id, got {run!r}")
