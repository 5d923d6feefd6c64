"""Reproducible builds and digest verification of the MCP code-execution sandbox images."""

__version__ = "0.1.0"

__all__ = ["__version__"]
