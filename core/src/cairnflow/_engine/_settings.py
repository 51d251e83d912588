"""A client's settings, checked once, in one place.

Every tuning knob of :class:`~cairnflow.Client` is validated by
:meth:`Settings.build` and nowhere else, so each rule (and its error message)
exists once, and the engine's threads read plain, already-checked values.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .._caps import Cap
from .._checks import check_int, check_seconds
from .._errors import InvalidName, Unsupported
from .._fleet import Recycle, check_recycle
from .._names import check_name
from .._queues import QueueConfig
from .._rates import Rate

__all__ = ["DEFAULT_ERROR_HISTORY", "ROLES", "Settings", "check_queues"]

_NS = 1_000_000_000

DEFAULT_WORKERS = 8
"""A client's workers when neither it nor each of its queues says how many."""

DEFAULT_ERROR_HISTORY = 20
"""The errors a run keeps where the store declares ``Cap.ERROR_HISTORY`` and no one said."""

ROLES = ("all", "worker", "scheduler")
"""What a client does: everything, run steps only, or fire schedules only."""


def _default_node_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Settings:
    """A client's tuning (see :class:`~cairnflow.Client` for what each one means)."""

    workers: int
    poll_interval: float
    lease: float
    max_reclaims: int
    node_id: str
    payload_limit: int | None
    lease_skew: float
    fetch_batch: int
    interrupt: bool
    prefetch: int = 0
    """Attempts a client may claim ahead of a free worker while its steps are short."""
    role: str = "all"
    """``all``: runs steps and fires schedules; ``worker``: runs steps only;
    ``scheduler``: fires schedules (and keeps the housekeeping) only."""
    tick_retention: float = 7 * 86_400.0
    """How long recorded schedule ticks are kept, in seconds (each schedule's newest stays)."""
    enqueue_timeout: float = 30.0
    """How long an enqueue sends its runs again while the store is unavailable, in seconds
    (0: never); then it raises :class:`~cairnflow.OutcomeUnknown`."""
    queues: tuple[QueueConfig, ...] = ()
    error_history: int = 0
    """How many errors of its last failed attempts a run keeps (``Cap.ERROR_HISTORY``; 0: none).
    A workflow's own ``error_history`` overrides it."""
    """The queues this client serves, as configured, each with its ``workers`` filled in
    (empty: the queues of its registered workflows, each with the client's workers)."""
    recycle: Recycle | None = None
    """When the client drains and stops by itself (``Cap.DRAIN``); None: never."""
    enqueue_only: bool = False
    """True for a client that only enqueues and reads (``Cap.ENQUEUE_ONLY``): never started."""

    @property
    def runs_steps(self) -> bool:
        """True unless this client is a scheduler-only node."""
        return self.role != "scheduler"

    @property
    def fires_schedules(self) -> bool:
        """True unless this client is a worker-only node."""
        return self.role != "worker"

    @property
    def lease_ns(self) -> int:
        """The lease length in nanoseconds."""
        return int(self.lease * _NS)

    @classmethod
    def build(
        cls,
        capabilities: frozenset[Cap],
        *,
        workers: object,
        poll_interval: object,
        lease: object,
        max_reclaims: object,
        node_id: object,
        payload_limit: object,
        lease_skew: object,
        fetch_batch: object,
        interrupt: object,
        prefetch: object,
        role: object = "all",
        tick_retention: object = 7 * 86_400.0,
        enqueue_timeout: object = 30.0,
        queues: object = None,
        recycle: object = None,
        enqueue_only: object = False,
        error_history: object = None,
    ) -> Settings:
        """Check every setting (``ValueError``, :class:`~cairnflow.InvalidName`, or
        :class:`~cairnflow.Unsupported` for one the store's ``capabilities`` cannot honour)."""
        configured = check_queues(capabilities, queues)
        if workers is None:
            given = [queue.workers for queue in configured]
            fixed = [n for n in given if n is not None]
            # Queues that each say how many run independent pools, as Oban's: their sum.
            workers = sum(fixed) if configured and len(fixed) == len(given) else DEFAULT_WORKERS
        workers = check_int("workers", workers, minimum=1)
        if payload_limit is not None:
            payload_limit = check_int("payload_limit (bytes)", payload_limit, minimum=1)
            if Cap.PAYLOAD_LIMIT not in capabilities:
                raise Unsupported(Cap.PAYLOAD_LIMIT, "Client(payload_limit=...)")
        node = node_id if node_id is not None else _default_node_id()
        if not isinstance(node, str) or not 1 <= len(node) <= 255 or not node.isprintable():
            raise InvalidName(f"invalid node_id {node!r}: 1 to 255 printable characters")
        checked_recycle = check_recycle(recycle)
        if checked_recycle is not None and Cap.DRAIN not in capabilities:
            raise Unsupported(Cap.DRAIN, "Client(recycle=...)")
        if not isinstance(enqueue_only, bool):
            raise TypeError(f"enqueue_only must be True or False, got {enqueue_only!r}")
        if enqueue_only:
            if Cap.ENQUEUE_ONLY not in capabilities:
                raise Unsupported(Cap.ENQUEUE_ONLY, "Client(enqueue_only=True)")
            if checked_recycle is not None:
                raise ValueError("an enqueue_only client never runs steps: it takes no recycle")
        if error_history is None:
            # The default where the store keeps histories; none (and no refusal) where not.
            kept = DEFAULT_ERROR_HISTORY if Cap.ERROR_HISTORY in capabilities else 0
        else:
            kept = check_int("error_history", error_history, minimum=0, maximum=10_000)
            if kept and Cap.ERROR_HISTORY not in capabilities:
                raise Unsupported(Cap.ERROR_HISTORY, "Client(error_history=...)")
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        return cls(
            error_history=kept,
            role=str(role),
            tick_retention=check_seconds("tick_retention", tick_retention),
            enqueue_timeout=check_seconds("enqueue_timeout", enqueue_timeout, zero=True),
            workers=workers,
            poll_interval=check_seconds("poll_interval", poll_interval),
            lease=check_seconds("lease", lease),
            max_reclaims=check_int("max_reclaims", max_reclaims, minimum=0),
            node_id=node,
            payload_limit=payload_limit,
            lease_skew=check_seconds("lease_skew", lease_skew, zero=True),
            fetch_batch=check_int("fetch_batch", fetch_batch, minimum=1),
            interrupt=bool(interrupt),
            prefetch=workers if prefetch is None else check_int("prefetch", prefetch, minimum=0),
            queues=tuple(
                queue if queue.workers is not None else replace(queue, workers=workers)
                for queue in configured
            ),
            recycle=checked_recycle,
            enqueue_only=enqueue_only,
        )


def check_queues(capabilities: frozenset[Cap], queues: object) -> tuple[QueueConfig, ...]:
    """``Client(queues=...)`` checked: QueueConfigs or names, each valid, no name twice.

    Every error names the entry it refuses (its position and what it was).
    """
    if queues is None:
        return ()
    if isinstance(queues, str | QueueConfig) or not isinstance(queues, Iterable):
        raise TypeError(
            f"queues must be a list of cairnflow.QueueConfig or queue names, got {queues!r}"
        )
    entries = list(queues)
    if not entries:
        raise ValueError(
            "queues must name at least one queue "
            "(leave it out to serve the queues of the registered workflows)"
        )
    checked: list[QueueConfig] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"queues[{index}] ({entry!r})"
        queue = QueueConfig(entry) if isinstance(entry, str) else entry
        if not isinstance(queue, QueueConfig):
            raise TypeError(f"{where}: a queue is a cairnflow.QueueConfig or a queue name")
        try:
            check_name("queue", queue.name)
        except InvalidName as error:
            raise InvalidName(f"{where}: {error}") from None
        if queue.workers is not None:
            check_int(f"{where}: workers", queue.workers, minimum=1)
        check_int(f"{where}: priority", queue.priority)
        if queue.limit is not None:
            check_int(f"{where}: limit", queue.limit, minimum=1)
            if Cap.QUEUE_LIMIT_GLOBAL not in capabilities:
                raise Unsupported(Cap.QUEUE_LIMIT_GLOBAL, f"{where}: a global limit")
        if queue.rate is not None:
            if not isinstance(queue.rate, Rate):
                raise TypeError(f"{where}: rate must be a cairnflow.Rate, got {queue.rate!r}")
            if Cap.RATE_LIMIT not in capabilities:
                raise Unsupported(Cap.RATE_LIMIT, f"{where}: a rate limit")
        if queue.name in seen:
            raise ValueError(f"{where}: queue {queue.name!r} is configured twice")
        seen.add(queue.name)
        checked.append(queue)
    # After the entries: a store is told about the most specific capability it lacks.
    if Cap.QUEUE not in capabilities:
        raise Unsupported(Cap.QUEUE, "Client(queues=...)")
    return tuple(checked)
