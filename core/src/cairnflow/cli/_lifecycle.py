"""``cairn lifecycle``: the store's durable lifecycle subscriptions, listed and dropped.

A client records a subscription when it starts (``on_event`` subscribers, a
workflow with an ``on_failure`` handler) and never removes it: events keep
being written for it while no client runs, as a message queue keeps a durable
queue's messages (docs/lifecycle.md). So an application that stopped
subscribing leaves a subscription whose backlog only grows. These commands
need no running client: they open the store, refuse one never migrated, read or
drop the rows through a client that is never started, and close it.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from .. import Client
from .._models import LIFECYCLE_EVENTS, LIFECYCLE_FAILURES
from ._commands import _ListByDefault, _open, _when, console, store_option

__all__ = ["lifecycle"]


@click.group(cls=_ListByDefault)
def lifecycle() -> None:
    """List the store's lifecycle subscriptions (``cairn lifecycle URL``), drop one."""


@lifecycle.command("list")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per subscription.")
@store_option
def lifecycle_list(url: str, as_json: bool, pairs: tuple[str, ...]) -> None:
    """Every subscription, with the events it covers that no client has handled yet."""
    store = _open(url, pairs, migrated=True)
    try:
        found = Client(store).lifecycle_subscriptions()
    finally:
        store.close()
    if as_json:
        for sub in found:
            click.echo(
                json.dumps(
                    {
                        "channel": sub.channel,
                        "workflow": sub.workflow or None,
                        "since_ns": sub.since_ns,
                        "backlog": sub.backlog,
                        "oldest_ns": sub.oldest_ns,
                    }
                )
            )
        return
    table = Table(title=f"Lifecycle subscriptions in {url}")
    for column in ("channel", "workflow", "since", "backlog", "oldest"):
        table.add_column(column, overflow="fold")
    for sub in found:
        table.add_row(
            sub.channel,
            sub.workflow or "(every workflow)",
            _when(sub.since_ns),
            str(sub.backlog),
            _when(sub.oldest_ns),
        )
    console.print(table)


@lifecycle.command("drop")
@click.argument("url")
@click.argument("channel", type=click.Choice([LIFECYCLE_EVENTS, LIFECYCLE_FAILURES]))
@click.argument("workflow", required=False)
@store_option
def lifecycle_drop(url: str, channel: str, workflow: str | None, pairs: tuple[str, ...]) -> None:
    """End the subscription of CHANNEL to WORKFLOW (none: the one to every workflow).

    Its events that no other subscription covers are deleted. A running client
    that wants it records it again only when it next starts.
    """
    store = _open(url, pairs, migrated=True)
    try:
        dropped = Client(store).drop_lifecycle_subscription(channel, workflow)
    finally:
        store.close()
    what = f"{channel} of {workflow}" if workflow else f"{channel} of every workflow"
    if dropped is None:
        raise click.ClickException(f"no lifecycle subscription {what}")
    console.print(f"dropped the subscription {what} and {dropped} undelivered event(s)")
