"""The version of cairnflow-postgres."""

__version__ = "0.1.0"
