"""Real tool lists captured once from real MCP servers (``tools/list`` over stdio, SDK client):
server-everything, server-filesystem, server-memory (npm) and mcp-server-time, mcp-server-git
(PyPI). To refresh, list the tools with the SDK client and dump each ``Tool`` with
``model_dump(by_alias=True, mode="json", exclude_none=True)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bridge_core.catalog import ToolDoc
from mcp.types import Tool

FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = ("everything", "filesystem", "memory", "time", "git")


def load_tools(server: str) -> list[Tool]:
    data = json.loads((FIXTURES / f"tools_{server}.json").read_text())
    return [Tool.model_validate(t) for t in data["tools"]]


@pytest.fixture(scope="session")
def real_tools() -> dict[str, list[Tool]]:
    return {server: load_tools(server) for server in SERVERS}


@pytest.fixture(scope="session")
def real_docs(real_tools: dict[str, list[Tool]]) -> list[ToolDoc]:
    return [ToolDoc.from_tool(server, t) for server, tools in real_tools.items() for t in tools]
