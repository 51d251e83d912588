"""``cairn run force``, ``cairn run reschedule`` and ``cairn due``: run timing from a shell.

Forcing and rescheduling are rows in the store (the ``RunTiming`` facet), so
these commands need no running client: each opens the store, refuses one never
migrated, acts through a client that is never started, and closes it. ``cairn
due`` answers for the workflows of an app (``--app``, as ``cairn worker``
loads it) on their queues, or on the queues given: when a worker of them would
next have something to do.
"""

from __future__ import annotations

import click

from .. import Client
from ..clock import Real, from_ns
from ._commands import APP_HELP, _load_app, _open, console, store_option

__all__ = ["due", "run_group"]


@click.group("run")
def run_group() -> None:
    """Act on one run: start it now, or move its start (``cairn run force URL ID``)."""


@run_group.command("force")
@click.argument("url")
@click.argument("run_id")
@store_option
def force(url: str, run_id: str, pairs: tuple[str, ...]) -> None:
    """Start a delayed or paused run now: no pause holds it any more."""
    store = _open(url, pairs, migrated=True)
    try:
        changed = Client(store).force_run(run_id)
    finally:
        store.close()
    console.print(f"forced {run_id}" if changed else f"{run_id}: nothing to force")


@run_group.command("reschedule")
@click.argument("url")
@click.argument("run_id")
@click.option("--at", "at", type=int, default=None, help="The new start, Unix nanoseconds.")
@click.option("--delay", type=float, default=None, help="The new start, seconds from now.")
@store_option
def reschedule(
    url: str, run_id: str, at: int | None, delay: float | None, pairs: tuple[str, ...]
) -> None:
    """Move a run that has not started to another start time (--at or --delay)."""
    store = _open(url, pairs, migrated=True)
    try:
        moved = Client(store).reschedule(run_id, at=at, delay=delay)
    finally:
        store.close()
    if not moved:
        raise click.ClickException(f"{run_id} has started or finished: it was not moved")
    console.print(f"rescheduled {run_id}")


@click.command()
@click.argument("url")
@click.option("--app", "app", required=True, help=APP_HELP)
@click.option("--queues", default=None, help="Comma-separated queues (default: the app's).")
@store_option
def due(url: str, app: str, queues: str | None, pairs: tuple[str, ...]) -> None:
    """When the app's next piece of work falls due: 'now', a time, or 'nothing pending'."""
    workflows = _load_app(app)
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    store = _open(url, pairs, migrated=True)
    try:
        client = Client(store, queues=names)
        client.register(*workflows)
        when = client.next_due()
        now = Real().now_ns()  # after the answer: a time it gave as now is not after this
    finally:
        store.close()
    if when is None:
        console.print("nothing pending")
    elif when <= now:
        console.print("now")
    else:
        console.print(f"{from_ns(when).isoformat()} ({when})")
