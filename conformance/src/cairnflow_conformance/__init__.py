"""The cairnflow conformance kit: the pytest plugin that proves what a store declares.

A driver distribution runs the kit from its tests::

    # tests/conftest.py
    pytest_plugins = ["cairnflow_conformance.plugin"]

    @pytest.fixture(scope="session")
    def cairnflow_target():
        return StoreTarget(factory=lambda namespace: MyStore(table_prefix=namespace))

    # tests/test_conformance.py
    class TestMyStore(ConformanceSuite): ...

A capability the store declares is accepted only once a kit test proved it on
that store; see the README's "Write a driver".
"""

from . import _rewrite  # noqa: F401 - first: the kit's asserts are rewritten by pytest
from ._kit import Kit
from ._markers import UnknownCapability, proves, refuses
from ._target import NAMESPACE_PATTERN, StoreTarget, new_namespace
from ._version import __version__
from .suite import ConformanceSuite, kit_tests, proving_tests, refusing_tests
from .traces import Traces

__all__ = [
    "NAMESPACE_PATTERN",
    "ConformanceSuite",
    "Kit",
    "StoreTarget",
    "Traces",
    "UnknownCapability",
    "__version__",
    "kit_tests",
    "new_namespace",
    "proves",
    "proving_tests",
    "refuses",
    "refusing_tests",
]
