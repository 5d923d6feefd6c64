"""The bridge with real third-party MCP servers: a tool's result becomes the value the sandbox
API promises, a denied tool is refused, and the MCP Inspector CLI (a client we did not write)
drives it. The pages' examples run in test_docs_examples.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from .conftest import bridge_env, open_bridge, real_servers

pytestmark = pytest.mark.container


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_result_of_one_string_field_is_that_string_and_other_objects_stay_dicts(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = real_servers(third_party, tmp_path)
    sales = tmp_path / "data" / "sales.csv"
    sales.write_text("month,revenue\njan,120\n", encoding="utf-8")
    code = (
        "from mcp import runtime, mcp_servers, mcp_time, mcp_memory\n"
        f"text = await mcp_servers['filesystem'].read_file(path={str(sales)!r})\n"
        "now = await mcp_time.get_current_time(timezone='UTC')\n"
        "graph = await mcp_memory.read_graph()\n"
        "docs = await runtime.query_tool_docs('filesystem', 'read_file', detail='stub')\n"
        "head = docs['tools'][0]['stub'].splitlines()[0]\n"
        "(text, now['timezone'], sorted(graph), head.rsplit(' -> ', 1)[1])"
    )
    async with open_bridge(tmp_path, servers=servers) as bridge:
        result = await bridge.run(code)
    assert result.is_error is False, _text(result)
    # The filesystem server answers {"content": text}: the code gets the text, as the stub says.
    assert _text(result) == (
        "('month,revenue\\njan,120\\n', 'UTC', ['entities', 'relations'], 'str:')"
    )


async def test_denied_tool_is_refused_inside_the_code_and_never_called(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = real_servers(third_party, tmp_path)
    code = (
        "from mcp import mcp_memory\n"
        "await mcp_memory.create_entities(entities=[{'name': 'keep', 'entityType': 't', "
        "'observations': []}])\n"
        "try:\n"
        "    await mcp_memory.delete_entities(entityNames=['keep'])\n"
        "except Exception as e:\n"
        "    print('refused:', e)\n"
        "[e['name'] for e in (await mcp_memory.read_graph())['entities']]"
    )
    env = {"MCP_BRIDGE_DENY_TOOLS": "memory.delete_*"}
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        result = await bridge.run(code)
    text = _text(result)
    assert result.is_error is False, text
    # Refused inside the code, naming the rule and the setting (denied tools are hidden from the
    # sandbox's listings, yet naming one is a refusal, not an unknown tool), and the entity it
    # would have deleted is still there.
    rule = "[policy] deny_tools=memory.delete_*"
    assert f"refused: tool memory.delete_entities is denied by {rule}" in text
    assert text.endswith("['keep']")


async def test_mcp_inspector_cli_lists_tools_and_calls_run_python(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": real_servers(third_party, tmp_path)}))
    env = bridge_env({"MCP_BRIDGE_CONFIG": str(config)})
    base = [third_party["MCP_INSPECTOR"], "--cli", sys.executable, "-m", "mcp_code_execution_mode"]
    base += ["--state-dir", str(tmp_path / "state")]
    for name in ("MCP_BRIDGE_CONFIG", "MCP_BRIDGE_DISCOVER", "MCP_BRIDGE_IMAGE"):
        if name in env:
            base += ["-e", f"{name}={env[name]}"]

    def inspector(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [*base, *args], capture_output=True, text=True, timeout=180, check=False, env=env
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = await anyio.to_thread.run_sync(inspector, "--method", "tools/list")
    called = await anyio.to_thread.run_sync(
        inspector,
        "--method", "tools/call", "--tool-name", "run_python",
        "--tool-arg", "code=from mcp import runtime\nsorted(await runtime.discovered_servers())",
    )  # fmt: skip
    assert [t["name"] for t in listed["tools"]] == ["run_python"]
    assert called["isError"] is False
    assert called["content"][0]["text"] == "['everything', 'filesystem', 'memory', 'time']"
