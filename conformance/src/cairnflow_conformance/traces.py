"""Side effects that steps leave behind, readable from any process.

A step running in a worker process cannot append to a list in the test, so it
leaves a *trace*: one small JSON file per event, written atomically (a temporary
file renamed into place), in a directory the test passes in the run's payload.
The test counts them to check how often a step really executed, which the
store alone cannot tell (a killed attempt never wrote anything there).

Flags go the other way: the test creates one (``release``) and a step polls
for it, so a test can hold a step at a chosen point across processes.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Traces"]


class Traces:
    """Trace files and flags under one directory (created on first use)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _dir(self, name: str) -> Path:
        path = self.directory / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def record(self, kind: str, **fields: Any) -> None:
        """Leave one trace of ``kind`` with ``fields`` (JSON values) and the writer's pid."""
        body = {"kind": kind, "pid": os.getpid(), **fields}
        folder = self._dir("traces")
        name = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
        partial = folder / f".{name}.tmp"
        partial.write_text(json.dumps(body), encoding="utf-8")
        os.replace(partial, folder / f"{name}.json")

    def read(self, kind: str | None = None, **match: Any) -> list[dict[str, Any]]:
        """Every trace (of ``kind``, whose fields equal ``match``), oldest first."""
        folder = self.directory / "traces"
        if not folder.is_dir():
            return []
        found: list[dict[str, Any]] = []
        for path in sorted(folder.glob("*.json")):
            body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            if kind is not None and body.get("kind") != kind:
                continue
            if any(body.get(k) != v for k, v in match.items()):
                continue
            found.append(body)
        return found

    def count(self, kind: str | None = None, **match: Any) -> int:
        """How many traces :meth:`read` would return."""
        return len(self.read(kind, **match))

    def flag(self, name: str) -> None:
        """Raise flag ``name`` (idempotent)."""
        (self._dir("flags") / name).touch()

    def flagged(self, name: str) -> bool:
        """True once flag ``name`` is raised."""
        return (self.directory / "flags" / name).exists()

    def wait_for_flag(self, name: str, timeout: float) -> bool:
        """Poll for flag ``name`` every 10 ms; False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.flagged(name):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> Traces:
        """The traces named by a kit payload's ``"traces"`` entry."""
        return cls(str(payload["traces"]))
