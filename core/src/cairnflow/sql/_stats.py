"""The ``RunStats`` facet in SQL (``Cap.STATS``): three statements, each over a hot index.

* Unfinished steps by queue and status: one ``UNION ALL`` of three parts whose
  predicates are those of the partial indexes (``steps_ready``, led by the
  queue, with each queue's earliest due time; ``steps_running_queue``;
  ``steps_due``), so each part reads only the hot rows its index holds.
* Unfinished runs by queue: the ``state = 'active'`` range of ``runs_state``.
* Finished runs since ``since`` by queue, final status and bucket: a range of
  ``runs_finished`` (``finished_at``; not on MySQL / MariaDB, whose migrations cannot add an
  index safely twice: there it reads the runs); the bucket is the start of its minute,
  ``finished_at - (finished_at - since) % width`` (``%`` on integers means the
  same on every engine; ``/`` does not: MySQL's is decimal), grouped by position
  (``GROUP BY 3, 1, 2``: Postgres takes two bound copies of an expression for two
  expressions; the bucket first, so SQLite reads the finish-time range, not a walk of
  the queue index in GROUP BY order).

A dashboard calls it every few seconds: nothing here reads finished history
outside the window.
"""

from __future__ import annotations

from collections import Counter

from ..store import RunStatistics
from ..store._stats import assemble
from . import _statements as s
from ._dialect import Cursor
from ._parts import Context, Part
from ._rows import to_text

__all__ = ["Stats"]

STEP_COUNTS_NOW = """
            SELECT queue, 'ready', COUNT(*), MIN(due_at) FROM {steps}
            WHERE status = 'ready' GROUP BY queue
            UNION ALL
            SELECT queue, 'running', COUNT(*), NULL FROM {steps}
            WHERE status = 'running' GROUP BY queue
            UNION ALL
            SELECT queue, status, COUNT(*), NULL FROM {steps}
            WHERE status IN ('scheduled', 'sleeping', 'waiting') GROUP BY queue, status"""
"""Unfinished steps by queue and status, each part over its own partial index."""

ACTIVE_RUNS = """
            SELECT queue, COUNT(*) FROM {runs} WHERE state = 'active' GROUP BY queue"""
"""Unfinished runs by queue (the 'active' range of the state index)."""

ENDED_RUNS = """
            SELECT queue, state, finished_at - (finished_at - ?) % ?, COUNT(*) FROM {runs}
            WHERE finished_at >= ?
            GROUP BY 3, 1, 2"""
"""Runs finished since a time, by queue, final status and bucket (the finish-time index)."""


class Stats(Part):
    """``run_statistics``."""

    def __init__(self, context: Context) -> None:
        super().__init__(context)
        values = context.tables.template()
        self._steps_now = s.render(STEP_COUNTS_NOW, values)
        self._active_runs = s.render(ACTIVE_RUNS, values)
        self._ended_runs = s.render(ENDED_RUNS, values)

    def run_statistics(self, *, since: int, now: int, width: int) -> RunStatistics:
        """Counts by queue and status, per-queue figures, and throughput since ``since``."""

        def work(cur: Cursor) -> RunStatistics:
            steps: dict[tuple[str, str], int] = {}
            oldest: dict[str, int] = {}
            for queue, status, count, due in self._execute(cur, self._steps_now, ()).fetchall():
                steps[(to_text(queue), to_text(status))] = int(count)
                if due is not None:
                    oldest[to_text(queue)] = int(due)
            active = {
                to_text(queue): int(count)
                for queue, count in self._execute(cur, self._active_runs, ()).fetchall()
            }
            finished: Counter[tuple[str, str]] = Counter()
            ended: Counter[tuple[int, str]] = Counter()
            params = (since, width, since)
            for queue, state, start, count in self._execute(
                cur, self._ended_runs, params
            ).fetchall():
                finished[(to_text(queue), to_text(state))] += int(count)
                ended[((int(start) - since) // width, to_text(state))] += int(count)
            return assemble(
                since=since,
                now=now,
                width=width,
                active_runs=active,
                finished_runs=dict(finished),
                steps=steps,
                oldest=oldest,
                ended=dict(ended),
            )

        return self._tx.read(work)
