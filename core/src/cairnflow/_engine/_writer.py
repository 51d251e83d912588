"""Writing new runs: one run per enqueue, whatever the connection does meanwhile.

The client names every run and its step rows before it writes them
(:meth:`RunWriter.names`, with the client's id generator, the one place ids
are made). A store raises :class:`~cairnflow.Unavailable` both when it could
not write and when its connection died during the COMMIT, when the write may
well have landed: nobody can tell which. So :meth:`RunWriter.create` sends the
same runs again, with backoff, until the store answers. A store that finds
the runs' ids written returns them and writes nothing
(:meth:`cairnflow.store.Store.create_runs`), so a call makes its runs exactly
once whether the first commit landed or not, with an idempotency key or
without. After ``enqueue_timeout`` seconds of outage it gives up with
:class:`~cairnflow.OutcomeUnknown`, naming the run ids for the caller to look up.

A batch (``enqueue_many``) goes as a :class:`~cairnflow.store.RunStream`: its
runs are named first and made as the store writes them
(:class:`~cairnflow.store.StreamedEnqueue`), and a write sent again reads the
runs the first one made.

The application's own transaction (``enqueue_tx``) is never retried here: its
COMMIT is the application's, and so is retrying it (a new call, new ids).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

from .. import ids
from .._errors import OutcomeUnknown, Unavailable
from ..retry import Backoff
from ..store import NewRun, RunStream
from ._attempt import monotonic
from ._state import EngineState

__all__ = ["RunWriter"]

_BACKOFF = Backoff(initial=0.01, factor=2.0, max=1.0, jitter=0.5)
"""Pauses between writes of the same runs: 10 ms, doubling to a second, spread by half."""


class RunWriter:
    """Names new runs and writes them through outages (see the module docstring)."""

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

    def names_many(self, sizes: Sequence[int]) -> list[tuple[str, tuple[str, ...]]]:
        """:meth:`names` for runs of ``sizes`` steps each, in order.

        The default generator makes them together (:func:`cairnflow.ids.default_ids`),
        and its ids need no check; another generator is called once per id, each checked.
        """
        if self._generator is not ids.default_id_generator:
            return [self.names(size) for size in sizes]
        run_ids = ids.default_ids("run", len(sizes))
        step_ids = iter(ids.default_ids("step", sum(sizes)))
        return [
            (run_id, tuple(itertools.islice(step_ids, size)))
            for run_id, size in zip(run_ids, sizes, strict=True)
        ]

    def create(self, runs: Sequence[NewRun]) -> list[str]:
        """``store.create_runs(runs)``, sent again while the store is unavailable.

        Raises :class:`~cairnflow.OutcomeUnknown` once ``enqueue_timeout``
        seconds have passed since the first failure without an answer.
        """
        store = self._state.store
        return self._sending(lambda: store.create_runs(runs), [run.id for run in runs])

    def create_streamed(self, runs: RunStream) -> list[str]:
        """:meth:`create` for a batch whose runs are made as the store writes them."""
        streamed = self._state.facets.enqueue
        return self._sending(lambda: streamed.create_runs_streamed(runs), runs.ids)

    def _sending(self, write: Callable[[], list[str]], run_ids: Sequence[str]) -> list[str]:
        """``write()``, called again with backoff while it raises Unavailable (see create)."""
        state = self._state
        failures = 0
        first_failure = 0.0
        while True:
            try:
                return write()
            except Unavailable as error:
                now = monotonic()
                failures += 1
                if failures == 1:
                    first_failure = now
                pause = _BACKOFF.delay(failures, state.jitter())
                waited = now - first_failure
                if waited + pause > state.settings.enqueue_timeout:
                    raise OutcomeUnknown(tuple(run_ids), waited, error) from error
                state.log.info(
                    "the store was unavailable writing %d run(s) (%s): the write may have "
                    "landed; sending it again in %.3fs",
                    len(run_ids),
                    error,
                    pause,
                )
                time.sleep(pause)
