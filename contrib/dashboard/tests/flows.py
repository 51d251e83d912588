"""Workflows the dashboard's tests (and its screenshot script) run: a small DAG that can fail.

``orders``: validate, then charge and reserve in parallel, then pack. ``charge``
fails for good while :data:`FAILING` holds the order's id (a test clears it
before retrying the run from the dashboard). ``report`` has a schedule, so the
schedules page has something to show and trigger.
"""

from __future__ import annotations

from typing import Any

import cairnflow as cf

FAILING: set[str] = set()
"""Order ids whose charge fails (permanently: no retry of the step)."""


def build() -> list[cf.Workflow]:
    orders = cf.Workflow("orders", description="validate, charge and reserve, pack")

    @orders.step
    def validate(ctx: cf.StepContext, order: dict[str, Any]) -> dict[str, Any]:
        return order

    @orders.step(after=[validate], retry=cf.NO_RETRY)
    def charge(ctx: cf.StepContext, order: dict[str, Any]) -> dict[str, Any]:
        if order["id"] in FAILING:
            raise RuntimeError(f"card declined for order {order['id']}")
        return {"order": order["id"], "amount": order["qty"] * 12.5}

    @orders.step(after=[validate])
    def reserve(ctx: cf.StepContext, order: dict[str, Any]) -> dict[str, Any]:
        return {"order": order["id"], "shelf": f"S-{order['qty'] % 7}"}

    @orders.step(after=[charge, reserve])
    def pack(ctx: cf.StepContext, parents: dict[str, Any]) -> dict[str, Any]:
        return {"order": parents["charge"]["order"], "box": parents["reserve"]["shelf"]}

    report = cf.Workflow("report", description="a nightly report")
    report.step(lambda ctx, data: {"rows": 42}, name="count")
    report.schedule("nightly", cron="0 3 * * *")
    return [orders, report]


def workflows() -> list[cf.Workflow]:
    """For ``--app tests.flows:workflows`` style loading."""
    return build()
