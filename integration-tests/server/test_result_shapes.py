"""Result types through the real bridge and the real server-everything: a tool with an output
schema shows its ``TypedDict``; one without shows the shape observed from its results, marked."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest

from .conftest import open_bridge, real_servers

pytestmark = pytest.mark.container


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_tool_without_a_schema_shows_an_observed_shape_after_two_calls(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = {"everything": real_servers(third_party, tmp_path)["everything"]}
    code = (
        "import json\n"
        "from mcp import runtime, mcp_everything\n"
        "def stub(tool):\n"
        "    return runtime.query_tool_docs_sync('everything', tool, detail='stub')"
        "['tools'][0]['stub']\n"
        "before = stub('get-env')\n"
        "env = await mcp_everything.get_env()\n"
        "await mcp_everything.get_env()\n"
        "full = runtime.query_tool_docs_sync('everything', 'get-env', detail='full')['tools'][0]\n"
        "print(json.dumps({'before': before, 'after': stub('get-env'),\n"
        "    'observed': full.get('observedOutputSchema'), 'path': env.get('PATH'),\n"
        "    'declared': stub('get-structured-content')}))"
    )
    async with open_bridge(tmp_path, servers=servers) as bridge:
        result = await bridge.run(code)
    text = _text(result)
    assert result.is_error is False, text
    shown = json.loads(text[text.index("{") :])
    assert shown["before"].splitlines()[0] == "async def get_env() -> Any:"
    after = shown["after"]
    assert after.splitlines()[0] == "async def get_env() -> GetEnvResult:"
    assert "# GetEnvResult: observed (from 2 results); the tool declares no schema" in after
    assert "PATH" in shown["observed"]["properties"]
    assert shown["observed"]["description"] == "observed (from 2 results)"
    # Key names and types, never values.
    assert shown["path"]
    assert shown["path"] not in after
    assert shown["path"] not in json.dumps(shown["observed"])
    declared = shown["declared"]
    assert declared.splitlines()[0].endswith(") -> GetStructuredContentResult:")
    assert "class GetStructuredContentResult(TypedDict):\n" in declared
    assert "    temperature: float\n" in declared
    assert "observed" not in declared
