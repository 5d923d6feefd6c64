"""Our stdio transport against hostile servers run as real subprocesses: the line bound, the
tool-list bounds, and the supervisor that owns every descendant of a server."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.proxy import (
    ProxyOptions,
    UpstreamCrashed,
    UpstreamPool,
    UpstreamRPCError,
    UpstreamUnavailable,
)
from bridge_core.servers import ServerSpec
from mcp.client.stdio import get_default_environment

from .conftest import HOSTILE_SERVER, ProbeFactory, exited

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the supervisor is Linux-only")


def _json(result: dict[str, Any]) -> dict[str, Any]:
    (block,) = result["content"]
    assert block["type"] == "text"
    value = json.loads(block["text"])
    assert isinstance(value, dict)
    return value


async def test_a_line_past_the_bound_cuts_the_connection_and_stops_the_server(
    hostile: ProbeFactory,
) -> None:
    options = ProxyOptions(max_message_bytes=1024 * 1024)
    async with UpstreamPool([hostile()], options) as pool:
        server = _json(await pool.call_tool("hostile", "whoami"))["server"]
        with anyio.fail_after(20), pytest.raises(UpstreamCrashed) as caught:
            await pool.call_tool("hostile", "flood", {"size": 8 * 1024 * 1024})
        assert await exited(server)
        again = await pool.call_tool("hostile", "echo", {"text": "back"})  # restarted
    message = str(caught.value)
    assert "'hostile'" in message
    assert "longer than 1 MiB (the bridge's fixed bound" in message
    assert not again.get("isError")


async def test_lines_up_to_the_bound_arrive_whole(hostile: ProbeFactory) -> None:
    options = ProxyOptions(max_message_bytes=1024 * 1024)
    async with UpstreamPool([hostile()], options) as pool:
        text = "é" * 100_000  # 200 KB of UTF-8, split across reads
        result = await pool.call_tool("hostile", "echo", {"text": text})
    assert result["content"] == [{"type": "text", "text": text}]


@pytest.mark.parametrize(
    ("args", "options", "setting"),
    [
        # One answer past the size bound: refused before it is parsed.
        (("--tools", "2000"), ProxyOptions(max_tool_list_bytes=64 * 1024), "max_tool_list_size"),
        # One answer within the size bound but past the count: refused before it is parsed.
        (("--tools", "500"), ProxyOptions(max_tools=100), "max_tools"),
        # Small pages, past the count only together: refused after the page that passes it.
        (("--tools", "500", "--page-size", "50"), ProxyOptions(max_tools=100), "max_tools"),
        (
            ("--tools", "500", "--page-size", "50"),
            ProxyOptions(max_tool_list_bytes=16 * 1024),
            "max_tool_list_size",
        ),
    ],
)
async def test_a_tool_list_past_a_bound_is_refused_naming_the_setting(
    hostile: ProbeFactory, args: tuple[str, ...], options: ProxyOptions, setting: str
) -> None:
    async with UpstreamPool([hostile(*args)], options) as pool:
        with anyio.fail_after(30), pytest.raises(UpstreamUnavailable) as caught:
            await pool.list_tools("hostile")
    message = str(caught.value)
    assert "MCP server 'hostile' failed to start" in message
    assert f"[servers] {setting} in bridge.toml" in message


async def test_a_tool_list_within_the_bounds_is_listed_across_pages(hostile: ProbeFactory) -> None:
    options = ProxyOptions(max_tools=100)
    async with UpstreamPool([hostile("--tools", "88", "--page-size", "7")], options) as pool:
        tools = await pool.list_tools("hostile")
    assert len(tools) == 99  # 88 generated + 11 built in


@linux_only
async def test_the_server_runs_under_its_supervisor_and_a_daemon_it_starts_dies_with_it(
    hostile: ProbeFactory,
) -> None:
    async with UpstreamPool([hostile()]) as pool:
        spawned = _json(await pool.call_tool("hostile", "spawn_daemon"))
        assert spawned["server_parent"] == pool.pid("hostile")
        with anyio.fail_after(20), pytest.raises(UpstreamCrashed) as caught:
            await pool.call_tool("hostile", "exit", {"status": 3})
        assert await exited(spawned["daemon"])
    assert caught.value.exit_status == 3  # the supervisor exits as its server did
    assert "exited with status 3" in str(caught.value)


@linux_only
async def test_a_server_killed_by_a_signal_is_reported_so_through_its_supervisor(
    probe: ProbeFactory,
) -> None:
    async with UpstreamPool([probe()]) as pool:
        server = _json(await pool.call_tool("probe", "env"))["pid"]
        failures: list[UpstreamCrashed] = []

        async def hang() -> None:
            with pytest.raises(UpstreamCrashed) as caught:
                await pool.call_tool("probe", "hang")
            failures.append(caught.value)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(hang)
                await anyio.wait_all_tasks_blocked()
                os.kill(server, signal.SIGKILL)
    (failure,) = failures
    assert failure.exit_status == -signal.SIGKILL
    assert "was killed by SIGKILL" in str(failure)


@linux_only
async def test_stopping_the_pool_ends_the_daemon_of_a_running_server(
    hostile: ProbeFactory,
) -> None:
    async with UpstreamPool([hostile()]) as pool:
        spawned = _json(await pool.call_tool("hostile", "spawn_daemon"))
    assert await exited(spawned["daemon"])
    assert await exited(spawned["server"])


async def test_a_server_gets_exactly_the_environment_it_was_given(tmp_path: Path) -> None:
    # A shell, not Python: Python adds LC_CTYPE to its own environment when the locale is C
    # (PEP 538), so only a non-Python server shows whether the supervisor's leaked through.
    dump = tmp_path / "env"
    spec = ServerSpec(
        name="shell",
        transport="stdio",
        command="/bin/sh",
        args=("-c", f'env > "{dump}"; exec "{sys.executable}" "{HOSTILE_SERVER}"'),
        env={"SERVER_TOKEN": "abc123"},
    )
    async with UpstreamPool([spec]) as pool:
        await pool.list_tools("shell")
    names = {line.partition("=")[0] for line in dump.read_text().splitlines()}
    assert names - {"PWD", "SHLVL", "_"} == {"SERVER_TOKEN", *get_default_environment()}


@pytest.mark.parametrize(
    ("result", "named"),
    [
        ({"isError": False}, "content: Field required"),
        ({"content": "text"}, "content: Input should be a valid list"),
        ({"content": [{"type": "text"}]}, "content.0.TextContent.text: Field required"),
        ({"content": [{"type": "text", "text": 7}]}, "content.0.TextContent.text: Input should"),
        ({"content": [{"type": "image", "data": "AA=="}]}, "ImageContent.mimeType: Field required"),
        ({"content": [{"type": "resource"}]}, "EmbeddedResource.resource: Field required"),
        (
            {"content": [{"type": "x" * 10_000}]},
            "content.0.TextContent.type: Input should be 'text'",
        ),
        ({"content": [["not", "a", "block"]]}, "content.0.TextContent: Input should be a valid"),
        ({"content": [], "structuredContent": [1]}, "structuredContent: Input should be a valid"),
        # An input-required round the sandbox cannot answer: on the 2025-11-25 connection the
        # server negotiated, a result without content.
        ({"inputRequests": {"q": {}}, "resultType": "input_required"}, "content: Field required"),
    ],
)
async def test_a_result_that_is_not_a_call_tool_result_is_refused_naming_the_field(
    hostile: ProbeFactory, result: dict[str, Any], named: str
) -> None:
    # The SDK's session validates the answer; the error names the failed field (only of the
    # content block type the server named), never the server's value, and the server keeps
    # serving.
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(20), pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("hostile", "answer", {"result": result})
        again = await pool.call_tool("hostile", "echo", {"text": "still here"})
    message = str(caught.value)
    assert "invalid tools/call result: " in message
    assert named in message
    assert len(message) < 400  # an upstream-chosen name is not echoed
    assert _json_free_text(again) == "still here"


async def test_a_well_formed_result_arrives_as_sent_with_nulls_dropped(
    hostile: ProbeFactory,
) -> None:
    blocks = [
        {"type": "text", "text": "t", "annotations": {"priority": 1}},
        {"type": "image", "data": "AA==", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///x", "text": "x"}},
        {"type": "resource_link", "uri": "file:///y", "name": "y"},
    ]
    sent = {"content": blocks, "structuredContent": None, "isError": True, "_meta": {"k": "v"}}
    async with UpstreamPool([hostile()]) as pool:
        result = await pool.call_tool("hostile", "answer", {"result": sent})
    assert result == {"content": blocks, "isError": True, "_meta": {"k": "v"}}


def _json_free_text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    text = block["text"]
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(
    ("result", "named"),
    [
        ([1, 2], "JSONRPCResponse.result: Input should be an object"),
        ("text", "JSONRPCResponse.result: Input should be an object"),
    ],
)
async def test_an_answer_that_is_not_json_rpc_fails_its_call_at_once_not_at_the_timeout(
    hostile: ProbeFactory, result: object, named: str
) -> None:
    # A "result" that is not an object fails the SDK's message parse: the line used to be
    # skipped as junk, and the call waited out the whole call timeout ("did not answer").
    options = ProxyOptions(call_timeout=600)
    async with UpstreamPool([hostile()], options) as pool:
        with anyio.fail_after(20), pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("hostile", "answer", {"result": result})
        again = await pool.call_tool("hostile", "echo", {"text": "still here"})
    message = str(caught.value)
    assert "the answer to tools/call is not a valid JSON-RPC response: " in message
    assert named in message, message
    assert _json_free_text(again) == "still here"
