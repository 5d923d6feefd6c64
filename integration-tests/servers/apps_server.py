"""An MCP server (stdio, the SDK's ``MCPServer``) with an MCP App and a destructive tool.

- ``show_chart(title)``: bound to the ``ui://apps/chart.html`` resource (``_meta.ui.resourceUri``,
  the MCP Apps extension), answers a text.
- ``erase(path)``: ``destructiveHint``; appends ``path`` to the file named by ``ERASE_LOG`` (so a
  test sees whether it ran) and answers ``erased PATH``.
"""

from __future__ import annotations

import os

from mcp.server.apps import Apps
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

CHART_URI = "ui://apps/chart.html"
CHART_HTML = "<!doctype html><html><body><h1 id='chart'>apps-server chart</h1></body></html>"

apps = Apps()


@apps.tool(resource_uri=CHART_URI, description="Show a chart of the given title.")
def show_chart(title: str) -> str:
    return f"chart {title}"


apps.add_html_resource(CHART_URI, CHART_HTML, name="chart", title="A chart")

server = MCPServer("apps", extensions=[apps])


@server.tool(
    description="Erase a path (it only writes down that it was asked).",
    annotations=ToolAnnotations(destructive_hint=True),
)
def erase(path: str) -> str:
    with open(os.environ["ERASE_LOG"], "a", encoding="utf-8") as log:
        log.write(path + "\n")
    return f"erased {path}"


if __name__ == "__main__":
    server.run()
