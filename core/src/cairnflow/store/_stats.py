"""What a dashboard draws (``Cap.STATS``, the ``RunStats`` facet): counts, queues, throughput.

A dashboard asks every few seconds, so every number is read from an index that
holds only what it counts: unfinished steps from the claim's, the reclaimer's
and the due-work partial indexes (by queue and status), unfinished runs from the
state index, and finished runs only within the window asked for (``since``)
from the finish-time index. A count of every run ever finished would read the
whole history each time; the window keeps the cost that of the window.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QueueStats", "RunStatistics", "StatusCount", "ThroughputBucket"]


@dataclass(frozen=True, slots=True)
class StatusCount:
    """How many runs (or steps) of ``queue`` have ``status``."""

    queue: str
    status: str
    count: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue now: steps ready (``queued``), running and asleep or waiting (``waiting``),
    runs failed within the window, and when its oldest ready step fell due (None: none)."""

    queue: str
    queued: int
    running: int
    waiting: int
    failed: int
    oldest_queued_at: int | None


@dataclass(frozen=True, slots=True)
class ThroughputBucket:
    """Runs that ended in ``[start, start + width)``: succeeded and failed."""

    start: int
    succeeded: int
    failed: int


@dataclass(frozen=True, slots=True)
class RunStatistics:
    """Everything ``RunStats.run_statistics`` reads, in one transaction (so it agrees).

    ``runs``: unfinished runs by queue (status ``active``) and runs finished
    since ``since`` by queue and final status; ``steps``: unfinished steps by
    queue and status (blocked steps, which wait for their parents, are not
    counted: no index holds them); ``queues``: one :class:`QueueStats` per queue
    seen in either; ``throughput``: one bucket per ``width`` nanoseconds from
    ``since``, oldest first, every bucket present (zeros included).
    """

    since: int
    width: int
    runs: tuple[StatusCount, ...]
    steps: tuple[StatusCount, ...]
    queues: tuple[QueueStats, ...]
    throughput: tuple[ThroughputBucket, ...]


def assemble(
    *,
    since: int,
    now: int,
    width: int,
    active_runs: dict[str, int],
    finished_runs: dict[tuple[str, str], int],
    steps: dict[tuple[str, str], int],
    oldest: dict[str, int],
    ended: dict[tuple[int, str], int],
) -> RunStatistics:
    """A :class:`RunStatistics` from the raw counts a store read (shared by every store)."""
    runs = [StatusCount(q, "active", n) for q, n in sorted(active_runs.items())]
    runs += [StatusCount(q, s, n) for (q, s), n in sorted(finished_runs.items())]
    step_counts = tuple(StatusCount(q, s, n) for (q, s), n in sorted(steps.items()))
    names = sorted({*active_runs, *(q for q, _ in finished_runs), *(q for q, _ in steps)})
    queues = tuple(
        QueueStats(
            queue=name,
            queued=steps.get((name, "ready"), 0),
            running=steps.get((name, "running"), 0),
            waiting=steps.get((name, "sleeping"), 0) + steps.get((name, "waiting"), 0),
            failed=finished_runs.get((name, "failed"), 0),
            oldest_queued_at=oldest.get(name),
        )
        for name in names
    )
    buckets = max((now - since + width - 1) // width, 1)
    throughput = tuple(
        ThroughputBucket(
            since + b * width, ended.get((b, "succeeded"), 0), ended.get((b, "failed"), 0)
        )
        for b in range(buckets)
    )
    return RunStatistics(since, width, tuple(runs), step_counts, queues, throughput)
