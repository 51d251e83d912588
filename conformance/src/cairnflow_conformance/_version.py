"""The version of the conformance kit (kept equal to the distribution's by a self-test)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
