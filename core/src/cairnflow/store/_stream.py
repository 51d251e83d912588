"""A batch of new runs made while the store writes them (:class:`RunStream`).

``enqueue_many`` spends about as long in Python on each run (checking the job,
encoding its payload, building the rows) as a database that pipelines spends
writing it. Made all before the first statement is sent, none of that overlaps
the server's work; made a chunk at a time as the store sends the chunks, the
client builds the next chunk while the server writes the last one (#20, Postgres,
batches of 500 alternating batch by batch with the whole-list write: +19-20% runs/s
at the median pair; docs/benchmarks.md).

The runs' ids are made first, all of them (the client names every run before
anything is written), so a write whose outcome is lost can be sent again under
the same ids. A run once made is kept: a second reading (a transaction that is
run again, a call the client sends again) gets the very same runs. Making a run
may raise (an unknown workflow, a payload that does not encode, a capability
the store lacks): the store's transaction is then rolled back, and nothing of
the batch is written (:class:`~cairnflow.store.StreamedEnqueue`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ._records import NewRun

__all__ = ["RunStream"]


class RunStream:
    """The runs of one batch enqueue, each made when a store first reads it, then kept.

    ``ids`` are the runs' ids, in order, known before any run is made; ``make(i)``
    makes run ``i`` (its id ``ids[i]``), and may raise the client's errors.
    """

    __slots__ = ("_made", "_make", "ids")

    def __init__(self, ids: Sequence[str], make: Callable[[int], NewRun]) -> None:
        self.ids: tuple[str, ...] = tuple(ids)
        """Every run's id, in order."""
        self._make = make
        self._made: list[NewRun] = []

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"<RunStream of {len(self.ids)} run(s), {len(self._made)} made>"

    def chunks(self, size: int) -> Iterator[list[NewRun]]:
        """The runs, ``size`` at a time, in order: each chunk made as it is asked for."""
        if size < 1:
            raise ValueError(f"a chunk holds at least one run, not {size}")
        for start in range(0, len(self.ids), size):
            end = min(start + size, len(self.ids))
            self._make_through(end)
            yield self._made[start:end]

    def all(self) -> list[NewRun]:
        """Every run, made now where not made yet (a new list each call)."""
        self._make_through(len(self.ids))
        return list(self._made)

    def _make_through(self, end: int) -> None:
        """Make the runs before ``end`` not made yet, in order."""
        made, make = self._made, self._make
        while len(made) < end:
            new = make(len(made))
            if new.id != self.ids[len(made)]:
                raise ValueError(
                    f"run {len(made)} of a stream was made as {new.id!r}, "
                    f"named {self.ids[len(made)]!r}"
                )
            made.append(new)
