"""The process inside the sandbox container: persistent interpreter and the in-sandbox ``mcp``
module.

Run it as ``python -m bridge_sandbox_client [--socket PATH]`` (console script ``bridge-sandbox``).
User code reaches the host through ``from mcp import runtime, mcp_servers``; see
``docs/sandbox-api.md``. Nothing here is imported by the host.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
