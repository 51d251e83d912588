"""The distribution's version (kept equal to pyproject.toml's by the tests)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
