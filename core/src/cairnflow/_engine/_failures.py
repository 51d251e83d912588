"""What a failed attempt leaves behind: the failure outcome its retry policy decides.

Shared by the runner (a step raised, timed out or returned what cannot be
encoded) and the committer (the store refused the attempt's outcome), so one
rule decides every failure whatever noticed it.
"""

from __future__ import annotations

from .._errors import ErrorInfo
from ..retry import NO_RETRY, RetryPolicy
from ..store import ClaimedAttempt, Failed
from ..workflow import Step, Workflow
from ._state import EngineState

__all__ = ["failure_outcome"]

_NS = 1_000_000_000


def failure_outcome(
    state: EngineState,
    claimed: ClaimedAttempt,
    error: BaseException,
    now: int,
    step: Step | None = None,
) -> Failed:
    """The failure of ``claimed`` with ``error``: retried at the policy's time, or final."""
    info = ErrorInfo.from_exception(error, step=claimed.step, attempt=claimed.attempt)
    workflow = state.registry.get(claimed.workflow)
    policy = _policy(workflow, claimed, step)
    delay = policy.next_delay(error, claimed.failures + 1, state.jitter())
    retry_at = None if delay is None else now + int(delay * _NS)
    # What the store judges when it records the failure (the run row locked): the
    # deadline, the run's error budget, and whether running out of retries discards.
    return Failed(
        info,
        retry_at,
        discard=policy.discards and not policy.permanent(error),
        max_errors=None if workflow is None else workflow.max_errors,
        retry_deadline=policy.deadline_ns,
        retry_window=policy.window_ns,
        keep_errors=_kept(state, workflow),
        node=state.settings.node_id,
    )


def _kept(state: EngineState, workflow: Workflow | None) -> int:
    """How many errors the run keeps: its workflow's setting, or the client's."""
    if workflow is not None and workflow.error_history is not None:
        return workflow.error_history
    return state.settings.error_history


def _policy(workflow: Workflow | None, claimed: ClaimedAttempt, step: Step | None) -> RetryPolicy:
    if step is None and workflow is not None:
        step = workflow.steps.get(claimed.step)
    if workflow is None or step is None:
        return NO_RETRY
    return workflow.retry_for(step)
