"""Imported first by the package: the kit's assertions show their values in a driver's run.

pytest rewrites the asserts of test modules only; the kit's tests live in this
installed package, so it asks for its own modules to be rewritten too, before
they are first imported (without a driver's conftest having to ask).
"""

import pytest

pytest.register_assert_rewrite(
    "cairnflow_conformance.suite", "cairnflow_conformance._kit", "cairnflow_conformance.traces"
)
