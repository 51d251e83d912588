"""The ``cairn`` command line.

Over 600 lines because it holds every command a new user meets first (worker,
migrate, runs, show, schedules, drivers) with the tables they print; the
administration commands are in :mod:`._admin`.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterable
from types import FrameType
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .. import Cap, Client, QueueConfig, Recycle, StopCause, StopReport, Workflow, __version__
from .._errors import CairnError, InvalidName, InvalidQuery
from .._models import StepInfo, StepKind, StepStatus
from ..clock import from_ns
from ..drivers import load_drivers, open_store
from ..logging import setup as setup_logging
from ..shutdown import StopRequest
from ..sql import SQLStore
from ..store import MigrationScripts, Store
from ._filters import parse_label, parse_labels, parse_since
from ._queues import parse_queues
from ._show import moment, run_json, time_of_day, took

__all__ = ["RECYCLE_EXIT_STATUS", "main", "store_option"]

RECYCLE_EXIT_STATUS = 75
"""``cairn worker``'s exit status after a recycle (``--max-jobs``, ``--max-seconds``,
``--max-memory-mb``): EX_TEMPFAIL of sysexits.h, "try again": a supervisor starts a
fresh process. A stop on a signal or when idle exits 0."""

console = Console()


def _options(pairs: Iterable[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--option")
        options[key.replace("-", "_")] = value
    return options


def _open(url: str, pairs: Iterable[str], *, migrated: bool = False) -> Store:
    """Open the store at ``url``; with ``migrated``, refuse (cleanly) one never migrated."""
    store: Store = open_store(url, **_options(pairs))
    if migrated:
        try:
            store.check_schema()
        except BaseException:
            store.close()
            raise
    return store


def _where(store: Store) -> str:
    """The store's URL and, for a SQL store, the tables it serves (``schema.prefix*``)."""
    shown = store.describe().url
    if isinstance(store, SQLStore):
        shown += f" (tables {store.tables.schema + '.' if store.tables.schema else ''}"
        shown += f"{store.tables.prefix}*)"
    return shown


store_option = click.option(
    "-o",
    "--option",
    "pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A driver option, e.g. -o table_prefix=app_ (repeatable).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cairn")
def main() -> None:
    """cairnflow: durable workflows on the database you already run."""


@main.command()
def drivers() -> None:
    """List installed drivers, their versions and capabilities."""
    table = Table(title="Installed cairnflow drivers")
    table.add_column("scheme")
    table.add_column("distribution")
    table.add_column("SPI")
    table.add_column("capabilities")
    for scheme, driver in sorted(load_drivers().items()):
        caps = ", ".join(sorted(c.value for c in driver.capabilities))
        table.add_row(f"{scheme}://", f"{driver.distribution} {driver.version}", driver.spi, caps)
    console.print(table)


@main.command()
@click.option("--db", "url", default="memory://", show_default=True, help="Store URL.")
@click.option("--runs", default=5, show_default=True, help="How many orders to run.")
@click.option("--workers", default=4, show_default=True, help="Worker threads.")
@store_option
def demo(url: str, runs: int, workers: int, pairs: tuple[str, ...]) -> None:
    """Run a small order workflow live and show what the database keeps."""
    from ._demo import run_demo

    store = _open(url, pairs)
    try:
        code = run_demo(store, runs=runs, workers=workers, console=console)
    finally:
        store.close()
    sys.exit(code)


@main.command()
@click.argument("url")
@click.option("--sql", is_flag=True, help="Print the migration SQL instead of applying it.")
@store_option
def migrate(url: str, sql: bool, pairs: tuple[str, ...]) -> None:
    """Bring the database at URL up to date (or print the SQL for a DBA)."""
    store = _open(url, pairs)
    try:
        if sql:
            if not isinstance(store, MigrationScripts):
                scheme = url.split("://", maxsplit=1)[0]
                raise click.ClickException(f"{scheme}:// has no SQL migrations")
            for version, text in store.migration_scripts():
                click.echo(f"-- {version}\n{text.rstrip()}\n")
            return
        applied = store.migrate()
        console.print(f"applied: {', '.join(applied)}" if applied else "already up to date")
    finally:
        store.close()


APP_HELP = (
    "module:attr naming the workflows to run: a Workflow, a list of workflows, or a callable "
    "returning either (module may be dotted; the current directory is importable, as with "
    "uvicorn and celery), e.g. flows:workflows."
)


def _load_app(spec: str) -> list[Workflow]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise click.BadParameter("expected module:attribute", param_hint="--app")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise click.BadParameter(
            f"cannot import {module_name!r}: {error}", param_hint="--app"
        ) from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(f"{module_name} has no {attr!r}", param_hint="--app") from None
    if callable(target) and not isinstance(target, Workflow):
        target = target()
    found = [target] if isinstance(target, Workflow) else list(target)
    if not found or not all(isinstance(w, Workflow) for w in found):
        raise click.BadParameter(
            f"{spec} must be a Workflow, a list of workflows, or a callable returning either",
            param_hint="--app",
        )
    return found


@main.command()
@click.argument("url")
@click.option("--app", "app", required=True, help=APP_HELP)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Attempts run at once [default: 8; with --queues, the sum of their workers, or 8].",
)
@click.option(
    "--queues",
    metavar="NAME[:WORKERS],...",
    callback=parse_queues,
    default=None,
    help="The queues to serve, NAME or NAME:WORKERS, comma-separated (e.g. mail:1,default) "
    "[default: the queues of the --app workflows].",
)
@click.option("--poll-interval", default=1.0, show_default=True)
@click.option("--lease", default=30.0, show_default=True)
@click.option("--max-reclaims", default=5, show_default=True)
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    default=None,
    help="Attempts claimed ahead of a free worker while steps are short [default: --workers].",
)
@click.option("--node-id", default=None)
@click.option(
    "--max-jobs",
    type=click.IntRange(min=1),
    default=None,
    help=f"Recycle: take this many attempts, drain, exit {RECYCLE_EXIT_STATUS}.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Recycle: after running this long, drain and exit {RECYCLE_EXIT_STATUS}.",
)
@click.option(
    "--max-memory-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Recycle: once resident memory reaches this (MiB), drain and exit {RECYCLE_EXIT_STATUS}.",
)
@click.option(
    "--stop-when-idle",
    "idle_grace",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Drain and exit 0 once no unfinished run of the --app workflows on the served "
    "queues existed for SECONDS.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="On SIGTERM/SIGINT, an idle stop or a recycle: how long running steps get to "
    "finish before they are handed back (a second signal hands them back at once).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="INFO shows runs finished and retries scheduled; WARNING only failures, "
    "timeouts and lease takeovers (loggers cairnflow.steps, .runs, .leases).",
)
@click.option(
    "--log-json",
    is_flag=True,
    default=False,
    help="Log one JSON object a line (run_id, workflow, step, attempt, node as fields), "
    "for a log pipeline.",
)
@store_option
def worker(
    url: str,
    app: str,
    workers: int | None,
    queues: tuple[QueueConfig, ...] | None,
    poll_interval: float,
    lease: float,
    max_reclaims: int,
    prefetch: int | None,
    node_id: str | None,
    max_jobs: int | None,
    max_seconds: float | None,
    max_memory_mb: float | None,
    idle_grace: float | None,
    drain_timeout: float,
    log_level: str,
    log_json: bool,
    pairs: tuple[str, ...],
) -> None:
    """Run workflows from --app on URL until SIGTERM or SIGINT, then drain.

    On the first SIGTERM or SIGINT the worker stops claiming, lets running steps
    finish for up to --drain-timeout seconds and hands the rest back to the other
    workers; a second signal hands them back at once. Exit status: 0 after a
    signal or --stop-when-idle; 75 (EX_TEMPFAIL) after a recycle (--max-jobs,
    --max-seconds, --max-memory-mb), for a supervisor to start a fresh process.
    """
    setup_logging(log_level, json=log_json)
    workflows = _load_app(app)
    store = _open(url, pairs)
    recycle = None
    if max_jobs is not None or max_seconds is not None or max_memory_mb is not None:
        recycle = Recycle(
            jobs=max_jobs,
            seconds=max_seconds,
            memory_mb=max_memory_mb,
            drain_timeout=drain_timeout,
        )
    try:
        client = Client(
            store,
            workers=workers,
            queues=queues,
            poll_interval=poll_interval,
            lease=lease,
            max_reclaims=max_reclaims,
            prefetch=prefetch,
            node_id=node_id,
            recycle=recycle,
        )
        client.register(*workflows)
        if idle_grace is not None:
            client.stop_when_idle(idle_grace, drain_timeout=drain_timeout)
    except BaseException:
        store.close()
        raise
    stop = StopRequest()  # its handler takes no lock (cairnflow.shutdown)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.handler(signum, frame)
        if stop.signals > 1:
            # A second signal: hand what still runs back now (it cuts the drain short; one
            # that lands before the drain began stops the client at once). From a thread of
            # its own, never from the handler: the handler runs in the main thread between
            # two of its bytecodes, maybe inside the drain's own stop, holding the lock
            # stop() takes (a worker that never exited, seen on a busy machine).
            threading.Thread(target=client.stop, name="cairn-stop", daemon=True).start()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    client.start()
    names = ", ".join(w.name for w in workflows)
    served = ", ".join(q.name for q in queues) if queues else "their queues"
    console.print(f"worker {client.node_id} running {names} ({served}) on {_where(store)}")
    report: StopReport | None = None
    try:
        # Until a signal, or until the client stops by itself (idle, recycle: then its own
        # thread drains it), which the wait looks at every slice.
        stop.wait(until=lambda: not client.running)
        if client.running:
            console.print(f"draining: running steps get up to {drain_timeout:g}s to finish")
        report = _drain(client, drain_timeout)
    finally:
        if report is None:
            client.stop()
        store.close()
        stop.close()
    back = len(report.handed_back)
    console.print(f"stopped ({report.cause.value}); {back} attempt(s) handed back")
    if report.cause.recycle:
        sys.exit(RECYCLE_EXIT_STATUS)


def _drain(client: Client, timeout: float) -> StopReport:
    """Drain ``client`` (or wait for the stop it began itself) and return the report."""
    if Cap.DRAIN in client.capabilities:  # drain() waits for a stop begun already
        report = client.drain(timeout)
        if Cap.SHUTDOWN_REQUEUE in client.capabilities:
            return client.wait_stopped()
        return report
    client.stop(grace=timeout)  # a store without DRAIN: the same, without a report
    return StopReport(StopCause.REQUESTED)


@main.command()
@click.argument("url")
@click.option("--workflow", default=None, help="Runs of this workflow.")
@click.option("--queue", default=None, help="Runs on this queue.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    help="pending, queued, running, waiting, succeeded, failed, cancelled or discarded "
    "(repeatable: any of them).",
)
@click.option(
    "--label", "labels", multiple=True, callback=parse_labels, metavar="NAME=VALUE",
    help="Runs with this label (repeatable: all of them).",
)  # fmt: skip
@click.option(
    "--label-prefix", callback=parse_label, metavar="NAME=PREFIX",
    help="Runs whose label NAME starts with PREFIX.",
)  # fmt: skip
@click.option("--tenant", default=None, help="Runs of this tenant.")
@click.option(
    "--since", callback=parse_since, metavar="WHEN",
    help="Runs created since WHEN: a duration before now (30s, 90m, 2h, 7d) or an ISO time.",
)  # fmt: skip
@click.option("--limit", default=50, show_default=True, help="Runs per page (1 to 1000).")
@click.option("--cursor", default=None, help="The next page: the cursor a listing printed.")
@click.option("--count", is_flag=True, help="Also count every run the filters match.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, then the cursor.")
@store_option
def runs(
    url: str,
    workflow: str | None,
    queue: str | None,
    statuses: tuple[str, ...],
    labels: dict[str, str],
    label_prefix: tuple[str, str] | None,
    tenant: str | None,
    since: int | None,
    limit: int,
    cursor: str | None,
    count: bool,
    as_json: bool,
    pairs: tuple[str, ...],
) -> None:
    """List runs in URL, newest first, filtered (every filter given must hold)."""
    store = _open(url, pairs, migrated=True)
    try:
        listing = Client(store).runs(
            workflow=workflow,
            queue=queue,
            status=statuses or None,
            labels=labels,
            label_prefix=label_prefix,
            tenant=tenant,
            created_since=since,
            limit=limit,
            cursor=cursor,
            count=count,
        )
    except (InvalidQuery, InvalidName) as error:
        raise click.UsageError(str(error)) from None
    finally:
        store.close()
    if as_json:
        for run in listing.runs:
            click.echo(
                json.dumps(
                    {
                        "id": run.id,
                        "workflow": run.workflow,
                        "queue": run.queue,
                        "status": run.status.value,
                        "labels": dict(run.labels),
                        "tenant": run.tenant,
                        "created_at_ns": run.created_at_ns,
                        "finished_at_ns": run.finished_at_ns,
                        "failed_step": run.failed_step,
                        "error": run.error_summary,
                        "steps": dict(run.step_counts),
                    }
                )
            )
        click.echo(json.dumps({"cursor": listing.cursor, "total": listing.total}))
        return
    table = Table(title=f"Runs in {url}")
    # A run id is never cut (it is pasted into `cairn show`): the other columns give way.
    table.add_column(
        "id", no_wrap=True, min_width=max((len(r.id) for r in listing.runs), default=2)
    )
    tenants = any(run.tenant is not None for run in listing.runs)  # Cap.TENANT, when used
    for column in ("workflow", *(("tenant",) if tenants else ()), "status", "created"):
        table.add_column(column, overflow="fold")
    for column in ("finished", "steps", "error"):
        table.add_column(column, overflow="fold")
    for run in listing.runs:
        steps = " ".join(f"{k}:{v}" for k, v in sorted(run.step_counts.items()))
        finished = (
            from_ns(run.finished_at_ns).isoformat(timespec="seconds") if run.finished_at_ns else ""
        )
        failure = f"{run.failed_step}: {run.error_summary}" if run.failed_step else ""
        table.add_row(
            run.id,
            run.workflow,
            *((run.tenant or "",) if tenants else ()),
            run.status.value,
            from_ns(run.created_at_ns).isoformat(timespec="seconds"),
            finished,
            steps,
            failure or (run.error_summary or ""),
        )
    console.print(table)
    if listing.total is not None:
        console.print(f"{listing.total} run(s) match")
    if listing.cursor is not None:
        console.print(f"more: --cursor {listing.cursor}")


@main.command()
@click.argument("url")
@click.argument("run_id")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="The run, its steps and their history as one JSON object.",
)
@store_option
def show(url: str, run_id: str, as_json: bool, pairs: tuple[str, ...]) -> None:
    """Show one run and its steps: attempts, when each started and finished, outputs, errors."""
    store = _open(url, pairs, migrated=True)
    try:
        client = Client(store)
        info = client.info(run_id)
        # Cap.STEP_HISTORY: every transition of the steps, read where the store keeps it.
        history = client.step_history(run_id) if Cap.STEP_HISTORY in store.capabilities else None
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(run_json(info, history), default=repr))
        return
    console.print(f"[bold]{info.id}[/bold] {info.workflow} [bold]{info.status.value}[/bold]")
    console.print(f"payload: {info.payload!r}  key: {info.key}  labels: {dict(info.labels)}")
    if info.tenant is not None:
        console.print(f"tenant: {info.tenant}", markup=False)
    if info.headers:
        console.print(f"headers: {dict(info.headers)}", markup=False)
    if info.error is not None:
        console.print(f"[red]error: {info.error}[/red]")
    console.print(f"created: {moment(info.created_at_ns)}  finished: {moment(info.finished_at_ns)}")
    table = Table()
    # Steps' times of day (UTC; the dates are the run's, above, and --json's): the status,
    # the attempts and the times are never cut, the node and the output give way.
    for column in ("step", "kind", "status", "attempts"):
        table.add_column(column, no_wrap=True)
    table.add_column("node", overflow="fold")
    table.add_column("started", no_wrap=True)
    table.add_column("took", no_wrap=True)
    table.add_column("output / error", overflow="fold")
    for name, step in info.steps.items():
        table.add_row(
            name,
            step.kind.value,
            step.status.value,
            str(step.attempts),
            step.node or "",
            time_of_day(step.started_at_ns),
            took(step.started_at_ns, step.finished_at_ns),
            _step_detail(step),
            style=_STEP_STYLES.get(step.status),
        )
    console.print(table)
    compensations = [s for s in info.steps.values() if s.kind is StepKind.COMPENSATION]
    if any(s.status is not StepStatus.SKIPPED for s in compensations):
        # Cap.COMPENSATION: the run failed and undid its succeeded steps (or is undoing them).
        doing = "ran" if info.finished else "runs"
        console.print(f"compensating: the run failed and {doing} the compensations of its steps")
    if info.status.value == "succeeded":
        console.print(f"result: {info.result!r}")
    if history:
        events = Table(title="history")
        for column in ("at", "step", "attempt", "event", "node"):
            events.add_column(column)
        for event in history:
            at = event.at.isoformat(timespec="milliseconds")
            events.add_row(at, event.step, str(event.attempt), event.event, event.node or "")
        console.print(events)


_STEP_STYLES = {StepStatus.SKIPPED: "dim", StepStatus.TIMED_OUT: "yellow"}
"""How ``cairn show`` marks the steps of a failure path (Cap.WAIT_BRANCH, Cap.COMPENSATION)."""


def _step_detail(step: StepInfo) -> str:
    """The output / error column of ``cairn show``: a step's output, or why it has none."""
    if step.status is StepStatus.SKIPPED:
        if step.kind is StepKind.COMPENSATION:
            return "not run: nothing to undo"
        return "not run: the other branch was taken"
    if step.status is StepStatus.TIMED_OUT:
        return f"timed out, took its on_timeout branch ({step.error})"
    if step.status is StepStatus.SUCCEEDED:
        # Its output, never an earlier error: those are history (the table below).
        shown = repr(step.output)
        if step.failures:
            shown += f"  (after {step.failures} failed attempt(s))"
        return shown
    return str(step.error) if step.error is not None else repr(step.output)


class _ListByDefault(click.Group):
    """A group whose bare ``cairn schedules URL`` means ``cairn schedules list URL``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and "://" in args[0]:
            args = ["list", *args]
        return super().parse_args(ctx, args)


@main.group(cls=_ListByDefault)
def schedules() -> None:
    """List schedules (``cairn schedules URL``), pause and resume them, fire one now."""


@schedules.command("list")
@click.argument("url")
@click.option("--workflow", default=None, help="Only the schedules of this workflow.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per schedule.")
@store_option
def schedules_list(url: str, workflow: str | None, as_json: bool, pairs: tuple[str, ...]) -> None:
    """Every stored schedule with its next fire, paused state and last fire."""
    store = _open(url, pairs, migrated=True)
    try:
        found = Client(store).schedules(workflow)
    finally:
        store.close()
    if as_json:
        for info in found:
            click.echo(
                json.dumps(
                    {
                        "workflow": info.workflow,
                        "name": info.name,
                        "id": info.id,
                        "cron": info.cron,
                        "tz": info.tz,
                        "tenant": info.schedule.tenant,
                        "next_fire_ns": info.next_fire_ns,
                        "paused": info.paused,
                        "last_fire_ns": info.last_fire_ns,
                        "last_run": None if info.last_run is None else info.last_run.id,
                    }
                )
            )
        return
    table = Table(title=f"Schedules in {url}")
    for column in ("workflow", "name", "cron", "tz", "next fire", "paused", "last fire"):
        table.add_column(column, overflow="fold")
    table.add_column("last run", no_wrap=True)
    for info in found:
        table.add_row(
            info.workflow,
            info.name,
            info.cron,
            info.tz,
            _when(info.next_fire_ns),
            "paused" if info.paused else "",
            _when(info.last_fire_ns),
            "" if info.last_run is None else info.last_run.id,
        )
    console.print(table)


def _when(ns: int | None) -> str:
    return "" if ns is None else from_ns(ns).isoformat(timespec="seconds")


@schedules.command("pause")
@click.argument("url")
@click.argument("workflow")
@click.argument("name")
@store_option
def schedules_pause(url: str, workflow: str, name: str, pairs: tuple[str, ...]) -> None:
    """Pause a schedule on every client (its ticks never fire, not even after resuming)."""
    store = _open(url, pairs, migrated=True)
    try:
        Client(store).pause_schedule(workflow, name)
    finally:
        store.close()
    console.print(f"paused {workflow}/{name}")


@schedules.command("resume")
@click.argument("url")
@click.argument("workflow")
@click.argument("name")
@store_option
def schedules_resume(url: str, workflow: str, name: str, pairs: tuple[str, ...]) -> None:
    """Resume a paused schedule from its next tick."""
    store = _open(url, pairs, migrated=True)
    try:
        Client(store).resume_schedule(workflow, name)
    finally:
        store.close()
    console.print(f"resumed {workflow}/{name}")


@main.command()
@click.argument("url")
@click.argument("workflow")
@click.option("--app", "app", required=True, help=APP_HELP)
@click.option("--payload", default="null", help="The run's payload, as JSON.")
@click.option("--key", default=None, help="An idempotency key.")
@click.option(
    "--label", "labels", multiple=True, callback=parse_labels, metavar="NAME=VALUE",
    help="A label of the run (repeatable).",
)  # fmt: skip
@click.option("--tenant", default=None, help="The tenant the run belongs to.")
@store_option
def enqueue(
    url: str,
    workflow: str,
    app: str,
    payload: str,
    key: str | None,
    labels: dict[str, str],
    tenant: str | None,
    pairs: tuple[str, ...],
) -> None:
    """Enqueue one run of WORKFLOW (declared by --app) in URL (prints the run id)."""
    try:
        data = json.loads(payload)
    except ValueError as error:
        raise click.BadParameter(f"not JSON: {error}", param_hint="--payload") from None
    workflows = _load_app(app)
    store = _open(url, pairs, migrated=True)
    try:
        client = Client(store)
        client.register(*workflows)
        ref = client.enqueue(workflow, data, key=key, labels=labels, tenant=tenant)
    finally:
        store.close()
    click.echo(ref.id)


@schedules.command("trigger")
@click.argument("url")
@click.argument("workflow")
@click.argument("name")
@click.option("--app", "app", required=True, help=APP_HELP)
@store_option
def schedules_trigger(url: str, workflow: str, name: str, app: str, pairs: tuple[str, ...]) -> None:
    """Fire a schedule now, once, outside its cron (prints the run id)."""
    workflows = _load_app(app)
    store = _open(url, pairs, migrated=True)
    try:
        client = Client(store)
        client.register(*workflows)
        ref = client.trigger_schedule(workflow, name)
    finally:
        store.close()
    click.echo(ref.id)


def run() -> None:
    """Entry point that turns cairnflow errors into a one-line message and exit code 1."""
    try:
        main(standalone_mode=False)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        sys.exit(130)
    except CairnError as error:
        console.print(f"[red]error:[/red] {error}")
        sys.exit(1)
