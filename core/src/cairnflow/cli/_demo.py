"""``cairn demo``: a small order workflow, worked live, then read back.

The workflow shows what cairnflow does in one picture: a retried step, two
parallel branches joined again, a durable sleep and a wait for a signal, none
of which holds a worker while it waits. On a store with schedules, a second
workflow fires every two seconds meanwhile, and its ticks are shown at the end.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import Backoff, Cap, Client, Misfire, RetryPolicy, RunInfo, Status, StepContext, Workflow
from ..clock import from_ns
from ..store import Store

__all__ = ["DEMO_SCHEDULE", "DEMO_WORKFLOW", "build_workflow", "run_demo"]

DEMO_WORKFLOW = "demo-order"
DEMO_SCHEDULE = "restock-check"


def build_workflow() -> Workflow:
    """The demo's order workflow."""
    orders = Workflow(DEMO_WORKFLOW, description="validate, charge and reserve, pack, wait, ship")

    @orders.step
    def validate(ctx: StepContext, order: dict[str, Any]) -> dict[str, Any]:
        if order.get("qty", 0) <= 0:
            raise ValueError(f"order {order.get('id')} has no items")
        return order

    @orders.step(
        after=[validate],
        retry=RetryPolicy(max_attempts=3, backoff=Backoff(initial=0.2, factor=2, max=1)),
    )
    def charge(ctx: StepContext, order: dict[str, Any]) -> dict[str, Any]:
        if ctx.attempt == 1:
            # The payment provider times out on every first try: the retry policy
            # runs the step again after its backoff, on whichever worker is free.
            raise ConnectionError("payment provider timed out")
        return {"order": order["id"], "amount": order["qty"] * 12.5}

    @orders.step(after=[validate])
    def reserve(ctx: StepContext, order: dict[str, Any]) -> dict[str, Any]:
        return {"order": order["id"], "shelf": f"S-{order['qty'] % 7}"}

    @orders.step(after=[charge, reserve])
    def pack(ctx: StepContext, parents: dict[str, Any]) -> dict[str, Any]:
        return {"order": parents["charge"]["order"], "box": parents["reserve"]["shelf"]}

    cool_off = orders.sleep("cool-off", seconds=1, after=[pack])
    approval = orders.wait("approval", signal="approved", timeout=60, after=[cool_off])

    @orders.step(after=[approval])
    def ship(ctx: StepContext, approved: dict[str, Any]) -> str:
        return f"shipped {ctx.parents['approval']['order']} (approved by {approved['by']})"

    return orders


def build_restock() -> Workflow:
    """A scheduled workflow: every two seconds (seconds are the cron's sixth field)."""
    restock = Workflow("demo-restock", description="count the shelves, on a schedule")
    restock.step(
        lambda ctx, data: {"checked": True, "tick": ctx.labels.get("cairnflow.schedule")},
        name="count",
    )
    restock.schedule(DEMO_SCHEDULE, cron="* * * * * */2", misfire=Misfire.SKIP)
    return restock


def _schedule_table(client: Client) -> Table:
    table = Table(title="Schedules and their last ticks")
    for column in ("schedule", "cron", "next fire", "ticks (newest first)"):
        table.add_column(column)
    for info in client.schedules():
        ticks = client.schedule_history(info.workflow, info.name, limit=5)
        shown = " ".join(f"{from_ns(t.at_ns):%H:%M:%S}:{t.outcome.value}" for t in ticks)
        table.add_row(info.name, info.cron, f"{from_ns(info.next_fire_ns):%H:%M:%S}", shown)
    return table


def _earlier_runs(client: Client, console: Console) -> None:
    listing = client.runs(workflow=DEMO_WORKFLOW, limit=1000)
    if not listing.runs:
        console.print("[dim]No earlier demo runs in this database.[/dim]")
        return
    counts: dict[str, int] = {}
    for run in listing.runs:
        counts[run.status.value] = counts.get(run.status.value, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    console.print(
        f"Found {len(listing.runs)} run(s) from an earlier demo in this database: {summary}."
    )
    newest = listing.runs[0]
    info = client.info(newest.ref)
    console.print(f"status after restart: {info.status.value} (run {info.id})")


def _table(runs: list[RunInfo]) -> Table:
    table = Table(title="Runs and their steps", show_lines=False)
    table.add_column("run")
    table.add_column("status")
    table.add_column("steps (attempts)")
    table.add_column("result")
    for info in runs:
        steps = " ".join(
            f"{name}:{step.status.value}({step.attempts})" for name, step in info.steps.items()
        )
        colour = "green" if info.status is Status.SUCCEEDED else "red"
        table.add_row(
            info.id[-12:], f"[{colour}]{info.status.value}[/{colour}]", steps, str(info.result)
        )
    return table


def run_demo(
    store: Store, *, runs: int = 5, workers: int = 4, console: Console | None = None
) -> int:
    """Work ``runs`` demo orders on ``store``; return 0 when every run succeeded."""
    console = console or Console()
    info = store.describe()
    workflow = build_workflow()
    console.rule(f"cairnflow demo on {info.url}")
    applied = store.migrate()
    if applied:
        console.print(f"Migrated the database: applied {', '.join(applied)}.")
    client = Client(store, workers=workers, poll_interval=0.2, lease=10)
    client.register(workflow)
    scheduled = Cap.CRON in store.capabilities and Cap.SCHEDULE_HISTORY in store.capabilities
    if scheduled:
        client.register(build_restock())
    _earlier_runs(client, console)
    stamp = time.strftime("%Y%m%d%H%M%S")
    refs = [
        client.enqueue(
            DEMO_WORKFLOW,
            {"id": f"A-{stamp}-{i}", "qty": i + 1},
            key=f"demo-{stamp}-{i}",
            labels={"demo": stamp},
        )
        for i in range(runs)
    ]
    total = runs * len(workflow)
    signalled: set[str] = set()
    finished: list[RunInfo] = []
    with (
        client,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress,
    ):
        task = progress.add_task("steps done", total=total)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            snapshot = [client.info(ref) for ref in refs]
            done = sum(1 for run in snapshot for step in run.steps.values() if step.status.finished)
            progress.update(task, completed=done)
            for run in snapshot:
                waiting = run.steps["approval"].status.value == "waiting"
                if waiting and run.id not in signalled:
                    # An operator approves: the signal resolves the wait in its own
                    # transaction, and the run goes on on whichever client is free.
                    client.signal(run.ref, "approved", {"by": "ops", "order": run.payload["id"]})
                    signalled.add(run.id)
            if all(run.finished for run in snapshot):
                finished = snapshot
                break
            time.sleep(0.1)
    if not finished:
        finished = [client.info(ref) for ref in refs]
    console.print(_table(finished))
    if scheduled:
        console.print(_schedule_table(client))
    ok = all(run.status is Status.SUCCEEDED for run in finished)
    durable = info.durable
    keeps = (
        f"{info.url} keeps every run, step outcome, retry, lease, sleep, wait and signal as "
        f"rows. Stop this process at any moment and start it again: nothing is lost. Run the "
        f"demo again, or [bold]cairn runs {info.url}[/bold], to read these runs back."
        if durable
        else f"{info.url} keeps everything in this process only: it is gone when the demo "
        f"exits. Try [bold]cairn demo --db sqlite:///demo.db[/bold] to keep it."
    )
    console.print(Panel(keeps, title="What the database keeps"))
    verdict = "every run succeeded" if ok else "some runs did not succeed"
    console.print(f"[bold]{verdict}[/bold] ({len(finished)} runs, {total} steps)")
    return 0 if ok else 1
