"""The version of this distribution and of the Store SPI it provides."""

__all__ = ["SPI_VERSION", "__version__"]

__version__ = "0.1.0"

SPI_VERSION = "1.0"
"""The Store SPI version this core provides. A driver declares the range it
implements; the core refuses one built for another major version."""
