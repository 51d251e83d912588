"""The whole conformance kit on cairnflow-pg8000: declared must equal proven."""

from __future__ import annotations

from cairnflow_conformance import ConformanceSuite


class TestPg8000(ConformanceSuite):
    """PostgreSQL through pg8000, one table prefix per test."""
