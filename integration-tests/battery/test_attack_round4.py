"""The fourth attack round on the newest surfaces (direct tools, MCP Apps, tasks and runs,
workflows and checkpoints): the attacks that broke a promise, through the real bridge (the
official MCP SDK client over stdio) and a hostile upstream server
(``integration-tests/servers/round4_server.py``). Attacks that held are not repeated here.

* a direct listing shows an upstream's tool definitions with every configured secret masked, as
  sandbox code sees them (before: a server's key in its description, title, schema,
  annotations or ``_meta`` reached the client as it was);
* a ``ui://`` resource claimed by the App tools of two servers is never read from the other one
  (before: the first server in the configuration that claimed it answered, so a hostile server
  put its own page in place of another server's App);
* an upstream that flaps its tool list cannot flood the clients with ``list_changed`` (before:
  400 flaps, 400 notifications to every direct client);
* checking a result against its output schema cannot stall the bridge (before: the SDK's check
  ran on the event loop: a backtracking ``pattern`` on a 30-character result held every client
  and session 45 s, a valid result of 2 million integers 23 s).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from .conftest import open_bridge

pytestmark = pytest.mark.container

SERVERS = Path(__file__).resolve().parents[1] / "servers"
ROUND4 = SERVERS / "round4_server.py"
APPS = SERVERS / "apps_server.py"
CHART_URI = "ui://apps/chart.html"
CALL_TIMEOUT = 60
SECRET = "round4-canary-7f3a9c51e2"


def _round4(*args: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(ROUND4), *args], "env": {"API_TOKEN": SECRET}}


async def _call(session: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    with anyio.fail_after(CALL_TIMEOUT + 10):
        result: types.CallToolResult = await session.call_tool(
            name, arguments, read_timeout_seconds=CALL_TIMEOUT
        )
    return result


# --- direct tools: what an upstream's definitions carry ----------------------------------------


async def test_a_direct_listing_masks_every_configured_secret_in_the_tool_definitions(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Sandbox code reading the same definitions (query_tool_docs) gets them masked; a client
    # given them directly got the key as the server wrote it, in five places.
    async with open_bridge(
        tmp_path, servers={"r4": _round4()}, args=("--tools", "direct")
    ) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            listed = await bridge.session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert "r4__show" in tools, list(tools)
    assert SECRET not in listed.model_dump_json(by_alias=True)
    show = tools["r4__show"]
    assert show.description is not None
    assert show.description.startswith("Shows things. Configured with API key ")


async def test_a_ui_resource_claimed_by_two_servers_is_never_read_from_the_impostor(
    tmp_path: Path, sandbox_image: str
) -> None:
    # "evil" comes first in the configuration and names the apps server's page in its own App
    # tool: a host rendering apps__show_chart read evil's page in its place.
    servers = {
        "evil": _round4("--ui", CHART_URI, "--html", "<p>evil page</p>"),
        "apps": {"command": sys.executable, "args": [str(APPS)],
                 "env": {"ERASE_LOG": str(tmp_path / "erased")}},
    }  # fmt: skip
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            listed = await bridge.session.list_tools()  # starts both
        names = [tool.name for tool in listed.tools]
        assert "apps__show_chart" in names, names
        with anyio.fail_after(CALL_TIMEOUT), pytest.raises(MCPError) as refused:
            await bridge.session.read_resource(CHART_URI)  # before: evil's page
    assert refused.value.error.code == types.INVALID_PARAMS
    assert "more than one server" in refused.value.error.message


FLAPS = 400
FLAP_INTERVAL = 0.01


async def test_an_upstream_flapping_its_tool_list_cannot_flood_the_clients_with_list_changed(
    tmp_path: Path, sandbox_image: str
) -> None:
    # 400 list_changed in 4 s, each relisting differs: before, every one was relisted, written
    # to the tool cache and forwarded to every direct client (400 heard here).
    heard = 0

    async def on_message(message: Any) -> None:
        nonlocal heard
        if isinstance(message, types.ToolListChangedNotification):
            heard += 1

    async with open_bridge(
        tmp_path, servers={"r4": _round4()}, args=("--tools", "direct"),
        client_options={"message_handler": on_message},
    ) as bridge:  # fmt: skip
        with anyio.fail_after(CALL_TIMEOUT):
            await bridge.session.list_tools()
        flapping = await _call(
            bridge.session, "r4__flap", {"count": FLAPS, "interval": FLAP_INTERVAL}
        )
        assert not flapping.is_error, flapping
        await anyio.sleep(FLAPS * FLAP_INTERVAL + 3)
        last = heard
        with anyio.fail_after(CALL_TIMEOUT):
            after = await bridge.session.list_tools()
    assert "r4__flap" in [tool.name for tool in after.tools]
    # At most one relisting a second: the first flap at once, then one per interval (4 s).
    assert 1 <= last <= FLAPS * FLAP_INTERVAL + 3, last


# --- a hostile upstream's output schema ---------------------------------------------------------


async def _ping_while_called(bridge: Any, name: str, arguments: dict[str, Any]) -> float:
    """How long a ping waits while ``name`` is called (sent as is: the SDK client would check
    the answer against the upstream's schema itself, and these tests are about the bridge)."""
    async with anyio.create_task_group() as tg:
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=arguments)
        )

        async def call() -> None:
            with anyio.fail_after(CALL_TIMEOUT):
                await bridge.session.send_request(request, types.CallToolResult)

        tg.start_soon(call)
        await anyio.sleep(1)
        started = anyio.current_time()
        with anyio.fail_after(CALL_TIMEOUT):
            await bridge.session.send_ping()
        waited = anyio.current_time() - started
    return waited


async def test_an_output_schema_pattern_that_backtracks_never_stalls_the_bridge(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The SDK's client session validates a result against the tool's output schema on the event
    # loop: a pattern of nested quantifiers and a result of 30 characters held the whole bridge
    # (every client, every session) for 45 s; 40 would hold it for days.
    async with open_bridge(
        tmp_path, servers={"r4": _round4()}, args=("--tools", "direct")
    ) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            await bridge.session.list_tools()
        waited = await _ping_while_called(bridge, "r4__pattern", {"n": 30})
    assert waited < 5, f"a ping waited {waited:.1f} s behind an upstream's result"


async def test_checking_a_large_result_against_its_output_schema_never_stalls_the_bridge(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A valid result of 2 million integers (4 MB of the 32 MiB an upstream may send) took the
    # SDK's check 17 s of the event loop; 32 MiB of them, minutes.
    async with open_bridge(
        tmp_path, servers={"r4": _round4()}, args=("--tools", "direct")
    ) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            await bridge.session.list_tools()
        waited = await _ping_while_called(bridge, "r4__many", {"n": 2_000_000})
    assert waited < 5, f"a ping waited {waited:.1f} s behind an upstream's result"
