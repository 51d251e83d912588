"""The records an operator reads: what the store recorded for an attempt, a run, a lease.

Logged *after* the write, from what the store answered (:class:`FinishResult`),
never from what the engine asked for: a failure the engine meant to retry is
logged as the run's failure when the store judged the run's error budget spent,
and an outcome fenced out by a takeover is not logged as written. The loggers,
the fields and the JSON formatter are described in :mod:`cairnflow.logging`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from .._models import Status
from ..logging import LEASES, RUNS, STEPS
from ..store import ClaimedAttempt, ExpiredAttempt, Failed, FinishResult, Outcome

__all__ = ["attempt_abandoned", "lease_lost", "leases_taken_back", "outcome_recorded"]

_steps = logging.getLogger(STEPS)
_runs = logging.getLogger(RUNS)
_leases = logging.getLogger(LEASES)

_NS = 1_000_000_000
_TIMEOUTS = frozenset({"StepTimeout", "RunTimeout"})
_FAILED = frozenset({Status.FAILED, Status.DISCARDED})


def _fields(claimed: ClaimedAttempt | ExpiredAttempt, node: str) -> dict[str, Any]:
    return {
        "run_id": claimed.run_id,
        "workflow": claimed.workflow,
        "step": claimed.step,
        "attempt": claimed.attempt,
        "node": node,
    }


def outcome_recorded(
    claimed: ClaimedAttempt, outcome: Outcome, result: FinishResult, node: str, now: int
) -> None:
    """Log a written outcome: a failed attempt, its retry, the end of its run."""
    where = f"step {claimed.step!r} of run {claimed.run_id} (workflow {claimed.workflow!r})"
    if isinstance(outcome, Failed) and _steps.isEnabledFor(logging.WARNING):
        info = outcome.error
        fields = _fields(claimed, node) | {"error_type": info.type, "error": info.message}
        what = "timed out" if info.type in _TIMEOUTS else "failed"
        _steps.warning(
            "%s %s on attempt %d: %s: %s",
            where,
            what,
            claimed.attempt,
            info.type,
            info.message,
            extra=fields,
        )
        if outcome.retry_at is not None and result.run_status is None:
            retry_in = max(0.0, (outcome.retry_at - now) / _NS)
            _steps.info(
                "%s will be retried at %s (in %.3gs)",
                where,
                _iso(outcome.retry_at),
                retry_in,
                extra=fields | {"retry_at": outcome.retry_at, "retry_in": retry_in},
            )
    status = result.run_status
    if status is not None:
        level = logging.WARNING if status in _FAILED else logging.INFO
        if _runs.isEnabledFor(level):
            _runs.log(
                level,
                "run %s of workflow %r %s (last step %r, attempt %d)",
                claimed.run_id,
                claimed.workflow,
                status.value,
                claimed.step,
                claimed.attempt,
                extra=_fields(claimed, node) | {"status": status.value},
            )


def leases_taken_back(count: int, node: str) -> None:
    """Log attempts whose leases expired (their workers died or stalled), made ready again."""
    _leases.warning(
        "took back %d attempt(s) whose leases expired: their workers stopped renewing them",
        count,
        extra={"count": count, "node": node},
    )


def lease_lost(claimed: ClaimedAttempt, node: str) -> None:
    """Log a lease this node lost (taken over elsewhere): the attempt's outcome is not written."""
    _leases.warning(
        "lease of step %r of run %s (attempt %d) is lost; its outcome will not be written",
        claimed.step,
        claimed.run_id,
        claimed.attempt,
        extra=_fields(claimed, node),
    )


def attempt_abandoned(expired: ExpiredAttempt, node: str) -> None:
    """Log an attempt failed with :class:`~cairnflow.Abandoned` after too many takeovers."""
    _leases.warning(
        "step %r of run %s was taken over %d time(s): attempt %d is abandoned",
        expired.step,
        expired.run_id,
        expired.reclaims + 1,
        expired.attempt,
        extra=_fields(expired, node) | {"reclaims": expired.reclaims + 1},
    )


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / _NS, UTC).isoformat(timespec="milliseconds")
