"""What the ``Retention`` facet reads and writes: a chunk of old runs to prune, an archive page.

Retention keeps the hot tables small (``Cap.RETENTION``): finished runs older
than a client's ``prune_after`` are deleted, a chunk per transaction, by the
one node that holds the prune lock (a named lock, ``Cap.LOCKS``). With
``Cap.ARCHIVE`` a chunk is moved instead: each run and its steps (their
outputs included) are copied to cold tables in the transaction that deletes
them, so a run is in exactly one place, and read back newest finish first.

A chunk names the lock its pruner holds: the store checks it in the chunk's own
transaction, so a pruner whose lock expired (it stalled, another node took
over) deletes nothing, as a step whose lease was lost writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import InvalidQuery
from ._records import StoredRun

__all__ = [
    "PRUNE_LOCK",
    "ArchivePage",
    "PruneChunk",
    "archive_cursor",
    "archive_position",
]

PRUNE_LOCK = "cairnflow.prune"
"""The named lock a pruner holds while it prunes (one node at a time)."""


@dataclass(frozen=True, slots=True)
class PruneChunk:
    """One chunk of pruning: at most ``limit`` runs finished before ``before``, oldest first.

    ``lock`` and ``token`` name the prune lock the caller holds, and ``lock_now``
    is now on the clock its expiry is compared with: the chunk applies only while
    ``token`` holds ``lock`` unexpired at ``lock_now``. ``archive`` moves the runs
    to the cold tables (``Cap.ARCHIVE``) with ``archived_at = now``, instead of
    deleting them.
    """

    before: int
    limit: int
    lock: str
    token: str
    lock_now: int
    now: int
    archive: bool = False


@dataclass(frozen=True, slots=True)
class ArchivePage:
    """Archived runs, newest finish first, with their steps; ``cursor`` of the next page."""

    runs: tuple[StoredRun, ...]
    cursor: str | None


def archive_cursor(finished_at: int, run_id: str) -> str:
    """The opaque cursor after the archived run ``run_id`` finished at ``finished_at``."""
    return f"a{finished_at}:{run_id}"


def archive_position(cursor: str) -> tuple[int, str]:
    """``(finished_at, run_id)`` of an :func:`archive_cursor`; InvalidQuery otherwise."""
    head, _, run_id = cursor.partition(":") if isinstance(cursor, str) else ("", "", "")
    if not head.startswith("a") or not head[1:].isdigit() or not run_id or len(cursor) > 300:
        raise InvalidQuery(
            f"invalid archive cursor {cursor!r}: pass an ArchivePage.cursor back as it is"
        )
    return int(head[1:]), run_id
