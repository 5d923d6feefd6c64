"""Streamable HTTP transport: one shared bridge, several clients."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client

from .conftest import bridge_env, open_http_bridge


async def test_http_transport_serves_several_clients(tmp_path: Path) -> None:
    async with open_http_bridge(tmp_path) as bridge:
        with anyio.fail_after(60):
            async with (
                Client(bridge.url) as first,
                Client(bridge.url, mode="legacy") as second,
            ):
                tools = (await first.list_tools()).tools
                bad = await second.call_tool("run_python", {"code": "   "})
    assert [t.name for t in tools] == ["run_python"]
    assert bad.is_error is True
    text = bad.content[0]
    assert isinstance(text, types.TextContent)
    assert "'code'" in text.text


def test_bad_http_address_is_a_one_line_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "serve", "--http", "nowhere"],
        capture_output=True, text=True, timeout=60, check=False, env=bridge_env(),
    )  # fmt: skip
    assert done.returncode == 2
    assert "--http='nowhere'" in done.stderr
    assert "Traceback" not in done.stderr
