"""A run filter (:class:`~cairnflow.store.RunQuery`) as ONE SQL condition: :func:`run_filter`.

Every statement that acts on runs by filter (``list_runs``, its count, and the
administration to come: cancel or delete every run matching) takes its WHERE
clause from here, so a filter means the same rows to each of them. The runs
table is aliased ``r``; every value is bound, never formatted in.

* Statuses: a final status is the stored state. The four active statuses are
  derived from the run's steps exactly as :func:`~cairnflow.store.derive_status`
  derives them, with ``EXISTS`` probes of the run's steps (the unique
  ``(run_id, name)`` index: a run's few step rows), so a page of ``queued``
  runs is a page of queued runs, not a page of active runs thinned afterwards.
* Labels, exact and by prefix (``Cap.LABEL_PREFIX``), are probes of the label
  index ``run_labels`` (one row per label, written with the run), not a read
  of the runs' JSON: a prefix is the range ``value >= prefix AND value < next``
  (:func:`~cairnflow.store.label_prefix_bounds`) over ``(name, value)``, which
  every engine serves from a B-tree under the binary collation the column has.
  Not ``LIKE 'prefix%'``: SQLite's LIKE ignores case and uses no index on a
  BINARY column, and Postgres needs a ``"C"`` collation or pattern operators for
  it, while a range needs neither and no escaping of ``%`` and ``_``.
* Ranges: lower end included, upper end excluded.
"""

from __future__ import annotations

from typing import Any

from .._models import Status
from ..store import RunQuery, label_prefix_bounds
from ._tables import Tables

__all__ = ["ACTIVE_STATUSES", "driving_label", "run_filter"]

ACTIVE_STATUSES = frozenset({Status.PENDING, Status.QUEUED, Status.RUNNING, Status.WAITING})

_BEFORE_START = "'blocked', 'scheduled', 'ready'"
"""Step statuses of a run none of whose steps has started (a pending run has only these)."""


def run_filter(
    query: RunQuery,
    tables: Tables,
    *,
    before_seq: int | None = None,
    joined: str | None = None,
) -> tuple[str, tuple[Any, ...]]:
    """``(" AND ...", params)``: every condition of ``query`` on runs aliased ``r``.

    ``before_seq`` adds the page cursor (``r.seq < ?``); the query's own cursor
    is the caller's to decode, since a count ignores it. ``joined``: the label
    condition the statement joins itself (``lp``, :func:`driving_label`), left
    out here: ``"prefix"`` for the label prefix, or the name of an exact label.
    """
    conditions: list[str] = []
    params: list[Any] = []
    if query.workflow is not None:
        conditions.append("r.workflow = ?")
        params.append(query.workflow)
    if query.queue is not None:
        conditions.append("r.queue = ?")
        params.append(query.queue)
    if query.tenant is not None:  # the runs_tenant index: (tenant, seq), newest first
        conditions.append("r.tenant = ?")
        params.append(query.tenant)
    if query.statuses is not None:
        sql, values = _statuses(query.statuses, query.now, tables)
        conditions.append(sql)
        params.extend(values)
    for name, value in sorted(query.labels.items()):
        if name == joined:
            continue
        conditions.append(
            f"EXISTS (SELECT 1 FROM {tables.run_labels} l "
            "WHERE l.run_id = r.id AND l.name = ? AND l.value = ?)"
        )
        params.extend((name, value))
    if query.label_prefix is not None and joined != "prefix":
        name, prefix = query.label_prefix
        low, high = label_prefix_bounds(prefix)
        upper = " AND l.value < ?" if high is not None else ""
        conditions.append(
            f"EXISTS (SELECT 1 FROM {tables.run_labels} l "
            f"WHERE l.run_id = r.id AND l.name = ? AND l.value >= ?{upper})"
        )
        params.extend((name, low) if high is None else (name, low, high))
    for column, since, until in (
        ("r.created_at", query.created_since, query.created_until),
        ("r.finished_at", query.finished_since, query.finished_until),
    ):
        if since is not None:
            conditions.append(f"{column} >= ?")
            params.append(since)
        if until is not None:
            conditions.append(f"{column} < ?")
            params.append(until)
    if before_seq is not None:
        conditions.append("r.seq < ?")
        params.append(before_seq)
    return "".join(f" AND {c}" for c in conditions), tuple(params)


def driving_label(query: RunQuery) -> tuple[str, str, tuple[str, ...]] | None:
    """The label condition a listing can start from: ``(joined, condition on lp, params)``.

    The label prefix if there is one, else the first exact label; None without
    either. ``joined`` is what :func:`run_filter` then leaves out.
    """
    if query.label_prefix is not None:
        name, prefix = query.label_prefix
        low, high = label_prefix_bounds(prefix)
        if high is None:
            return "prefix", "lp.name = ? AND lp.value >= ?", (name, low)
        return "prefix", "lp.name = ? AND lp.value >= ? AND lp.value < ?", (name, low, high)
    if query.labels:
        name, value = min(query.labels.items())
        return name, "lp.name = ? AND lp.value = ?", (name, value)
    return None


def _statuses(statuses: frozenset[Status], now: int, tables: Tables) -> tuple[str, tuple[Any, ...]]:
    """One condition: the run's status is one of ``statuses`` (derived as derive_status does)."""
    if not statuses:
        return "1 = 0", ()

    def has(step_statuses: str) -> str:
        return (
            f"EXISTS (SELECT 1 FROM {tables.steps} s "
            f"WHERE s.run_id = r.id AND s.status IN ({step_statuses}))"
        )

    running = has("'running'")
    # derive_status: pending when run_at is later than now and every step is before its start.
    pending = (
        "r.run_at > ? AND NOT EXISTS (SELECT 1 FROM "
        f"{tables.steps} s WHERE s.run_id = r.id AND s.status NOT IN ({_BEFORE_START}))"
    )
    asleep = has("'sleeping', 'waiting'")
    busy = has("'running', 'ready', 'scheduled'")
    waiting = f"{asleep} AND NOT {busy}"
    final = sorted(s.value for s in statuses if s.finished)
    terms: list[str] = []
    params: list[Any] = []
    if final:
        terms.append(f"r.state IN ({', '.join(['?'] * len(final))})")
        params.extend(final)
    active = statuses & ACTIVE_STATUSES
    if active == ACTIVE_STATUSES:
        terms.append("r.state = 'active'")
    elif active:
        derived: list[str] = []
        if Status.RUNNING in active:
            derived.append(running)
        if Status.PENDING in active:
            derived.append(f"(NOT {running} AND {pending})")
            params.append(now)
        if Status.WAITING in active:
            # A waiting run has a sleeping or waiting step, so it is never pending.
            derived.append(f"({waiting})")
        if Status.QUEUED in active:
            derived.append(f"(NOT {running} AND NOT ({pending}) AND NOT ({waiting}))")
            params.append(now)
        terms.append(f"(r.state = 'active' AND ({' OR '.join(derived)}))")
    return "(" + " OR ".join(terms) + ")", tuple(params)
