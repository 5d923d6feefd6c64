"""The floor of ``bench/team.py``: a plain MCP SDK streamable-HTTP server (``MCPServer``) with the
two tools the team's clients call, answering at once: ``run_python`` (returns ``"2"``, running
nothing) and ``everything__echo``.

    python bench/_plain_http_server.py PORT
"""

from __future__ import annotations

import sys

from mcp.server import MCPServer

server = MCPServer("plain", log_level="WARNING")


@server.tool(name="run_python")
def run_python(code: str, session: str = "default") -> str:
    """Stands in for the bridge's tool: no sandbox, a fixed answer."""
    return "2"


@server.tool(name="everything__echo")
def echo(message: str) -> str:
    """Echo the message back, as server-everything's echo does."""
    return f"Echo: {message}"


if __name__ == "__main__":
    server.run("streamable-http", port=int(sys.argv[1]))
