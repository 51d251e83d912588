"""How a client stops, as a fleet needs it: why it stopped and what it handed back.

A deploy replaces processes; a supervisor restarts the ones that stop. Both need
a client that stops cleanly (``Client.drain``, ``Cap.DRAIN``), says why
(:class:`StopCause`) and names the attempts it handed back to the others
(:class:`StopReport`, ``Cap.SHUTDOWN_REQUEUE``), and that stops by itself when
it is idle (``Client.stop_when_idle``) or has done enough (:class:`Recycle`):
a process that ran for days, or grew, is replaced by a fresh one. These are
plain values; the engine's side is ``_engine/_watch.py`` and ``Client``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from ._checks import check_int, check_seconds

__all__ = ["HandedBack", "Recycle", "StopCause", "StopReport", "check_recycle"]


class StopCause(StrEnum):
    """Why a client stopped (the ``cause`` of its :class:`StopReport`)."""

    REQUESTED = "requested"
    """``Client.stop()`` was called."""
    DRAINED = "drained"
    """``Client.drain()`` was called (``cairn worker`` on SIGTERM or SIGINT)."""
    IDLE = "idle"
    """``Client.stop_when_idle(grace)``: no unfinished run of its workflows for ``grace``."""
    RECYCLE_JOBS = "recycle_jobs"
    """:attr:`Recycle.jobs` attempts were taken."""
    RECYCLE_TIME = "recycle_time"
    """The client ran for :attr:`Recycle.seconds`."""
    RECYCLE_MEMORY = "recycle_memory"
    """The process's resident memory reached :attr:`Recycle.memory_mb`."""

    @property
    def recycle(self) -> bool:
        """True for a recycle: the process should be replaced by a fresh one."""
        return self in _RECYCLES


_RECYCLES = frozenset({StopCause.RECYCLE_JOBS, StopCause.RECYCLE_TIME, StopCause.RECYCLE_MEMORY})


@dataclass(frozen=True, slots=True)
class HandedBack:
    """One attempt a stopping client gave back, ready for another client at once.

    It is not a failure of the step: the next client runs it as attempt
    ``attempt + 1`` with the same failure count.
    """

    run_id: str
    step: str
    attempt: int


@dataclass(frozen=True, slots=True)
class StopReport:
    """What a stop did: its ``cause``, and the attempts it ``handed_back``.

    The attempts are named with ``Cap.SHUTDOWN_REQUEUE``.

    An attempt whose outcome was already decided when the client stopped is
    not handed back: its outcome is written (once), as every other.
    """

    cause: StopCause
    handed_back: tuple[HandedBack, ...] = ()


@dataclass(frozen=True, slots=True)
class Recycle:
    """When a client drains and stops by itself so that a supervisor starts a fresh process.

    ``jobs``: after taking this many attempts (it claims no more than that,
    and lets them finish). ``seconds``: after running this long.
    ``memory_mb``: once the process's resident memory reaches this many MiB.
    ``drain_timeout``: how long the attempts still running then get to finish
    before they are handed back. ``cairn worker`` exits with status 75 after a
    recycle (``--max-jobs``, ``--max-seconds``, ``--max-memory-mb``).
    """

    jobs: int | None = None
    seconds: float | None = None
    memory_mb: float | None = None
    drain_timeout: float = 30.0


def check_recycle(recycle: object) -> Recycle | None:
    """``Client(recycle=...)`` checked: a :class:`Recycle` with at least one limit, each valid."""
    if recycle is None:
        return None
    if not isinstance(recycle, Recycle):
        raise TypeError(f"recycle must be a cairnflow.Recycle, got {recycle!r}")
    if recycle.jobs is None and recycle.seconds is None and recycle.memory_mb is None:
        raise ValueError("recycle needs at least one limit: jobs, seconds or memory_mb")
    if recycle.jobs is not None:
        check_int("recycle.jobs", recycle.jobs, minimum=1)
    if recycle.seconds is not None:
        check_seconds("recycle.seconds", recycle.seconds)
    memory = recycle.memory_mb
    if memory is not None and (
        isinstance(memory, bool)
        or not isinstance(memory, int | float)
        or not math.isfinite(memory)
        or memory <= 0
    ):
        raise ValueError(f"recycle.memory_mb must be a finite number of MiB > 0, got {memory!r}")
    check_seconds("recycle.drain_timeout", recycle.drain_timeout, zero=True)
    return recycle
