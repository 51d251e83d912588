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
from .._checks import check_int
from .._errors import RunFailed, RunNotFound, WaitTimeout
from .._models import ErrorInfo, RunInfo, RunRef, Status, StepInfo
from .._names import check_labels, check_name
from ..store import ACTIVE, RunQuery, StoredRun, derive_status
from ._attempt import monotonic
from ._state import EngineState

__all__ = ["RunLike", "RunList", "RunOverview", "RunReader", "run_id_of"]

_ACTIVE_STATUSES = frozenset({Status.PENDING, Status.QUEUED, Status.RUNNING, Status.WAITING})

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

    @property
    def ref(self) -> RunRef:
        """A :class:`RunRef` to this run."""
        return RunRef(self.id, self.workflow)


@dataclass(frozen=True, slots=True)
class RunList:
    """A page of runs, newest first; pass ``cursor`` back for the next page."""

    runs: tuple[RunOverview, ...]
    cursor: str | None

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
                raise WaitTimeout(
                    f"run {info.id} of workflow {info.workflow!r} is still {info.status} "
                    f"after {timeout:g}s"
                )
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
        status: Status | str | Iterable[Status | str] | None = None,
        labels: Mapping[str, str] | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunList:
        """List runs of every workflow in the store, newest first (``Cap.RUN_QUERY``).

        ``status`` filters by one or several statuses; ``labels`` keeps runs
        having every given label. Pass the returned ``cursor`` for the next page.
        """
        state = self._state
        state.require(Cap.RUN_QUERY, "runs()")
        if workflow is not None:
            check_name("workflow", workflow)
        check_int("limit", limit, minimum=1, maximum=1000)
        wanted: frozenset[Status] | None = None
        if status is not None:
            items = [status] if isinstance(status, str | Status) else list(status)
            wanted = frozenset(Status(s) for s in items)
        states: frozenset[str] | None = None
        if wanted is not None:
            states = frozenset(s.value for s in wanted if s.finished)
            if wanted & _ACTIVE_STATUSES:
                states |= {ACTIVE}
        page = state.store.list_runs(
            RunQuery(
                workflow=workflow,
                states=states,
                labels=check_labels(labels),
                limit=limit,
                cursor=cursor,
            )
        )
        now = state.now()
        overviews = []
        for summary in page.runs:
            derived = derive_status(summary.state, summary.run_at, now, summary.step_counts)
            if wanted is not None and derived not in wanted:
                continue  # a finer active status than the store filters on
            overviews.append(
                RunOverview(
                    id=summary.id,
                    workflow=summary.workflow,
                    queue=summary.queue,
                    status=derived,
                    key=summary.key,
                    labels=summary.labels,
                    created_at_ns=summary.created_at,
                    run_at_ns=summary.run_at,
                    finished_at_ns=summary.finished_at,
                    error=summary.error,
                    step_counts={str(k): v for k, v in summary.step_counts.items()},
                )
            )
        return RunList(tuple(overviews), page.cursor)

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
            parents = {p for s in stored.steps for p in s.parents}
            sinks = [s for s in stored.steps if s.name not in parents]
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


