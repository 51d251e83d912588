"""``python manage.py cairn_worker``: ``cairn worker`` on the store and workflows of ``CAIRNFLOW``.

The worker is the core's own command (``cairn worker``: the same signals, drain, recycle
and exit status), given the store URL, the driver options and ``--app`` from the
settings, so Django and the command line cannot run a worker two ways.
"""

from __future__ import annotations

from typing import Any

import click
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from cairnflow.cli import main as cairn

from ..._conf import config

_PASSED = (
    "workers",
    "queues",
    "poll_interval",
    "lease",
    "max_reclaims",
    "prefetch",
    "node_id",
    "max_jobs",
    "max_seconds",
    "max_memory_mb",
    "stop_when_idle",
    "drain_timeout",
    "log_level",
)
"""The options of ``cairn worker`` this command passes on (see ``cairn worker --help``)."""


class Command(BaseCommand):
    help = (
        "Run a cairnflow worker on the store of CAIRNFLOW (or of --database) with the "
        "workflows of CAIRNFLOW['APP'] until SIGTERM or SIGINT, then drain, as `cairn worker`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            default=DEFAULT_DB_ALIAS,
            help="The database whose store the worker serves [default: default].",
        )
        parser.add_argument("--app", default=None, help="module:attribute [CAIRNFLOW['APP']].")
        for name in _PASSED:
            flag = "--" + name.replace("_", "-")
            parser.add_argument(flag, default=None, help=f"`cairn worker {flag}`.")

    def handle(self, *args: Any, **options: Any) -> None:
        conf = config()
        app = options["app"] or conf.app
        if app is None:
            raise CommandError("set CAIRNFLOW['APP'] (module:attribute) or pass --app")
        argv = ["worker", conf.store_url(options["database"]), "--app", app]
        for key, value in conf.options.items():
            argv += ["-o", f"{key}={value}"]
        for name in _PASSED:
            if options[name] is not None:
                argv += ["--" + name.replace("_", "-"), str(options[name])]
        try:
            cairn.main(args=argv, prog_name="manage.py cairn_worker", standalone_mode=False)
        except click.ClickException as error:
            raise CommandError(error.format_message()) from error
