"""Named fault points: where the chaos tests make a process crash, fail or stall (private).

A durable engine is only as good as what happens when a process dies in the
worst place. These are the worst places, named and listed here, in
:data:`POINTS`, and nowhere else; the code at each one reads::

    if _faults.plan is not None:
        _faults.fire(_faults.OUTCOME_BEFORE_COMMIT)

so with no faults armed (always, outside tests) a point costs one module
attribute read. Faults are armed for a whole process: from the
``CAIRNFLOW_FAULTS`` environment variable when cairnflow is imported (how the
chaos tests arm their worker subprocesses), or by
:func:`cairnflow.testing.faults` in a test. The variable holds a comma list of
``point=action[:seconds][@probability][#times]``::

    CAIRNFLOW_FAULTS="outcome.before_commit=kill@0.02,sql.after_commit=raise@0.05"

``kill`` sends SIGKILL to this process (a crash: nothing runs after it);
``raise`` raises :class:`FaultInjected`, an :class:`~cairnflow.Unavailable`
(what a lost connection looks like to the caller); ``stall:N`` sleeps N
seconds in the calling thread (a stalled scheduler, a long GC pause).
``@p`` fires with probability p each time the point is passed (default 1);
``#n`` fires at most n times in this process. Observers (see :func:`arm`) are
told before the action, so a kill can be recorded before it lands.

This is not a public API: the points move with the code they sit in.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from ._errors import Unavailable

__all__ = [
    "CLAIM_BEFORE_COMMIT",
    "ENV",
    "LIFECYCLE_AFTER_CLAIM",
    "LIFECYCLE_BEFORE_RENEW",
    "OUTCOME_BEFORE_COMMIT",
    "POINTS",
    "SQL_AFTER_COMMIT",
    "Action",
    "Fault",
    "FaultInjected",
    "arm",
    "disarm",
    "fire",
    "fired",
    "parse",
    "plan",
]

ENV = "CAIRNFLOW_FAULTS"
"""The environment variable read at import: the faults this process is armed with."""

CLAIM_BEFORE_COMMIT = "claim.before_commit"
OUTCOME_BEFORE_COMMIT = "outcome.before_commit"
SQL_AFTER_COMMIT = "sql.after_commit"
LIFECYCLE_AFTER_CLAIM = "lifecycle.after_claim"
LIFECYCLE_BEFORE_RENEW = "lifecycle.before_renew"

POINTS: Mapping[str, str] = MappingProxyType(
    {
        CLAIM_BEFORE_COMMIT: (
            "a claim was sent inside its transaction, which is not committed yet "
            "(sql/_claims.py: Claims.send, for claims of their own and those a batch of "
            "outcomes makes); a kill or raise here rolls the claim back"
        ),
        OUTCOME_BEFORE_COMMIT: (
            "a step's body returned and the committer is about to write its outcome "
            "(_engine/_commit.py: GroupCommit._write, once per batch); a kill here loses the "
            "outcome, so the step runs again after its lease"
        ),
        SQL_AFTER_COMMIT: (
            "a write transaction's COMMIT succeeded and its caller is about to learn it "
            "(sql/_transactions.py: Transactions.committing); raise plays a connection lost "
            "during COMMIT: the caller sees Unavailable for work that was written"
        ),
        LIFECYCLE_AFTER_CLAIM: (
            "a lifecycle dispatcher leased a batch of events and called no subscriber yet "
            "(_engine/_lifecycle.py: LifecycleDispatcher.deliver); a kill or a stall past the "
            "lease leaves the events to another client"
        ),
        LIFECYCLE_BEFORE_RENEW: (
            "an on_failure handler runs and its dispatcher is about to renew its lease "
            "(_engine/_lifecycle.py: LifecycleDispatcher._run_handler); a stall past the lease "
            "lets another client take the failed run over, and fences this handler out"
        ),
    }
)
"""Every fault point: its name and where it is (the one list)."""


class Action(StrEnum):
    """What a fault does when it fires."""

    KILL = "kill"
    RAISE = "raise"
    STALL = "stall"


class FaultInjected(Unavailable):
    """Raised by a ``raise`` fault: to its caller, the store became unavailable right there."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One armed fault: at ``point``, do ``action`` with ``probability``, ``times`` at most."""

    point: str
    action: Action
    probability: float = 1.0
    seconds: float = 0.0
    """How long a ``stall`` sleeps."""
    times: int | None = None
    """Fire at most this many times in this process (None: no limit)."""

    def __str__(self) -> str:
        text = f"{self.point}={self.action.value}"
        if self.action is Action.STALL:
            text += f":{self.seconds:g}"
        if self.probability != 1.0:
            text += f"@{self.probability:g}"
        if self.times is not None:
            text += f"#{self.times}"
        return text


Observer = Callable[[Fault], None]


class _Plan:
    """The armed faults of this process, and how often each one fired."""

    def __init__(
        self, faults: Iterable[Fault], observers: Iterable[Observer], threads: str | None = None
    ) -> None:
        self.threads = threads
        """Fire only in threads whose name starts so (None: in every thread)."""
        self.faults: dict[str, Fault] = {}
        for fault in faults:
            if fault.point in self.faults:
                raise ValueError(f"fault point {fault.point!r} is armed twice")
            self.faults[fault.point] = fault
        self.observers = tuple(observers)
        self.fired: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.random = random.Random()  # chance, not secrets

    def take(self, point: str) -> Fault | None:
        """The fault to act on at ``point`` now, counted; None when it does not fire."""
        fault = self.faults.get(point)
        if fault is None:
            return None
        if self.threads is not None and not threading.current_thread().name.startswith(
            self.threads
        ):
            return None
        with self.lock:
            if fault.times is not None and self.fired[point] >= fault.times:
                return None
            if fault.probability < 1.0 and self.random.random() >= fault.probability:
                return None
            self.fired[point] += 1
        return fault


plan: _Plan | None = None
"""The armed faults, or None (every point is then one read of this name)."""


def parse(spec: str) -> list[Fault]:
    """The faults of a ``CAIRNFLOW_FAULTS`` value (see the module docstring)."""
    faults = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        point, sep, rest = item.partition("=")
        point = point.strip()
        if not sep or point not in POINTS:
            known = ", ".join(sorted(POINTS))
            raise ValueError(f"{item!r}: expected POINT=ACTION with POINT one of {known}")
        times: int | None = None
        if "#" in rest:
            rest, count = rest.split("#", 1)
            times = int(count)
            if times < 1:
                raise ValueError(f"{item!r}: #times must be at least 1")
        probability = 1.0
        if "@" in rest:
            rest, chance = rest.split("@", 1)
            probability = float(chance)
            if not 0.0 < probability <= 1.0:
                raise ValueError(f"{item!r}: @probability must be in (0, 1]")
        name, _, argument = rest.partition(":")
        try:
            action = Action(name.strip())
        except ValueError:
            actions = ", ".join(a.value for a in Action)
            raise ValueError(f"{item!r}: the action must be one of {actions}") from None
        seconds = 0.0
        if action is Action.STALL:
            seconds = float(argument) if argument else 1.0
            if seconds < 0:
                raise ValueError(f"{item!r}: a stall lasts 0 seconds or more")
        elif argument:
            raise ValueError(f"{item!r}: only stall takes :seconds")
        faults.append(Fault(point, action, probability, seconds, times))
    return faults


def arm(
    faults: Iterable[Fault] | str, observers: Iterable[Observer] = (), threads: str | None = None
) -> None:
    """Arm ``faults`` (or a ``CAIRNFLOW_FAULTS`` value) in this process, replacing any armed.

    ``observers`` are called with each fault that fires, before it acts. ``threads``:
    the faults fire only in threads whose name starts with it (a client's threads are
    named by role: ``cairnflow-committer-<node>``, ``cairnflow-dispatcher-<node>``...).
    """
    global plan
    plan = _Plan(parse(faults) if isinstance(faults, str) else faults, observers, threads)


def disarm() -> None:
    """Disarm every fault point: each one is a single read again."""
    global plan
    plan = None


def fired() -> dict[str, int]:
    """How many times each point fired since the faults were armed (empty when none are)."""
    armed = plan
    if armed is None:
        return {}
    with armed.lock:
        return dict(armed.fired)


def fire(point: str) -> None:
    """Pass fault point ``point``: act if a fault is armed there and fires now."""
    armed = plan
    if armed is None:
        return
    fault = armed.take(point)
    if fault is None:
        return
    for observer in armed.observers:
        observer(fault)
    if fault.action is Action.KILL:
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # the signal is asynchronous on some kernels: never go on from here
    elif fault.action is Action.STALL:
        time.sleep(fault.seconds)
    else:
        raise FaultInjected(f"fault injected at {point}: the store became unavailable here")


if os.environ.get(ENV):
    arm(os.environ[ENV])
