"""The ``cairn`` command line: demo, worker, migrate, runs, show, drivers."""

from ._commands import main, run

__all__ = ["main", "run"]
