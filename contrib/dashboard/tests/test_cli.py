"""``cairn dashboard``: found through the ``cairnflow.cli`` entry-point group, refusing to
start without credentials, and the core's stand-in when the dashboard is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cairnflow_dashboard._cli as dashboard_cli
import click
from click.testing import CliRunner

from cairnflow.cli import main
from cairnflow.cli._plugins import add_plugin_commands


def test_cairn_lists_the_dashboard_command() -> None:
    command = main.commands["dashboard"]
    assert command.callback is not None
    assert command.callback.__module__ == dashboard_cli.__name__
    help_text = CliRunner().invoke(main, ["dashboard", "--help"]).output
    for option in ("--host", "--port", "--read-only", "--app"):
        assert option in help_text
    assert "127.0.0.1" in help_text


def test_no_credentials_no_start(tmp_path: Path) -> None:
    names = (
        "CAIRNFLOW_DASHBOARD_TOKEN",
        "CAIRNFLOW_DASHBOARD_USER",
        "CAIRNFLOW_DASHBOARD_PASSWORD",
    )
    env = dict.fromkeys(names, "")
    done = subprocess.run(
        [sys.executable, "-m", "cairnflow", "dashboard", f"sqlite:///{tmp_path / 'x.db'}"],
        capture_output=True, text=True, timeout=120, check=False, env={**_base_env(), **env},
    )  # fmt: skip
    assert done.returncode == 1
    assert "needs credentials" in done.stderr + done.stdout
    assert not (tmp_path / "x.db").exists()  # refused before the store was opened


def test_a_missing_dashboard_says_how_to_install_it() -> None:
    group = click.Group("cairn")
    add_plugin_commands(group)  # the installed dashboard registers itself...
    assert group.commands["dashboard"].help == dashboard_cli.dashboard.help
    bare = click.Group("cairn")
    add_plugin_commands(bare, "cairnflow.cli.none-installed")  # where it is not: a stand-in
    result = CliRunner().invoke(bare, ["dashboard", "sqlite:///x.db", "--port", "1"])
    assert result.exit_code == 1
    assert "pip install cairnflow-dashboard" in result.output


def _base_env() -> dict[str, str]:
    import os

    return dict(os.environ)
