"""The MCP surface, in process: an SDK client against the server with a fake executor."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from bridge_core.sessions.types import ExecutionListener, ExecutionResult
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_code_execution_mode import _run_calls
from mcp_code_execution_mode._guides import CAPABILITIES_URI, WORKFLOW_PROMPT_NAME
from mcp_code_execution_mode.server import create_server
from mcp_code_execution_mode.settings import Settings
from pydantic import ConfigDict, TypeAdapter

from .conftest import FakeExecutor  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it

MODES = ["legacy", "auto"]
"""legacy: 2025-11-25 initialize handshake; auto: the 2026-07-28 per-request era."""


@asynccontextmanager
async def connect(
    executor: FakeExecutor, mode: str = "legacy", settings: Settings | None = None, **options: Any
) -> AsyncIterator[Client]:
    server = create_server(settings or Settings(max_timeout=600), executor.factory())
    async with Client(server, mode=mode, **options) as client:
        yield client


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_has_exactly_run_python(executor: FakeExecutor, mode: str) -> None:
    async with connect(executor, mode) as client:
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["run_python"]
    assert "required" not in tools[0].input_schema  # code, resume or cancel: one of them


async def test_tools_list_is_identical_whatever_the_settings(executor: FakeExecutor) -> None:
    dumps = []
    for settings in (Settings(), Settings(output_mode="toon", max_timeout=60, timeout=30)):
        async with connect(executor, settings=settings) as client:
            result = await client.list_tools()
        dumps.append(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True)))
    assert dumps[0] == dumps[1]


@pytest.mark.parametrize("mode", MODES)
async def test_run_python_passes_validated_arguments_to_the_executor(
    executor: FakeExecutor, mode: str
) -> None:
    async with connect(executor, mode) as client:
        result = await client.call_tool(
            "run_python", {"code": "1+1", "timeout": 5, "session": "work", "reset": True}
        )
    assert result.is_error is False
    assert executor.calls == [{"code": "1+1", "session": "work", "timeout": 5.0, "reset": True}]
    assert result.structured_content is not None
    assert result.structured_content["session"] == "work"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({}, "'code'"), ({"code": "x", "timeout": 10_000}, "'timeout'"),
     ({"code": "x", "session": "bad name"}, "'session'"), ({"code": "x", "reset": 1}, "'reset'")],
)  # fmt: skip
async def test_invalid_arguments_return_is_error_naming_the_field(
    executor: FakeExecutor, arguments: dict[str, object], field: str
) -> None:
    async with connect(executor) as client:
        result = await client.call_tool("run_python", arguments)
    assert result.is_error is True
    assert field in _text(result)
    assert executor.calls == []


async def test_unknown_tool_is_an_error_result(executor: FakeExecutor) -> None:
    async with connect(executor) as client:
        result = await client.call_tool("exec", {"code": "1"})
    assert result.is_error is True
    assert "run_python" in _text(result)


async def test_executor_value_error_becomes_an_error_result(executor: FakeExecutor) -> None:
    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        raise ValueError("too many sessions: MCP_BRIDGE_MAX_SESSIONS is 8")

    executor.script = script
    async with connect(executor) as client:
        result = await client.call_tool("run_python", {"code": "1"})
    assert result.is_error is True
    assert "MCP_BRIDGE_MAX_SESSIONS" in _text(result)


async def test_unexpected_executor_failure_leaves_the_server_serving(
    executor: FakeExecutor,
) -> None:
    calls = 0

    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return ExecutionResult(status="ok", session="default", value="2")

    executor.script = script
    async with connect(executor) as client:
        first = await client.call_tool("run_python", {"code": "1"})
        second = await client.call_tool("run_python", {"code": "1+1"})
    assert first.is_error is True
    assert "RuntimeError: boom" in _text(first)
    assert _text(second) == "2"


class _TaskHandle(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str


class _DeclaresTasks(ClientExtension):
    """A client that declares the Tasks extension; the test reads the task handle itself."""

    identifier = _run_calls.TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=_TaskHandle, resolve=self._resolve)]

    async def _resolve(self, created: _TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        raise AssertionError("called with allow_claimed: the handle is returned as it is")


async def test_a_failure_inside_the_bridge_ends_a_task_failed_with_its_error(
    executor: FakeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No known input does this to the real bridge (docs/long-runs.md): the fake's exception
    # stands for a bug inside it, after the call became a task.
    monkeypatch.setattr(_run_calls, "TASK_GRACE", 0.01)
    release = anyio.Event()

    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        await release.wait()
        raise RuntimeError("a bug")

    async def get(client: Client, task_id: str) -> dict[str, Any]:
        sent = types.Request[dict[str, Any], str](method="tasks/get", params={"taskId": task_id})
        session: Any = client.session  # a method the SDK has no typed call for
        got: dict[str, Any] = await session.send_request(sent, TypeAdapter(dict[str, Any]))
        return got

    executor.script = script
    async with connect(executor, "auto", extensions=[_DeclaresTasks()]) as client:
        created = await client.session.call_tool("run_python", {"code": "1"}, allow_claimed=True)
        assert isinstance(created, _TaskHandle)
        release.set()
        with anyio.fail_after(5):
            got = await get(client, created.task_id)
            while got["status"] == "working":  # polling is what a Tasks client does
                await anyio.sleep(0.01)
                got = await get(client, created.task_id)
    assert got["status"] == "failed"
    assert got["error"] == {"code": types.INTERNAL_ERROR, "message": "RuntimeError: a bug"}
    assert "result" not in got


@pytest.mark.parametrize("mode", MODES)
async def test_stdout_lines_and_user_progress_become_progress_notifications(
    executor: FakeExecutor, mode: str
) -> None:
    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        assert listener is not None
        await listener.on_output("stdout", "first line\nsec")
        await listener.on_output("stderr", "not relayed\n")
        await listener.on_output("stdout", "ond line\n")
        await listener.on_progress(5, 10, "half way")
        await listener.on_output("stdout", "after user progress\n")
        return ExecutionResult(status="ok", session="default")

    executor.script = script
    received: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, total, message))

    async with connect(executor, mode) as client:
        await client.call_tool("run_python", {"code": "..."}, progress_callback=on_progress)
    assert received == [(1, None, "first line"), (2, None, "second line"), (5, 10, "half way")]


async def test_cancelling_a_call_cancels_the_execution_and_server_stays_healthy(
    executor: FakeExecutor,
) -> None:
    release = anyio.Event()

    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        if code == "block":
            await release.wait()
        return ExecutionResult(status="ok", session="default", value="'done'")

    executor.script = script
    async with connect(executor) as client:
        with anyio.fail_after(5):
            with pytest.raises(MCPError):
                # The client's read timeout sends notifications/cancelled for the request.
                await client.call_tool("run_python", {"code": "block"}, read_timeout_seconds=0.2)
            await executor.cancelled.wait()
            result = await client.call_tool("run_python", {"code": "after"})
    assert _text(result) == "'done'"


async def test_executor_is_opened_once_for_the_server_lifetime(executor: FakeExecutor) -> None:
    async with connect(executor) as client:
        assert executor.opened == 1
        for _ in range(3):
            await client.call_tool("run_python", {"code": "1"})
        assert executor.opened == 1
    assert executor.closed == 1


async def test_capability_resource_and_workflow_prompt_are_served(executor: FakeExecutor) -> None:
    async with connect(executor) as client:
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == [CAPABILITIES_URI]
        contents = (await client.read_resource(CAPABILITIES_URI)).contents
        prompts = (await client.list_prompts()).prompts
        prompt = await client.get_prompt(WORKFLOW_PROMPT_NAME)
    text = contents[0]
    assert isinstance(text, types.TextResourceContents)
    assert "search_tool_docs" in text.text
    assert [p.name for p in prompts] == [WORKFLOW_PROMPT_NAME]
    message = prompt.messages[0].content
    assert isinstance(message, types.TextContent)
    assert "query_tool_docs" in message.text


async def test_toon_output_mode_is_applied(executor: FakeExecutor) -> None:
    rows = [{"n": i, "sq": i * i} for i in range(10)]

    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        return ExecutionResult(status="ok", session="default", value=repr(rows))

    executor.script = script
    async with connect(executor, settings=Settings(output_mode="toon")) as client:
        result = await client.call_tool("run_python", {"code": "rows"})
    assert "result[10]{n,sq}:" in _text(result)


async def test_a_never_ending_line_is_relayed_as_its_head_only(executor: FakeExecutor) -> None:
    async def script(code: str, listener: ExecutionListener | None) -> ExecutionResult:
        assert listener is not None
        for _ in range(100):
            await listener.on_output("stdout", "x" * 1000)
        await listener.on_output("stdout", "\n")
        return ExecutionResult(status="ok", session="default")

    executor.script = script
    messages: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    async with connect(executor) as client:
        await client.call_tool("run_python", {"code": "..."}, progress_callback=on_progress)
    assert messages == ["x" * 500]
