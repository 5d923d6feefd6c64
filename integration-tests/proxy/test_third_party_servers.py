"""The upstream pool against real third-party MCP servers (Node and Python SDKs not ours)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.gateway import CallContext, CallFailed
from bridge_core.proxy import UpstreamCrashed, UpstreamPool, UpstreamRPCError, open_proxy
from bridge_core.servers import ServerSpec
from bridge_protocol import ErrorCode


def _text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def _everything(paths: dict[str, str], **env: str) -> ServerSpec:
    return ServerSpec(
        name="everything",
        transport="stdio",
        command=paths["MCP_SERVER_EVERYTHING"],
        args=("stdio",),
        env=env,
    )


def _time(paths: dict[str, str]) -> ServerSpec:
    return ServerSpec(
        name="time",
        transport="stdio",
        command=paths["MCP_SERVER_TIME"],
        args=("--local-timezone", "UTC"),
    )


async def test_node_server_answers_calls_and_parallel_calls_overlap(
    third_party: dict[str, str],
) -> None:
    results: list[str] = []
    async with UpstreamPool([_everything(third_party)]) as pool:
        names = [tool.name for tool in await pool.list_tools("everything")]
        assert "echo" in names
        assert "hello" in _text(await pool.call_tool("everything", "echo", {"message": "hello"}))

        async def add(a: int) -> None:
            results.append(_text(await pool.call_tool("everything", "get-sum", {"a": a, "b": 1})))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for a in range(20):
                    tg.start_soon(add, a)
    assert len(results) == 20
    assert all(str(a + 1) in "".join(results) for a in range(20))


async def test_python_server_answers_with_structured_content(third_party: dict[str, str]) -> None:
    async with UpstreamPool([_time(third_party)]) as pool:
        result = await pool.call_tool("time", "get_current_time", {"timezone": "UTC"})
    assert not result.get("isError")
    assert result["structuredContent"]["timezone"] == "UTC"


async def test_unknown_tool_is_an_is_error_result_from_node_but_a_jsonrpc_error_from_python(
    third_party: dict[str, str], tmp_path: Path
) -> None:
    fs = ServerSpec(
        name="filesystem",
        transport="stdio",
        command=third_party["MCP_SERVER_FILESYSTEM"],
        args=(str(tmp_path),),
    )
    async with UpstreamPool([fs, _time(third_party)]) as pool:
        node = await pool.call_tool("filesystem", "no_such_tool", {})
        assert node["isError"] is True
        with pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("time", "no_such_tool", {})
        # A tool failure inside the Python server is an isError result, like Node's.
        bad_zone = await pool.call_tool("time", "get_current_time", {"timezone": "Not/AZone"})
    assert (caught.value.server, caught.value.tool) == ("time", "no_such_tool")
    assert bad_zone["isError"] is True
    assert "Invalid timezone" in _text(bad_zone)


async def test_filesystem_server_reads_a_real_file(
    third_party: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "sales.csv").write_text("month,revenue\n1,10\n\n2,20\n")
    fs = ServerSpec(
        name="filesystem",
        transport="stdio",
        command=third_party["MCP_SERVER_FILESYSTEM"],
        args=(str(tmp_path),),
    )
    async with UpstreamPool([fs]) as pool:
        result = await pool.call_tool(
            "filesystem", "read_text_file", {"path": str(tmp_path / "sales.csv")}
        )
    assert _text(result) == "month,revenue\n1,10\n\n2,20\n"


async def test_server_env_reaches_that_server_only(
    third_party: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST_ONLY_SECRET", "must-not-leak")
    memory_file = tmp_path / "memory.jsonl"
    memory = ServerSpec(
        name="memory",
        transport="stdio",
        command=third_party["MCP_SERVER_MEMORY"],
        env={"MEMORY_FILE_PATH": str(memory_file)},
    )
    async with UpstreamPool([memory, _everything(third_party, EVERYTHING_TOKEN="t0k")]) as pool:
        entity = {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}
        await pool.call_tool("memory", "create_entities", {"entities": [entity]})
        env_text = _text(await pool.call_tool("everything", "get-env"))
    assert "Ada" in memory_file.read_text()  # the memory server used the path from its own env
    env: dict[str, Any] = json.loads(env_text)
    assert env["EVERYTHING_TOKEN"] == "t0k"
    assert "MEMORY_FILE_PATH" not in env
    assert "HOST_ONLY_SECRET" not in env


async def test_git_server_reports_status_of_a_real_repository(
    third_party: dict[str, str], tmp_path: Path
) -> None:
    await anyio.run_process(["git", "init", "-q", str(tmp_path)])
    (tmp_path / "notes.txt").write_text("hi\n")
    git = ServerSpec(
        name="git",
        transport="stdio",
        command=third_party["MCP_SERVER_GIT"],
        args=("--repository", str(tmp_path)),
    )
    async with UpstreamPool([git]) as pool:
        status = await pool.call_tool("git", "git_status", {"repo_path": str(tmp_path)})
    assert "notes.txt" in _text(status)


async def test_killed_node_server_fails_its_call_with_the_signal_and_restarts(
    third_party: dict[str, str],
) -> None:
    failures: list[UpstreamCrashed] = []
    async with UpstreamPool([_everything(third_party)]) as pool:
        await pool.list_tools("everything")
        first = pool.pid("everything")
        assert first is not None

        async def long_call() -> None:
            try:
                await pool.call_tool(
                    "everything", "trigger-long-running-operation", {"duration": 60, "steps": 2}
                )
            except UpstreamCrashed as exc:
                failures.append(exc)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_call)
                await pool.call_tool("everything", "echo", {"message": "in flight"})
                os.kill(first, signal.SIGKILL)
            assert "again" in _text(
                await pool.call_tool("everything", "echo", {"message": "again"})
            )
        assert pool.pid("everything") not in (None, first)
    assert len(failures) == 1
    assert failures[0].exit_status == -signal.SIGKILL
    assert "killed by SIGKILL" in str(failures[0])


async def test_gateway_gives_one_error_shape_for_node_and_python_servers(
    third_party: dict[str, str], tmp_path: Path
) -> None:
    fs = ServerSpec(
        name="filesystem",
        transport="stdio",
        command=third_party["MCP_SERVER_FILESYSTEM"],
        args=(str(tmp_path),),
    )
    ctx = CallContext(session="it", execution_id="e")
    codes = []
    async with open_proxy([fs, _time(third_party)]) as gateway:
        for server, tool in (("filesystem", "read_fiel"), ("time", "get_curent_time")):
            with pytest.raises(CallFailed) as caught:
                await gateway.call_tool(ctx, server, tool, {})
            codes.append(caught.value.code)
            assert isinstance(caught.value.data, dict)
            assert caught.value.data["suggestions"], caught.value.message
        # A failing tool is an isError result from both (not a fault): the sandbox raises it.
        bad_zone = await gateway.call_tool(ctx, "time", "get_current_time", {"timezone": "X/Y"})
        outside = await gateway.call_tool(
            ctx, "filesystem", "read_text_file", {"path": "/etc/hostname"}
        )
    assert codes == [ErrorCode.UNKNOWN_TOOL, ErrorCode.UNKNOWN_TOOL]
    assert bad_zone["isError"] is True
    assert outside["isError"] is True
