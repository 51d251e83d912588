"""The ``cairn`` command line: demo, worker, migrate, runs, show, schedules, pauses, stats,
servers, drivers.

The commands are defined in :mod:`._commands`; the pause commands, in a module of
their own (:mod:`._pauses`), and ``cairn stats`` / ``cairn servers`` (:mod:`._stats`) are
added to the group here.
"""

from ._commands import main, run
from ._pauses import pause, pauses, resume
from ._stats import servers, stats

for _command in (pause, resume, pauses, stats, servers):
    main.add_command(_command)

__all__ = ["main", "run"]
