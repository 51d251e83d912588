"""What ``cairn show`` prints of one run: its steps' times in the table, and ``--json``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._errors import ErrorInfo
from .._models import RunInfo, StepEvent
from ..clock import from_ns

__all__ = ["moment", "run_json", "time_of_day", "took"]


def moment(ns: int | None) -> str:
    """A run's time: the UTC date and time to the millisecond, or nothing."""
    return "" if ns is None else from_ns(ns).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def time_of_day(ns: int | None) -> str:
    """A step's start in the table: the UTC time of day to the millisecond, or nothing."""
    return "" if ns is None else from_ns(ns).strftime("%H:%M:%S.%f")[:-3]


def took(started_ns: int | None, finished_ns: int | None) -> str:
    """How long a finished step's last attempt took: from its claim to the step's final status."""
    if started_ns is None or finished_ns is None:
        return ""
    seconds = max(0, finished_ns - started_ns) / 1e9
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def _error_json(error: ErrorInfo | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {
        "type": error.type,
        "message": error.message,
        "step": error.step,
        "attempt": error.attempt,
        "traceback": error.traceback,
    }


def run_json(info: RunInfo, history: Iterable[StepEvent] | None) -> dict[str, Any]:
    """``cairn show --json``: the run, its steps with their times (Unix ns), its history."""
    steps = {
        name: {
            "kind": step.kind.value,
            "status": step.status.value,
            "attempts": step.attempts,
            "failures": step.failures,
            "reclaims": step.reclaims,
            "node": step.node,
            "due_at_ns": step.due_at_ns,
            "started_at_ns": step.started_at_ns,
            "finished_at_ns": step.finished_at_ns,
            "duration_ns": (
                None
                if step.started_at_ns is None or step.finished_at_ns is None
                else max(0, step.finished_at_ns - step.started_at_ns)
            ),
            "output": step.output,
            "error": _error_json(step.error),
        }
        for name, step in info.steps.items()
    }
    return {
        "id": info.id,
        "workflow": info.workflow,
        "queue": info.queue,
        "status": info.status.value,
        "payload": info.payload,
        "key": info.key,
        "labels": dict(info.labels),
        "headers": dict(info.headers),
        "tenant": info.tenant,
        "created_at_ns": info.created_at_ns,
        "run_at_ns": info.run_at_ns,
        "finished_at_ns": info.finished_at_ns,
        "result": info.result,
        "error": _error_json(info.error),
        "steps": steps,
        "history": None
        if history is None
        else [
            {
                "seq": event.seq,
                "at_ns": event.at_ns,
                "step": event.step,
                "attempt": event.attempt,
                "event": event.event,
                "node": event.node,
            }
            for event in history
        ],
    }
