"""Commands other distributions add to ``cairn``: the ``cairnflow.cli`` entry-point group.

An optional distribution (``cairnflow-dashboard`` with ``cairn dashboard``) ships its
command without the core knowing it: it declares a :class:`click.Command` in its
``pyproject.toml``::

    [project.entry-points."cairnflow.cli"]
    dashboard = "cairnflow_dashboard._cli:dashboard"

and ``cairn`` adds every command of the group when it starts. A command that fails to
load is left out with a warning on stderr (one broken plugin does not take ``cairn``
down), and a command of the core is never replaced. Where the dashboard is not
installed, ``cairn dashboard`` says how to install it rather than "no such command".
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

import click

__all__ = ["ENTRY_POINT_GROUP", "add_plugin_commands"]

ENTRY_POINT_GROUP = "cairnflow.cli"

_NOT_INSTALLED = {"dashboard": "cairnflow-dashboard"}
"""Commands of optional distributions, by name, and the distribution that brings each."""


def add_plugin_commands(group: click.Group, entry_point_group: str = ENTRY_POINT_GROUP) -> None:
    """Add every command of the ``cairnflow.cli`` group; stand-ins for known absent ones."""
    for point in entry_points(group=entry_point_group):
        if point.name in group.commands:
            continue  # the core's own command wins
        try:
            command = point.load()
        except Exception as error:  # noqa: BLE001 - a broken plugin must not break cairn
            print(f"cairn: cannot load command {point.name!r} ({point.value}): {error}",
                  file=sys.stderr)  # fmt: skip
            continue
        if not isinstance(command, click.Command):
            print(f"cairn: {point.value} is not a click command; {point.name!r} left out",
                  file=sys.stderr)  # fmt: skip
            continue
        group.add_command(command, point.name)
    for name, distribution in _NOT_INSTALLED.items():
        if name not in group.commands:
            group.add_command(_missing(name, distribution), name)


def _missing(name: str, distribution: str) -> click.Command:
    @click.command(
        name,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        help=f"(not installed: pip install {distribution})",
    )
    def command() -> None:
        raise click.ClickException(
            f"`cairn {name}` comes with {distribution}: pip install {distribution}"
        )

    return command
