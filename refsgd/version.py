"""The version of refsgd (the package re-exports it; setup.cfg reads it from here)."""

__version__ = "0.1.0"
