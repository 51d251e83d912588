"""Naming and writing new runs.

The client names every run and its step rows before it writes them
(:meth:`RunWriter.names`, with the client's id generator: the one place ids are
made), so a write can be sent again under the same names, and a store can
tell a retry whose first attempt landed from a new run
(:meth:`cairnflow.store.Store.create_runs`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import ids
from ..store import NewRun
from ._state import EngineState

__all__ = ["RunWriter"]


class RunWriter:
    """Names new runs and writes them."""

    def __init__(self, state: EngineState, id_generator: ids.IdGenerator) -> None:
        if not callable(id_generator):
            raise TypeError(f"id_generator must be callable, got {id_generator!r}")
        self._state = state
        self._generator = id_generator

    def names(self, steps: int) -> tuple[str, tuple[str, ...]]:
        """A new run id and ``steps`` step ids, each checked (a broken generator writes nothing)."""
        generator = self._generator
        run_id = ids.new_id(generator, "run")
        return run_id, tuple(ids.new_id(generator, "step") for _ in range(steps))

    def create(self, runs: Sequence[NewRun]) -> list[str]:
        """``store.create_runs(runs)``."""
        return self._state.store.create_runs(runs)
