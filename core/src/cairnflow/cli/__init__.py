"""The ``cairn`` command line: demo, worker, migrate, runs, show, schedules, pauses, drivers,
retry, cancel, delete, signal, stats, servers, lifecycle.

The commands are defined in :mod:`._commands`; the pause commands (:mod:`._pauses`),
the run timing commands (:mod:`._timing`), the operator's acts on runs (:mod:`._admin`)
``cairn stats`` / ``cairn servers`` (:mod:`._stats`) and ``cairn lifecycle``
(:mod:`._lifecycle`), in modules of their own, are
added to the group here, then the commands other distributions declare in the
``cairnflow.cli`` entry-point group (:mod:`._plugins`), such as ``cairn dashboard``.
"""

from ._admin import cancel, delete, retry, signal
from ._commands import RECYCLE_EXIT_STATUS, main, run
from ._lifecycle import lifecycle
from ._pauses import pause, pauses, resume
from ._plugins import add_plugin_commands
from ._stats import servers, stats
from ._timing import due, run_group

for _command in (
    pause,
    resume,
    pauses,
    run_group,
    due,
    retry,
    cancel,
    delete,
    signal,
    stats,
    servers,
    lifecycle,
):
    main.add_command(_command)
add_plugin_commands(main)

__all__ = ["RECYCLE_EXIT_STATUS", "main", "run"]
