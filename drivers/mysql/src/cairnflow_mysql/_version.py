"""The version of cairnflow-mysql."""

__version__ = "0.1.0"
