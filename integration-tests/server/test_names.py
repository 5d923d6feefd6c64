"""Denied and unknown names through the real bridge, a real MCP client, podman and real servers:
every way sandbox code can name a denied tool or server raises PolicyDenied naming the rule and
the setting; a typo raises UnknownTool with the host's suggestion, the same one a forged call
gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from .conftest import open_bridge, real_servers

pytestmark = pytest.mark.container

DENY = {"MCP_BRIDGE_DENY_TOOLS": "memory.delete_*", "MCP_BRIDGE_DENY_SERVERS": "time"}

# Each attempt runs in the sandbox; the outcome is (exception type, message, extra).
PROBE = """
import json
from mcp import PolicyDenied, ToolError

async def attempt(code):
    namespace = {"mcp_servers": mcp_servers}
    try:
        exec(code, namespace)
        if namespace.get("_coro") is not None:  # an attempt that calls leaves its awaitable
            await namespace["_coro"]
        return ["no error"]
    except BaseException as e:
        extra = None
        if isinstance(e, PolicyDenied):
            extra = e.rule
        elif isinstance(e, ToolError):
            extra = getattr(e, "suggestions", None)
        elif e.__cause__ is not None:
            extra = type(e.__cause__).__name__
        return [type(e).__name__, str(e), extra]

ATTEMPTS = {ATTEMPTS}
outcomes = {}
for label, code in ATTEMPTS.items():
    outcomes[label] = await attempt(code)
print("OUTCOMES " + json.dumps(outcomes))
"""


def _outcomes(result: types.CallToolResult) -> dict[str, list[Any]]:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert result.is_error is False, block.text
    line = next(x for x in block.text.splitlines() if x.startswith("OUTCOMES "))
    return json.loads(line.removeprefix("OUTCOMES "))


def _probe(attempts: dict[str, str]) -> str:
    return PROBE.replace("{ATTEMPTS}", repr(attempts))


async def test_denied_tools_and_servers_raise_policy_denied_naming_the_rule_in_every_form(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    attempts = {
        "await alias": "import mcp_memory\n_coro = mcp_memory.delete_entities(entityNames=['k'])",
        "mapping attribute": "_coro = mcp_servers['memory'].delete_entities(entityNames=['k'])",
        "mapping item": "mcp_servers['memory']['delete_entities']",
        "from import": "from mcp.servers.memory import delete_entities",
        "hasattr": "hasattr(mcp_servers['memory'], 'delete_entities')",
        "server item": "mcp_servers['time']",
        "server from mcp": "from mcp import mcp_time",
        "server import": "import mcp_time",
        "server from import": "from mcp.servers.time import get_current_time",
    }
    code = (
        "from mcp import mcp_memory\n"
        "await mcp_memory.create_entities(entities=[{'name': 'k', 'entityType': 't', "
        "'observations': []}])\n" + _probe(attempts) + "\n"
        "print('KEPT', [e['name'] for e in (await mcp_memory.read_graph())['entities']])\n"
    )
    async with open_bridge(tmp_path, servers=real_servers(third_party, tmp_path), env=DENY) as b:
        result = await b.run(code)
        bare_alias = await b.run("await mcp_time.get_current_time(timezone='UTC')")
    outcomes = _outcomes(result)
    for label in list(attempts)[:5]:
        assert outcomes[label] == [
            "PolicyDenied",
            "tool memory.delete_entities is denied by [policy] deny_tools=memory.delete_*",
            "[policy] deny_tools=memory.delete_*",
        ], label
    for label in list(attempts)[5:]:
        assert outcomes[label] == [
            "PolicyDenied",
            "server 'time' is denied by [policy] deny_servers=time",
            "[policy] deny_servers=time",
        ], label
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert "KEPT ['k']" in block.text  # the denied tool never ran
    # A server alias used without any import: the refusal, not a NameError.
    assert bare_alias.is_error is True
    refusal = bare_alias.content[0]
    assert isinstance(refusal, types.TextContent)
    assert "PolicyDenied: server 'time' is denied by [policy] deny_servers=time" in refusal.text
    assert "NameError" not in refusal.text


async def test_a_typo_gets_the_hosts_suggestion_once_the_same_as_a_forged_call(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    attempts = {
        "attribute": "import mcp_everything\nmcp_everything.ech",
        "item": "mcp_servers['everything']['ech']",
        "import": "from mcp.servers.everything import ech",
        "server": "mcp_servers['everythin']",
        # A Tool built by hand skips the sandbox's lookup: the call itself reaches the host.
        "forged call": (
            "echo = mcp_servers['everything'].echo\n"
            "_coro = type(echo)('everything', 'ech', echo._registry)()"
        ),
        "hasattr": "assert not hasattr(mcp_servers['everything'], 'ech')",
    }
    async with open_bridge(tmp_path, servers=real_servers(third_party, tmp_path), env=DENY) as b:
        outcomes = _outcomes(await b.run(_probe(attempts)))
    message = "server 'everything' has no tool 'ech': did you mean 'echo'?"
    assert outcomes["attribute"] == ["UnknownTool", message, ["echo"]]
    assert outcomes["item"] == ["UnknownTool", message, ["echo"]]
    assert outcomes["forged call"] == ["UnknownTool", message, ["echo"]]
    assert outcomes["import"] == ["ImportError", message, "UnknownTool"]
    assert outcomes["server"] == [
        "UnknownServer",
        "unknown server 'everythin': did you mean 'everything'?",
        ["everything"],
    ]
    assert outcomes["hasattr"] == ["no error"]
