"""Small pieces several kit test modules use: workflows, clocks, waiting."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import cairnflow as cf
from cairnflow.clock import Real
from cairnflow.store import ClaimedAttempt, ClaimRequest, Store
from cairnflow.testing import wait_until

if TYPE_CHECKING:
    from .._kit import Kit

__all__ = [
    "TIMEOUT",
    "BehindClock",
    "claim_all",
    "claim_tokens",
    "diamond",
    "enqueue_and_claim",
    "step_status_is",
    "wait_until",
]

TIMEOUT = 20.0
"""How long a kit test waits for anything before it fails (never a speed assertion)."""


def diamond(name: str = "kit-diamond") -> cf.Workflow:
    """``start`` → (``left``, async ``right``) → ``join``; the join sums both branches."""
    wf = cf.Workflow(name)

    @wf.step
    def start(ctx: cf.StepContext, n: int) -> int:
        return n + 1

    @wf.step(after=[start])
    def left(ctx: cf.StepContext, n: int) -> int:
        return n * 10

    @wf.step(after=[start])
    async def right(ctx: cf.StepContext, n: int) -> int:
        return n * 100

    @wf.step(after=[left, right])
    def join(ctx: cf.StepContext, parents: dict[str, int]) -> dict[str, Any]:
        return {"sum": parents["left"] + parents["right"], "payload": ctx.payload}

    return wf


class BehindClock:
    """Wall time running ``seconds`` behind: a node whose clock is late."""

    def __init__(self, seconds: float) -> None:
        self._offset = int(seconds * 1e9)

    def now_ns(self) -> int:
        """Real time minus the offset."""
        return Real().now_ns() - self._offset


def step_status_is(client: cf.Client, run: cf.RunRef, step: str, status: cf.StepStatus) -> bool:
    """True when ``step`` of ``run`` has ``status`` (for :func:`wait_until`)."""
    return client.info(run).steps[step].status is status


def claim_all(store: Store, workflow: str) -> list[ClaimedAttempt]:
    """Claim every ready step of ``workflow`` (up to 10), leased for a minute."""
    now = time.time_ns()
    return store.claim(ClaimRequest(frozenset({workflow}), 10, now, now + 60 * 10**9, "kit-node"))


def claim_tokens(store: Store, workflow: str) -> dict[str, str]:
    """Claim every ready step of ``workflow`` (up to 10): run id -> lease token."""
    return {a.run_id: a.token for a in claim_all(store, workflow)}


def enqueue_and_claim(kit: Kit, workflow: str, runs: int) -> tuple[list[cf.RunRef], dict[str, str]]:
    """``runs`` runs of a one-step ``workflow``, every step claimed: (refs, run id -> token)."""
    client = kit.client(cf.Workflow(workflow, steps=[cf.Step("a", lambda c, d: d)]), start=False)
    refs = [client.enqueue(workflow, n) for n in range(runs)]
    tokens = claim_tokens(kit.store, workflow)
    assert set(tokens) == {r.id for r in refs}
    return refs, tokens
