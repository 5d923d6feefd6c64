"""The process inside the sandbox container: persistent interpreter and the in-sandbox `mcp`
module.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
