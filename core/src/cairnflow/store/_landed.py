"""Telling a retried ``create_runs`` whose first attempt landed from a conflict.

The client names every run before it writes it, and sends a write whose
commit outcome was unknown again under the same names
(:meth:`~cairnflow.store.Store.create_runs`). A store whose write is refused
(a unique index, a key held) then looks up which of the call's run ids exist,
and :func:`landed` says what that means, the same rule for every store: all
of them under their own workflows is the earlier attempt, landed; none of
them is a conflict the store reports itself (a held key); anything between
is ids that collided, which no retry explains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._errors import CairnError
from ._records import NewRun

__all__ = ["landed"]


def landed(runs: Sequence[NewRun], existing: Mapping[str, str]) -> list[str] | None:
    """The ids of ``runs`` when an earlier attempt wrote them all; None when it wrote none.

    ``existing`` maps each id of ``runs`` found in the store to its stored
    workflow (ids not found are absent). Raises :class:`~cairnflow.CairnError`,
    naming the ids, when some exist and others do not, or one exists under
    another workflow: those are not this call's runs.
    """
    if not existing:
        return None
    if all(existing.get(new.id) == new.workflow for new in runs):
        return [new.id for new in runs]
    found = [f"{new.id} of {existing[new.id]!r}" for new in runs if new.id in existing]
    raise CairnError(
        f"{len(found)} of the {len(runs)} run id(s) given to create_runs exist already, not "
        f"as this call's runs (the id generator made ids that collided); nothing was written: "
        + ", ".join(found)
    )
