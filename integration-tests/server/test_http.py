"""Streamable HTTP transport: one shared bridge, several clients."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client

from .conftest import bridge_env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_http_transport_serves_several_clients(tmp_path: Path) -> None:
    port = _free_port()
    config = tmp_path / "servers.json"
    config.write_text('{"mcpServers": {}}')
    argv = [sys.executable, "-m", "mcp_code_execution_mode", "serve", "--http", f"127.0.0.1:{port}"]
    env = bridge_env({"MCP_BRIDGE_CONFIG": str(config), "MCP_BRIDGE_STATE_DIR": str(tmp_path)})
    async with await anyio.open_process(argv, env=env) as proc:
        assert proc.stderr is not None
        seen = b""
        with anyio.fail_after(60):
            while b"Uvicorn running on" not in seen:
                seen += await proc.stderr.receive()
        try:
            with anyio.fail_after(60):
                async with (
                    Client(f"http://127.0.0.1:{port}/mcp") as first,
                    Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as second,
                ):
                    tools = (await first.list_tools()).tools
                    bad = await second.call_tool("run_python", {"code": "   "})
        finally:
            proc.terminate()
            with anyio.fail_after(30):
                code = await proc.wait()
    assert [t.name for t in tools] == ["run_python"]
    assert bad.is_error is True
    text = bad.content[0]
    assert isinstance(text, types.TextContent)
    assert "'code'" in text.text
    assert code in (0, -15)


def test_bad_http_address_is_a_one_line_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "serve", "--http", "nowhere"],
        capture_output=True, text=True, timeout=60, check=False, env=bridge_env(),
    )  # fmt: skip
    assert done.returncode == 2
    assert "--http='nowhere'" in done.stderr
    assert "Traceback" not in done.stderr
