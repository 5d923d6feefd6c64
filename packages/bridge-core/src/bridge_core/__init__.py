"""Discovery, upstream MCP proxy, tool search, session manager and container runtimes of the MCP
code-execution bridge.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
