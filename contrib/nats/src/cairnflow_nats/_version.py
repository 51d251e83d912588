"""The version of cairnflow-nats."""

__version__ = "0.1.0"
