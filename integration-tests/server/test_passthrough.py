"""What upstream servers ask of their client reaches the real client and is answered back:
sampling and elicitation from the reference ``everything`` server, roots honoured by the
``filesystem`` server — through the real bridge (stdio), a real MCP SDK client with those
callbacks, real podman.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import code_text, open_bridge

pytestmark = pytest.mark.container


class Client:
    """The real client's side: what it was asked, and its answers."""

    def __init__(self, roots: list[Path] | None = None) -> None:
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[types.ElicitRequestParams] = []
        self.roots_asked = 0
        self.roots = roots or []

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="answer written by the real client"),
            model="client-model-7",
        )

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicited.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(
            roots=[types.Root(uri=root.as_uri(), name=root.name) for root in self.roots]  # type: ignore[arg-type]
        )

    def options(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.list_roots,
        }


def _texts(code: str) -> str:
    return (
        "from mcp import mcp_servers\n"
        f"r = {code}\n"
        "print('\\n'.join(c.get('text', '') for c in r['content']))"
    )


async def test_sampling_and_elicitation_of_the_everything_server_reach_the_real_client(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    client = Client()
    servers = {"everything": {"command": third_party["MCP_SERVER_EVERYTHING"], "args": ["stdio"]}}
    async with open_bridge(tmp_path, servers=servers, client_options=client.options()) as bridge:
        sampled = await bridge.run(
            _texts(
                "await mcp_servers['everything']['trigger-sampling-request']"
                "(prompt='two words please', maxTokens=7, raw=True)"
            )
        )
        elicited = await bridge.run(
            _texts("await mcp_servers['everything']['trigger-elicitation-request'](raw=True)")
        )
    # Sampling: the server's request reached the client as sent, its system prompt after a line
    # naming the server, and the client's answer went back into the tool's result.
    (request,) = client.sampled
    assert request.max_tokens == 7
    assert request.system_prompt == (
        '[The MCP server "everything" asks, through the bridge; this is not the bridge\'s '
        "approval question]\nYou are a helpful test server."
    )
    assert "two words please" in json.dumps(request.model_dump(mode="json"))
    text = code_text(sampled)
    assert "answer written by the real client" in text
    assert "client-model-7" in text
    # Elicitation: the server's own form reached the client; the user's answer went back.
    (form,) = client.elicited
    assert isinstance(form, types.ElicitRequestFormParams)
    # ...named as the server's, not the bridge's (docs/policy.md).
    assert form.message == (
        '[The MCP server "everything" asks, through the bridge; this is not the bridge\'s '
        "approval question]\nPlease provide inputs for the following fields:"
    )
    assert form.requested_schema["required"] == ["name"]
    assert "- Name: Ada Lovelace" in code_text(elicited)


ROOTS_CODE = """
import asyncio
from mcp import mcp_servers
# The server asks for roots right after it starts (its own initialisation runs concurrently with
# the first calls), so the code looks again a bounded number of times.
for _ in range(100):
    shown = await mcp_servers['filesystem'].list_allowed_directories()
    if {root!r} in str(shown):
        break
    await asyncio.sleep(0.05)
print(shown)
"""


async def test_the_filesystem_server_honours_the_real_clients_roots(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    configured = tmp_path / "configured"
    root = tmp_path / "client-root"
    configured.mkdir()
    root.mkdir()
    client = Client(roots=[root])
    servers = {
        "filesystem": {"command": third_party["MCP_SERVER_FILESYSTEM"], "args": [str(configured)]}
    }
    async with open_bridge(tmp_path, servers=servers, client_options=client.options()) as bridge:
        result = await bridge.run(ROOTS_CODE.format(root=str(root.resolve())))
    shown = code_text(result)
    assert client.roots_asked >= 1
    assert str(root.resolve()) in shown
    assert str(configured) not in shown


RESOURCES_CODE = """
from mcp import runtime, PolicyDenied
listed = await runtime.list_resources("everything")
first = listed[0]
read = await runtime.read_resource("everything", first["uri"])
prompts = [p["name"] for p in await runtime.list_prompts("everything")]
filled = await runtime.get_prompt("everything", "args-prompt", {"city": "Lyon"})
try:
    await runtime.list_resources("hidden")
except PolicyDenied as e:
    denied = e.rule
print(len(listed) > 0, read["contents"][0]["uri"] == first["uri"], "args-prompt" in prompts)
print(filled["messages"][0]["content"]["text"])
print(denied)
"""


async def test_resources_and_prompts_of_upstream_servers_are_reachable_under_the_policy(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    everything = {"command": third_party["MCP_SERVER_EVERYTHING"], "args": ["stdio"]}
    servers = {"everything": everything, "hidden": everything}
    audit = tmp_path / "audit.jsonl"
    env = {"MCP_BRIDGE_DENY_SERVERS": "hidden", "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        result = await bridge.run(RESOURCES_CODE)
    assert code_text(result).splitlines() == [
        "True True True",
        "What's weather in Lyon?",
        "[policy] deny_servers=hidden",
    ]
    records = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [(r["server"], r["tool"], r["outcome"]) for r in records] == [
        ("everything", "resources/read", "ok"),
        ("everything", "prompts/get", "ok"),
    ]


async def test_progress_of_a_long_upstream_call_reaches_the_client_as_log_notifications(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    servers = {"everything": {"command": third_party["MCP_SERVER_EVERYTHING"], "args": ["stdio"]}}
    async with open_bridge(
        tmp_path, servers=servers, client_options={"logging_callback": on_log}
    ) as bridge:
        await bridge.run(
            "from mcp import mcp_servers\n"
            "await mcp_servers['everything']['trigger-long-running-operation']"
            "(duration=0.3, steps=3)"
        )
    # The data is JSON text (relayed log data is cut and masked as text).
    progress = [json.loads(p.data) for p in logged if p.logger == "everything/progress"]
    assert [(d["progress"], d["total"]) for d in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {d["tool"] for d in progress} == {"trigger-long-running-operation"}
