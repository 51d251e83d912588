"""The shop's workflow, imported by the web application and by the worker."""

from __future__ import annotations

import cairnflow as cf

fulfil = cf.Workflow("shop-fulfil")


@fulfil.step()
def reserve(ctx: cf.StepContext, order: dict[str, object]) -> dict[str, object]:
    return {"order": order["id"], "item": order["item"], "qty": order["qty"]}


# The label printer jams on the first try of every parcel: one failed attempt and one
# retry per run, for the metrics to count.
@fulfil.step(
    after=[reserve],
    retry=cf.RetryPolicy(max_attempts=3, backoff=cf.Backoff(initial=0.05, max=0.05)),
)
def pack(ctx: cf.StepContext, reserved: dict[str, object]) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("label printer jammed")
    return f"packed {reserved['qty']} x {reserved['item']} for {reserved['order']}"


workflows = [fulfil]
