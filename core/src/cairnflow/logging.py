"""What a worker's operator reads: the engine's loggers, and a JSON formatter for log pipelines.

The engine logs through the standard :mod:`logging` module, one logger per
area, so an operator can turn each up or down alone:

* ``cairnflow.steps``: a step attempt failed (WARNING; a timeout says so), and
  the retry that was scheduled for it (INFO, with its due time);
* ``cairnflow.runs``: a run finished (INFO) or failed (WARNING);
* ``cairnflow.leases``: leases that expired and were taken back, a lease this
  node lost, an attempt abandoned after too many takeovers (WARNING);
* ``cairnflow`` itself (or the client's ``logger=``): the engine's own trouble
  (the store unavailable, a claim that failed), and a client's stop (INFO, once
  its claim loop has ended: from then on it claims nothing more).

Every record of the first three carries its facts as ``extra`` fields as well as
in its text: ``run_id``, ``workflow``, ``step``, ``attempt``, ``node``, and where
they apply ``error_type``, ``error``, ``retry_at`` (Unix nanoseconds),
``retry_in`` (seconds), ``status``, ``count``. :class:`JsonFormatter` writes
each record as one JSON object a line with those fields at the top level, for
a log pipeline to index; :func:`setup` installs it (``cairn worker --log-json``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["LEASES", "RUNS", "STEPS", "JsonFormatter", "setup"]

STEPS = "cairnflow.steps"
"""The logger of step attempts: failures, timeouts, retries scheduled."""
RUNS = "cairnflow.runs"
"""The logger of runs: finished, failed."""
LEASES = "cairnflow.leases"
"""The logger of leases: expired and taken back, lost, abandoned."""

_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)
"""The attributes every record has: what is not among them was given as ``extra``."""


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, every ``extra`` field of the record, and ``exception`` (the
    formatted traceback) when there is one. A value JSON cannot hold is written
    as its ``str()``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def setup(level: str | int = "INFO", *, json: bool = False, stream: TextIO | None = None) -> None:
    """Send every log record at ``level`` and above to ``stream`` (stderr), as text or JSON.

    What ``cairn worker --log-level LEVEL [--log-json]`` calls. It replaces the
    handlers of the root logger, so calling it twice does not print twice.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        JsonFormatter()
        if json
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
