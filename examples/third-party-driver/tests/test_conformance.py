"""The whole conformance kit on litestore."""

from cairnflow_conformance import ConformanceSuite


class TestLiteStore(ConformanceSuite):
    """Every capability litestore declares must be proven here."""
