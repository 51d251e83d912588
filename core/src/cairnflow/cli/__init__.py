"""The ``cairn`` command line: demo, worker, migrate, runs, show, schedules, pauses, drivers.

The commands are defined in :mod:`._commands`; the pause commands and the run timing
commands, in modules of their own (:mod:`._pauses`, :mod:`._timing`), are added to the
group here.
"""

from ._commands import RECYCLE_EXIT_STATUS, main, run
from ._pauses import pause, pauses, resume
from ._timing import due, run_group

for _command in (pause, resume, pauses, run_group, due):
    main.add_command(_command)

__all__ = ["RECYCLE_EXIT_STATUS", "main", "run"]
