"""The pause methods of :class:`~cairnflow.Client`, in a module of their own.

A pause is a row the claim reads (the ``QueueControl`` facet), not a setting of
a client: it holds every client of the database at once, survives restarts, and
works from a client that is never started (an operator's script, ``cairn
pause``). Attempts already running finish; new ones of the paused queue or
workflow wait in the table, and enqueueing goes on. Resuming wakes this client
and tells the others (the notifier path of work made ready), so they claim at
once rather than at their next poll.
"""

from __future__ import annotations

from .._caps import Cap
from .._names import check_name
from ..store import Pause, PauseKind, QueueControl
from ..workflow import Workflow
from ._state import EngineState

__all__ = ["QueueMethods"]

_CAPS = {PauseKind.QUEUE: Cap.PAUSE_QUEUE, PauseKind.WORKFLOW: Cap.PAUSE_WORKFLOW}


class QueueMethods:
    """Pausing and resuming queues and workflows, and listing the pauses."""

    _state: EngineState

    def _control(self, cap: Cap, what: str) -> QueueControl:
        self._state.require(cap, what)
        control = self._state.facets.queue_control
        assert control is not None  # declared (required above), so check_store made sure
        return control

    def _set(self, kind: PauseKind, name: str, *, paused: bool) -> bool:
        verb = "pause" if paused else "resume"
        control = self._control(_CAPS[kind], f"{verb}_{kind.value}()")
        check_name(kind.value, name)
        if paused:
            return control.pause(kind, name, self._state.now())
        resumed = control.resume(kind, name)
        if resumed:
            self._state.work_made_ready(others=True)
        return resumed

    def pause_queue(self, name: str) -> bool:
        """Stop every client from starting attempts of queue ``name``; False if it was paused.

        Running attempts finish; runs enqueued meanwhile wait (``Cap.PAUSE_QUEUE``).
        """
        return self._set(PauseKind.QUEUE, name, paused=True)

    def resume_queue(self, name: str) -> bool:
        """Let every client run queue ``name`` again; False if it was not paused."""
        return self._set(PauseKind.QUEUE, name, paused=False)

    def pause_workflow(self, workflow: Workflow | str) -> bool:
        """Stop every client from starting attempts of ``workflow``, on every queue.

        False if it was paused already (``Cap.PAUSE_WORKFLOW``).
        """
        name = workflow.name if isinstance(workflow, Workflow) else workflow
        return self._set(PauseKind.WORKFLOW, name, paused=True)

    def resume_workflow(self, workflow: Workflow | str) -> bool:
        """Let every client run ``workflow`` again; False if it was not paused."""
        name = workflow.name if isinstance(workflow, Workflow) else workflow
        return self._set(PauseKind.WORKFLOW, name, paused=False)

    def pauses(self) -> list[Pause]:
        """Every paused queue and workflow, by kind and name, with when it was paused."""
        # Either capability lists them; a store with neither is told it lacks PAUSE_QUEUE.
        cap = Cap.PAUSE_WORKFLOW if Cap.PAUSE_WORKFLOW in self._state.caps else Cap.PAUSE_QUEUE
        return self._control(cap, "pauses()").pauses()
