"""``cairn retry``, ``cancel``, ``delete`` and ``signal``: an operator acting on runs.

Like every command, these need no running client: each opens the store,
refuses one never migrated (with the message that says to run ``cairn
migrate``), acts through a client that is never started (the ``RunAdmin``
facet), and closes it. The exit status is for scripts: 0 when the command did
what it was asked, 1 when it changed nothing (a run still running is not
retried, a finished one not cancelled) or failed; acts on a filter print how
many runs they changed and exit 0 even for none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any, TypeVar

import click

from .. import Client, SignalResult
from ._commands import _open, console, store_option

__all__ = ["Unchanged", "cancel", "delete", "retry", "signal"]

T = TypeVar("T")


def _acting(url: str, pairs: tuple[str, ...], act: Callable[[Client], T]) -> T:
    store = _open(url, pairs, migrated=True)
    try:
        return act(Client(store))
    finally:
        store.close()


def _labels(pairs: tuple[str, ...]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--label")
        labels[key] = value
    return labels


class Unchanged(click.ClickException):
    """Nothing was changed: the message on standard output, exit status 1 (not an error)."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        console.print(self.message)


def _done(changed: bool, did: str, not_done: str) -> None:
    """Say what happened; exit 1 when nothing changed."""
    if not changed:
        raise Unchanged(not_done)
    console.print(did)


def _counted(as_json: bool, verb: str, count: int) -> None:
    if as_json:
        click.echo(json.dumps({verb: count}))
    else:
        console.print(f"{verb} {count} run{'' if count == 1 else 's'}")


label_option = click.option(
    "--label", "label_pairs", multiple=True, metavar="KEY=VALUE", help="Runs with this label."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the count as JSON.")


@click.command()
@click.argument("url")
@click.argument("run_id")
@click.option("--step", default=None, help="Retry this failed step (its dependents follow).")
@store_option
def retry(url: str, run_id: str, step: str | None, pairs: tuple[str, ...]) -> None:
    """Run a failed or cancelled run again from the steps that did not succeed.

    Steps that succeeded keep their outputs. Exit status 1 when the run has not
    finished or succeeded (or, with --step, when that step did not fail).
    """

    def act(client: Client) -> bool:
        return client.retry_run(run_id) if step is None else client.retry_step(run_id, step)

    what = f"step {step} of run {run_id}" if step else f"run {run_id}"
    _done(
        _acting(url, pairs, act),
        f"retried {what}",
        f"{what} was not retried: unfinished, succeeded, or not failed",
    )


@click.command()
@click.argument("url")
@click.argument("run_id", required=False)
@click.option("--step", default=None, help="Cancel only this step (and what depends on it).")
@click.option("--workflow", default=None, help="Cancel every unfinished run of this workflow.")
@label_option
@json_option
@store_option
def cancel(
    url: str,
    run_id: str | None,
    step: str | None,
    workflow: str | None,
    label_pairs: tuple[str, ...],
    as_json: bool,
    pairs: tuple[str, ...],
) -> None:
    """Cancel RUN_ID (or one --step of it), or every unfinished run matching a filter.

    ``cairn cancel URL RUN_ID``, ``cairn cancel URL RUN_ID --step S``,
    ``cairn cancel URL --workflow W [--label K=V ...]``. Running attempts stop
    at their next lease renewal; their outcomes are not written.
    """
    labels = _labels(label_pairs)
    if run_id is not None:
        if workflow is not None or labels:
            raise click.UsageError("give a RUN_ID or a filter (--workflow, --label), not both")
        if step is None:
            changed = _acting(url, pairs, lambda client: client.cancel(run_id))
            _done(changed, f"cancelled run {run_id}", f"run {run_id} had finished")
        else:
            changed = _acting(url, pairs, lambda client: client.cancel_step(run_id, step))
            _done(changed, f"cancelled step {step} of run {run_id}", f"step {step} had finished")
        return
    if step is not None:
        raise click.UsageError("--step needs a RUN_ID")
    if workflow is None and not labels:
        raise click.UsageError("give a RUN_ID or a filter (--workflow, --label)")
    count = _acting(url, pairs, lambda client: client.cancel_runs(workflow=workflow, labels=labels))
    _counted(as_json, "cancelled", count)


@click.command()
@click.argument("url")
@click.argument("run_ids", nargs=-1)
@click.option("--workflow", default=None, help="Delete finished runs of this workflow.")
@click.option("--status", "statuses", multiple=True, help="Only runs that ended so (repeatable).")
@label_option
@json_option
@store_option
def delete(
    url: str,
    run_ids: tuple[str, ...],
    workflow: str | None,
    statuses: tuple[str, ...],
    label_pairs: tuple[str, ...],
    as_json: bool,
    pairs: tuple[str, ...],
) -> None:
    """Delete finished runs: RUN_IDS, or every one matching a filter, with all their rows.

    Unfinished runs are never deleted (cancel them first). Exit status 1 when
    RUN_IDS were given and none of them was deleted.
    """
    labels = _labels(label_pairs)
    if run_ids:
        if workflow is not None or statuses or labels:
            raise click.UsageError("give RUN_IDS or a filter (--workflow, --status, --label)")
        count = _acting(url, pairs, lambda client: client.delete_runs(*run_ids))
        if not count:
            raise Unchanged("deleted 0 runs" if not as_json else json.dumps({"deleted": 0}))
        _counted(as_json, "deleted", count)
        return
    if workflow is None and not statuses and not labels:
        raise click.UsageError("give RUN_IDS or a filter (--workflow, --status, --label)")
    count = _acting(
        url,
        pairs,
        lambda client: client.delete_runs(
            workflow=workflow, status=statuses or None, labels=labels
        ),
    )
    _counted(as_json, "deleted", count)


@click.command()
@click.argument("url")
@click.argument("run_id")
@click.argument("name")
@click.option(
    "--payload", default=None, metavar="JSON", help="The signal's payload, as JSON (default: null)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@store_option
def signal(
    url: str, run_id: str, name: str, payload: str | None, as_json: bool, pairs: tuple[str, ...]
) -> None:
    """Send signal NAME to RUN_ID, e.g. ``cairn signal URL RUN_ID approved --payload '{"by": 1}'``.

    A wait step for NAME that is waiting is resolved at once ("delivered"); otherwise the
    signal is kept for the run's wait ("stored"). Exit status 1 when the run had finished
    (nothing is stored).
    """
    try:
        value = None if payload is None else json.loads(payload)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from exc
    outcome = _acting(url, pairs, lambda client: client.signal(run_id, name, value))
    if as_json:
        click.echo(json.dumps({"run": run_id, "signal": name, "outcome": outcome.value}))
        if outcome is SignalResult.RUN_FINISHED:
            raise SystemExit(1)
        return
    _done(
        outcome is not SignalResult.RUN_FINISHED,
        f"signal {name} {outcome.value} for run {run_id}",
        f"run {run_id} had finished: signal {name} was not stored",
    )
