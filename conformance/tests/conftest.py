"""The kit's own tests: the plugin, and pytester for running the kit inside a test."""

pytest_plugins = ["cairnflow_conformance.plugin", "pytester"]
