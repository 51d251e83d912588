"""The operator's methods of :class:`~cairnflow.Client`: retry, cancel and delete runs.

They act on rows through the ``RunAdmin`` facet, so they work from a client
that is never started (an operator's script, ``cairn retry``) and hold every
client of the database at once. Acts on many runs (``cancel_runs``,
``delete_runs``) page through :meth:`~cairnflow.store.Store.list_runs` with the
operator's filter, the one place a filter is built, and act on each page in
one transaction of its own: no transaction locks more than a page of runs.

What each act means (the words of the ``RunAdmin`` facet, for people):

* ``retry_run``: a failed, cancelled or discarded run runs again from the
  steps that did not succeed; the outputs of those that did are kept. The
  run takes its idempotency key again (:class:`~cairnflow.DuplicateRun` when
  another unfinished run holds it: nothing changed). False, changing nothing,
  for a run that has not finished or that succeeded. An attempt of the run
  from before the retry that is still running somewhere loses its lease: its
  outcome is refused.
* ``retry_step``: the same, naming the failed step an operator means to run
  again; False when that step did not fail.
* ``cancel_step``: the step ends ``cancelled``, and the steps that depend on
  it (they can never run now) with it. The rest of the run goes on; once
  nothing else is left the run ends ``cancelled``, its error naming the step
  (a failure of another step still fails it). An attempt of the step running
  on another client sees the cancel at its next lease renewal, and its
  outcome is refused. Retrying the run runs the cancelled steps again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from .._caps import Cap
from .._checks import check_int
from .._models import Status
from .._names import check_labels, check_name
from ..store import Reopened, RunAdmin, RunQuery
from ._attempt import End
from ._reads import RunLike, run_id_of
from ._state import EngineState

__all__ = ["AdminMethods"]

_PAGE = 200
"""Runs per page of a ``cancel_runs``/``delete_runs`` by filter: one transaction each."""

_FINAL_STATES = frozenset(status for status in Status if status.finished)
_UNFINISHED = frozenset(status for status in Status if not status.finished)


class AdminMethods:
    """Retrying, cancelling and deleting runs (``Cap.RETRY_RUN`` and friends)."""

    _state: EngineState

    def _admin(self, cap: Cap, what: str) -> RunAdmin:
        self._state.require(cap, what)
        admin = self._state.facets.admin
        assert admin is not None  # declared (required above), so check_store made sure
        return admin

    def retry_run(self, run: RunLike) -> bool:
        """Run a failed, cancelled or discarded run again from the steps that did not succeed.

        Steps that succeeded keep their outputs; the others start again with a
        fresh retry budget as their parents allow. False, changing nothing, for
        a run that has not finished or that succeeded. Raises
        :class:`~cairnflow.DuplicateRun` when another unfinished run holds the
        run's idempotency key, :class:`~cairnflow.RunNotFound` (``Cap.RETRY_RUN``).
        """
        admin = self._admin(Cap.RETRY_RUN, "retry_run()")
        return self._reopened(admin.reopen_run(run_id_of(run), None, self._state.now()))

    def retry_step(self, run: RunLike, step: str) -> bool:
        """Retry the failed step ``step`` of a finished run; its dependents follow as usual.

        The run becomes active again as with :meth:`retry_run`; False, changing
        nothing, when ``step`` did not fail (or the run is unfinished).
        Raises :class:`~cairnflow.StepNotFound` for a step the run does not
        have (``Cap.JOB_RETRY``).
        """
        admin = self._admin(Cap.JOB_RETRY, "retry_step()")
        check_name("step", step)
        return self._reopened(admin.reopen_run(run_id_of(run), step, self._state.now()))

    def _reopened(self, result: Reopened) -> bool:
        if result is not Reopened.REOPENED:
            return False
        self._state.work_made_ready(others=True)
        return True

    def cancel_step(self, run: RunLike, step: str) -> bool:
        """Cancel one step of a run and the steps that depend on it; the rest goes on.

        The run ends ``cancelled`` once its other steps are done. An attempt
        of the step running here stops at once, on another client at its next
        lease renewal; its outcome is refused. False when the step or the run
        had finished. Raises :class:`~cairnflow.StepNotFound`,
        :class:`~cairnflow.RunNotFound` (``Cap.CANCEL_STEP``).
        """
        admin = self._admin(Cap.CANCEL_STEP, "cancel_step()")
        check_name("step", step)
        run_id = run_id_of(run)
        state = self._state
        cancelled = admin.cancel_step(run_id, step, state.now())
        if cancelled:
            for running in state.held_attempts():
                if running.claimed.run_id == run_id and running.claimed.step == step:
                    running.stop(End.CANCELLED)
            state.run_finished()
        return cancelled

    def cancel_runs(
        self,
        *,
        workflow: str | None = None,
        labels: Mapping[str, str] | None = None,
        query: RunQuery | None = None,
    ) -> int:
        """Cancel every unfinished run matching the filter; return how many were cancelled.

        The filter is ``list_runs``'s: ``workflow`` and exact ``labels``, or a
        whole :class:`~cairnflow.store.RunQuery` (its statuses are narrowed to the
        unfinished). Runs are cancelled a page at a time, one transaction per
        page; running attempts see the cancel as with :meth:`cancel`
        (``Cap.CANCEL_ALL``).
        """
        admin = self._admin(Cap.CANCEL_ALL, "cancel_runs()")
        state = self._state
        cancelled: set[str] = set()
        for page in self._pages(self._query(workflow, labels, query, _UNFINISHED)):
            cancelled.update(admin.cancel_runs(page, state.now()))
        if cancelled:
            for running in state.held_attempts():
                if running.claimed.run_id in cancelled:
                    running.stop(End.CANCELLED)
            state.run_finished()
        return len(cancelled)

    def delete_runs(
        self,
        *runs: RunLike,
        workflow: str | None = None,
        status: Status | str | Iterable[Status | str] | None = None,
        labels: Mapping[str, str] | None = None,
        query: RunQuery | None = None,
    ) -> int:
        """Delete finished runs with all their rows; return how many were deleted.

        Either the ``runs`` named, or every finished run matching the filter
        (``workflow``, final ``status``, exact ``labels``, or a whole
        :class:`~cairnflow.store.RunQuery`), a page per transaction. Unfinished
        runs are never deleted (cancel them first): they are left as they are
        and not counted. Ids that do not exist are not counted (``Cap.DELETE_RUN``).
        """
        admin = self._admin(Cap.DELETE_RUN, "delete_runs()")
        if runs:
            if workflow is not None or status is not None or labels or query is not None:
                raise ValueError("delete_runs() takes run ids or a filter, not both")
            ids = [run_id_of(run) for run in runs]
            pages = (ids[start : start + _PAGE] for start in range(0, len(ids), _PAGE))
            return sum(len(admin.delete_runs(page)) for page in pages)
        if workflow is None and status is None and not labels and query is None:
            raise ValueError("delete_runs() needs run ids or a filter (workflow, status, labels)")
        states = _FINAL_STATES
        if status is not None:
            items = [status] if isinstance(status, str | Status) else list(status)
            states = frozenset(Status(item) for item in items)
            if not states <= _FINAL_STATES:
                raise ValueError(f"delete_runs() deletes finished runs only, not {sorted(states)}")
        deleted = 0
        for page in self._pages(self._query(workflow, labels, query, states)):
            deleted += len(admin.delete_runs(page))
        return deleted

    def _query(
        self,
        workflow: str | None,
        labels: Mapping[str, str] | None,
        query: RunQuery | None,
        states: frozenset[Status],
    ) -> RunQuery:
        """The operator's filter as ``list_runs`` takes it, narrowed to ``states``."""
        if query is not None:
            if query.tenant is not None:
                self._state.require(Cap.TENANT, "a RunQuery with a tenant")
            if workflow is not None or labels:
                raise ValueError("pass a RunQuery or workflow/labels, not both")
            narrowed = states if query.statuses is None else states & query.statuses
            return dataclasses.replace(query, statuses=narrowed, limit=_PAGE, cursor=None)
        if workflow is not None:
            check_name("workflow", workflow)
        return RunQuery(
            workflow=workflow, statuses=states, labels=check_labels(labels), limit=_PAGE
        )

    def _pages(self, query: RunQuery) -> Iterable[list[str]]:
        """The ids of the runs ``query`` lists, a page at a time (``Cap.RUN_QUERY``).

        Newest first by an insertion cursor, so acting on a page (cancelling,
        deleting) never moves a run the next page would show.
        """
        check_int("limit", query.limit, minimum=1, maximum=1000)
        store = self._state.store
        cursor: str | None = None
        while True:
            page = store.list_runs(dataclasses.replace(query, cursor=cursor))
            ids = [summary.id for summary in page.runs]
            if ids:
                yield ids
            if page.cursor is None:
                return
            cursor = page.cursor
