"""The ``cairn`` command line: demo, worker, migrate, runs, show, schedules, pauses, drivers.

The commands are defined in :mod:`._commands`; the pause commands, in a module of
their own (:mod:`._pauses`), are added to the group here.
"""

from ._commands import RECYCLE_EXIT_STATUS, main, run
from ._pauses import pause, pauses, resume

for _command in (pause, resume, pauses):
    main.add_command(_command)

__all__ = ["RECYCLE_EXIT_STATUS", "main", "run"]
