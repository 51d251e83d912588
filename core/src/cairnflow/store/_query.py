"""One run against a :class:`~cairnflow.store.RunQuery`, in Python: for stores without SQL.

The SQL layer turns a filter into one WHERE clause (:func:`cairnflow.sql.run_filter`);
a store that keeps its runs in Python (the memory store, a third-party store
over a key-value engine) asks :func:`run_matches` instead, so both read a
filter the same way: statuses derived as :func:`derive_status` derives them,
ranges with the lower end included and the upper end excluded.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._models import StepStatus
from ._records import RunQuery, derive_status

__all__ = ["run_matches"]


def run_matches(
    query: RunQuery,
    *,
    workflow: str,
    queue: str,
    state: str,
    run_at: int,
    labels: Mapping[str, str],
    created_at: int,
    tenant: str | None = None,
    finished_at: int | None,
    step_counts: Mapping[StepStatus, int],
) -> bool:
    """True when a run with these fields matches every condition of ``query`` (not its cursor)."""
    if query.workflow is not None and workflow != query.workflow:
        return False
    if query.queue is not None and queue != query.queue:
        return False
    if query.tenant is not None and tenant != query.tenant:
        return False
    if any(labels.get(name) != value for name, value in query.labels.items()):
        return False
    if query.label_prefix is not None:
        name, prefix = query.label_prefix
        value = labels.get(name)
        if value is None or not value.startswith(prefix):
            return False
    if not _within(created_at, query.created_since, query.created_until):
        return False
    if query.finished_since is not None or query.finished_until is not None:
        if finished_at is None:
            return False
        if not _within(finished_at, query.finished_since, query.finished_until):
            return False
    if query.statuses is not None:
        return derive_status(state, run_at, query.now, step_counts) in query.statuses
    return True


def _within(value: int, since: int | None, until: int | None) -> bool:
    return (since is None or value >= since) and (until is None or value < until)
