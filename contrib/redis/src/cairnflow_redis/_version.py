"""The version of cairnflow-redis."""

__version__ = "0.1.0"
