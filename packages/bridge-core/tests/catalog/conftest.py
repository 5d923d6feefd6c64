"""Real tool lists captured from real MCP servers (``tools/list`` over stdio, SDK client) by
``scripts/capture_tool_fixtures.py``, which records each server's package, version and
``serverInfo`` in its ``tools_NAME.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bridge_core.catalog import ToolDoc
from mcp.types import Tool

FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = tuple(sorted(p.stem.removeprefix("tools_") for p in FIXTURES.glob("tools_*.json")))


def load_tools(server: str) -> list[Tool]:
    data = json.loads((FIXTURES / f"tools_{server}.json").read_text())
    return [Tool.model_validate(t) for t in data["tools"]]


@pytest.fixture(scope="session")
def real_tools() -> dict[str, list[Tool]]:
    return {server: load_tools(server) for server in SERVERS}


@pytest.fixture(scope="session")
def real_docs(real_tools: dict[str, list[Tool]]) -> list[ToolDoc]:
    return [ToolDoc.from_tool(server, t) for server, tools in real_tools.items() for t in tools]
