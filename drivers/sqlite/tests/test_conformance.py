"""The conformance kit on SQLite: every capability the driver declares, proven."""

from __future__ import annotations

from cairnflow_conformance import ConformanceSuite


class TestSQLite(ConformanceSuite):
    """``sqlite:///file`` in WAL mode, with worker processes sharing the file."""
