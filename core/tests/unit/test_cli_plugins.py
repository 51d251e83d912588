"""The ``cairnflow.cli`` entry-point seam: other distributions add commands to ``cairn``."""

from __future__ import annotations

import click
from click.testing import CliRunner

from cairnflow.cli import main
from cairnflow.cli._plugins import add_plugin_commands


def test_a_missing_dashboard_says_how_to_install_it() -> None:
    group = click.Group("cairn")
    add_plugin_commands(group, "cairnflow.cli.nothing-declared-here")
    result = CliRunner().invoke(group, ["dashboard", "sqlite:///x.db", "--read-only"])
    assert result.exit_code == 1
    assert "pip install cairnflow-dashboard" in result.output


def test_a_plugin_never_replaces_a_core_command() -> None:
    group = click.Group("cairn")
    core = click.Command("dashboard", callback=lambda: None)
    group.add_command(core)
    add_plugin_commands(group)
    assert group.commands["dashboard"] is core


def test_the_core_commands_are_all_there() -> None:
    for name in ("worker", "runs", "show", "stats", "servers", "retry", "dashboard"):
        assert name in main.commands


def test_migrate_sql_says_which_stores_have_no_sql() -> None:
    result = CliRunner().invoke(main, ["migrate", "memory://", "--sql"])
    assert result.exit_code == 1
    assert "memory:// has no SQL migrations" in result.output


def test_the_sql_store_and_not_the_memory_store_has_migration_scripts() -> None:
    from cairnflow.sql import SQLStore
    from cairnflow.store import MemoryStore, MigrationScripts

    assert issubclass(SQLStore, MigrationScripts)
    assert not isinstance(MemoryStore(), MigrationScripts)
