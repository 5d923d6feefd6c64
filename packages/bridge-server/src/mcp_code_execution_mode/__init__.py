"""MCP server exposing one run_python tool that runs code in a hardened container and proxies your
other MCP servers.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
