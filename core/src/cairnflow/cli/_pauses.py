"""``cairn pause``, ``cairn resume`` and ``cairn pauses``: queues and workflows held by a row.

A pause is a row every claim reads (the ``QueueControl`` facet), so these
commands need no running client: each opens the store, refuses one never
migrated (with the message that says to run ``cairn migrate``), writes or reads
the rows through a client that is never started, and closes it. Running
attempts finish; new attempts of what is paused wait until it is resumed.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from .. import Client
from ..clock import from_ns
from ..store import PauseKind
from ._commands import _open, console, store_option

__all__ = ["pause", "pauses", "resume"]


def _set(url: str, kind: PauseKind, name: str, pairs: tuple[str, ...], *, paused: bool) -> None:
    store = _open(url, pairs, migrated=True)
    try:
        client = Client(store)
        if kind is PauseKind.QUEUE:
            changed = client.pause_queue(name) if paused else client.resume_queue(name)
        else:
            changed = client.pause_workflow(name) if paused else client.resume_workflow(name)
    finally:
        store.close()
    if paused:
        console.print(
            f"paused {kind.value} {name}" if changed else f"{kind.value} {name} was paused"
        )
    else:
        console.print(
            f"resumed {kind.value} {name}" if changed else f"{kind.value} {name} was not paused"
        )


@click.group()
def pause() -> None:
    """Pause a queue or a workflow on every client (``cairn pause queue URL NAME``)."""


@click.group()
def resume() -> None:
    """Resume a paused queue or workflow (``cairn resume queue URL NAME``)."""


for _kind in PauseKind:

    def _commands(kind: PauseKind) -> None:
        @pause.command(
            kind.value, help=f"Stop every client from starting attempts of {kind.value} NAME."
        )
        @click.argument("url")
        @click.argument("name")
        @store_option
        def paused(url: str, name: str, pairs: tuple[str, ...]) -> None:
            _set(url, kind, name, pairs, paused=True)

        @resume.command(kind.value, help=f"Let every client run {kind.value} NAME again.")
        @click.argument("url")
        @click.argument("name")
        @store_option
        def resumed(url: str, name: str, pairs: tuple[str, ...]) -> None:
            _set(url, kind, name, pairs, paused=False)

    _commands(_kind)


@click.command()
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per pause.")
@store_option
def pauses(url: str, as_json: bool, pairs: tuple[str, ...]) -> None:
    """Every paused queue and workflow, with when it was paused."""
    store = _open(url, pairs, migrated=True)
    try:
        found = Client(store).pauses()
    finally:
        store.close()
    if as_json:
        for held in found:
            click.echo(
                json.dumps(
                    {"kind": held.kind.value, "name": held.name, "paused_at_ns": held.paused_at}
                )
            )
        return
    table = Table(title=f"Pauses in {url}")
    for column in ("kind", "name", "paused at"):
        table.add_column(column, overflow="fold")
    for held in found:
        table.add_row(
            held.kind.value, held.name, from_ns(held.paused_at).isoformat(timespec="seconds")
        )
    console.print(table)
