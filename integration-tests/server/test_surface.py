"""The bridge's MCP surface over real stdio, without needing a sandbox: tools/list identity and
size, argument validation, resource and prompt, protocol versions, lazy runtime check."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from .conftest import bridge_env, open_bridge


def _fake_servers(count: int) -> dict[str, Any]:
    # Never started: tools/list must not depend on them (upstreams start lazily).
    return {
        f"server{i}": {"command": "/nonexistent/server", "args": [str(i)]} for i in range(count)
    }


async def _tools_list_wire(work: Path, servers: dict[str, Any]) -> bytes:
    async with open_bridge(work, servers=servers) as bridge:
        result = await bridge.session.list_tools()
    return result.model_dump_json(by_alias=True, exclude_none=True).encode()


async def test_tools_list_is_byte_identical_for_0_1_and_100_servers_and_small(
    tmp_path: Path,
) -> None:
    wires = [await _tools_list_wire(tmp_path / str(n), _fake_servers(n)) for n in (0, 1, 100)]
    assert wires[0] == wires[1] == wires[2]
    assert len(wires[0]) <= 1000
    (tool,) = json.loads(wires[0])["tools"]
    assert tool["name"] == "run_python"
    assert len(json.dumps(tool, separators=(",", ":")).encode()) <= 900


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "'code'"),
        ({"code": ""}, "'code'"),
        ({"code": 42}, "'code'"),
        ({"code": "1", "timeout": 0}, "'timeout'"),
        ({"code": "1", "timeout": 100_000}, "'timeout'"),
        ({"code": "1", "timeout": "5"}, "'timeout'"),
        ({"code": "1", "session": "has space"}, "'session'"),
        ({"code": "1", "reset": "yes"}, "'reset'"),
    ],
)
async def test_invalid_arguments_return_is_error_naming_the_field(
    tmp_path: Path, arguments: dict[str, Any], field: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        result = await bridge.session.call_tool("run_python", arguments)
    assert result.is_error is True
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert field in text.text


async def test_missing_runtime_is_a_clear_error_result_not_a_crash(tmp_path: Path) -> None:
    env = {
        "MCP_BRIDGE_RUNTIME": "docker",
        "PATH": "/nonexistent",
        "DOCKER_HOST": "unix:///nonexistent.sock",
    }
    async with open_bridge(tmp_path, env=env) as bridge:
        first = await bridge.run("1+1")
        # The bridge is still up and answers again (the runtime is re-tried, not cached as dead).
        second = await bridge.run("1+1")
    assert first.is_error is True
    assert second.is_error is True
    assert first.structured_content["status"] == "unavailable"
    text = first.content[0]
    assert isinstance(text, types.TextContent)
    assert "docker" in text.text


async def test_capability_resource_and_workflow_prompt(tmp_path: Path) -> None:
    async with open_bridge(tmp_path) as bridge:
        resources = (await bridge.session.list_resources()).resources
        read = await bridge.session.read_resource(resources[0].uri)
        prompts = (await bridge.session.list_prompts()).prompts
        prompt = await bridge.session.get_prompt(prompts[0].name)
    assert isinstance(read.contents[0], types.TextResourceContents)
    assert "search_tool_docs" in read.contents[0].text
    assert prompt.messages


async def _raw_initialize(tmp_path: Path, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A hand-written JSON-RPC client: initialize at ``version``, then tools/list."""
    config = tmp_path / "servers.json"
    config.write_text('{"mcpServers": {}}')
    env = bridge_env({"MCP_BRIDGE_CONFIG": str(config)})
    argv = [sys.executable, "-m", "mcp_code_execution_mode", "--state-dir", str(tmp_path / "s")]
    async with await anyio.open_process(argv, env=env) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        buffer = b""

        async def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            await proc.stdin.send(json.dumps(message).encode() + b"\n")

        async def receive(msg_id: int) -> dict[str, Any]:
            nonlocal buffer
            assert proc.stdout is not None
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if message.get("id") == msg_id:
                        return message
                buffer += await proc.stdout.receive()

        with anyio.fail_after(60):
            await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "raw-test-client", "version": "0"}}})  # fmt: skip
            init = await receive(1)
            await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            tools = await receive(2)
        await proc.stdin.aclose()
        with anyio.fail_after(30):
            await proc.wait()
    return init, tools


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_handshake_clients_at_older_protocol_versions_are_served(
    tmp_path: Path, version: str
) -> None:
    init, tools = await _raw_initialize(tmp_path, version)
    assert init["result"]["protocolVersion"] == version
    assert [t["name"] for t in tools["result"]["tools"]] == ["run_python"]


async def test_client_speaking_2026_07_28_is_served(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    config.write_text('{"mcpServers": {}}')
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(tmp_path / "s")],
        env=bridge_env({"MCP_BRIDGE_CONFIG": str(config)}),
    )
    with anyio.fail_after(60):
        async with Client(params, mode="2026-07-28") as client:
            assert client.protocol_version == "2026-07-28"
            tools = (await client.list_tools()).tools
            bad = await client.call_tool("run_python", {"code": ""})
    assert [t.name for t in tools] == ["run_python"]
    assert bad.is_error is True
