"""The version of cairnflow-sqlite."""

__version__ = "0.1.0"
