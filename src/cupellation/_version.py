"""The package's version, in a module of its own so that every layer may read it
(the package root imports nearly everything, so no module imports it back)."""

__all__ = ["__version__"]

__version__ = "0.4.0"
