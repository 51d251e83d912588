"""The ``cairn`` command line: demo, worker, migrate, runs, show, schedules, pauses, drivers,
retry, cancel, delete.

The commands are defined in :mod:`._commands`; the pause commands (:mod:`._pauses`)
and the operator's acts on runs (:mod:`._admin`), in modules of their own, are
added to the group here.
"""

from ._admin import cancel, delete, retry
from ._commands import main, run
from ._pauses import pause, pauses, resume

for _command in (pause, resume, pauses, retry, cancel, delete):
    main.add_command(_command)

__all__ = ["main", "run"]
