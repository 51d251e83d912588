"""``cairn stats URL`` and ``cairn servers URL``: what a dashboard draws, from a client that
is never started.

``stats``: queues (queued, running, waiting, failed in the window, the oldest
queued step's age), then runs and steps by queue and status, then throughput per
bucket. ``servers``: every client seen lately, live or dead. Both print one JSON
document instead with ``--json``, for scripts.
"""

from __future__ import annotations

import dataclasses
import json
import time

import click
from rich.table import Table

from .. import Client
from ._commands import _open, console, store_option

__all__ = ["servers", "stats"]


@click.command()
@click.argument("url")
@click.option("--hours", default=1.0, show_default=True, help="The window of finished runs.")
@click.option("--bucket", default=60.0, show_default=True, help="Seconds per throughput bucket.")
@click.option("--json", "as_json", is_flag=True, help="Everything as one JSON document.")
@store_option
def stats(url: str, hours: float, bucket: float, as_json: bool, pairs: tuple[str, ...]) -> None:
    """Queues, run and step counts, and throughput in URL (Cap.STATS)."""
    store = _open(url, pairs, migrated=True)
    try:
        figures = Client(store).stats(hours=hours, bucket=bucket)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(figures)))
        return
    now = time.time_ns()
    queues = Table(title=f"Queues in {url}")
    for column in ("queue", "queued", "running", "waiting", f"failed ({hours:g}h)", "oldest"):
        queues.add_column(column)
    for q in figures.queues:
        age = "" if q.oldest_queued_at is None else f"{max(now - q.oldest_queued_at, 0) / 1e9:.0f}s"
        queues.add_row(q.queue, str(q.queued), str(q.running), str(q.waiting), str(q.failed), age)
    console.print(queues)
    counts = Table(title="Runs and steps by status")
    for column in ("queue", "of", "status", "count"):
        counts.add_column(column)
    for kind, rows in (("runs", figures.runs), ("steps", figures.steps)):
        for row in rows:
            counts.add_row(row.queue, kind, row.status, str(row.count))
    console.print(counts)
    succeeded = sum(b.succeeded for b in figures.throughput)
    failed = sum(b.failed for b in figures.throughput)
    last = figures.throughput[-10:]
    recent = " ".join(f"{b.succeeded}/{b.failed}" for b in last)
    console.print(
        f"throughput, last {hours:g}h: {succeeded} succeeded, {failed} failed; "
        f"last {len(last)} buckets of {bucket:g}s (succeeded/failed): {recent}"
    )


@click.command()
@click.argument("url")
@click.option("--hours", default=1.0, show_default=True, help="Servers seen in this window.")
@click.option("--json", "as_json", is_flag=True, help="Everything as one JSON document.")
@store_option
def servers(url: str, hours: float, as_json: bool, pairs: tuple[str, ...]) -> None:
    """Clients seen lately in URL, live and dead (Cap.SERVERS); exit 1 when none is live."""
    store = _open(url, pairs, migrated=True)
    try:
        listing = Client(store).servers(hours=hours)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(listing)))
    else:
        table = Table(title=f"Servers in {url}")
        for column in ("node", "state", "host", "pid", "queues", "workers", "version", "seen"):
            table.add_column(column, overflow="fold")
        for state, rows in (("live", listing.live), ("dead", listing.dead)):
            for row in rows:
                ago = f"{max(listing.at - row.seen_at, 0) / 1e9:.0f}s ago"
                shown = "stopped" if row.stopped_at is not None and state == "dead" else state
                table.add_row(
                    row.node, shown, row.host, str(row.pid), ",".join(row.queues),
                    str(row.workers), row.version, ago,
                )  # fmt: skip
        console.print(table)
    if not listing.live:
        raise SystemExit(1)
