"""The ``run_python`` fast path on stdio: what the client receives is byte for byte what the
SDK's own server loop sends (same calls through both, compared), and cancellation, progress,
requests to the client, errors and bad input behave as they do there, through the SDK's real
stdio client. The server runs as a process (``fast_path_server.py``) with a scripted executor.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

SERVER = Path(__file__).with_name("fast_path_server.py")
PYTHONPATH = os.pathsep.join(
    [str(p) for p in sorted(Path(__file__).resolve().parents[2].glob("*/src"))]
)


class Raw:
    """A JSON-RPC conversation with the server over its real pipes, line by line."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self._out = BufferedByteReceiveStream(process.stdout)
        self.lines: list[bytes] = []

    async def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.process.stdin is not None
        await self.process.stdin.send(line.encode() + b"\n")

    async def until_answer(self, request_id: Any) -> dict[str, Any]:
        """Read lines (all kept in :attr:`lines`) until the answer to ``request_id``."""
        while True:
            line = await self._out.receive_until(b"\n", 1024 * 1024)
            self.lines.append(line)
            message = json.loads(line)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message

    async def rest(self) -> None:
        """Read what is left until the server closes stdout."""
        while True:
            try:
                self.lines.append(await self._out.receive_until(b"\n", 1024 * 1024))
            except (anyio.EndOfStream, anyio.IncompleteRead):
                return


@asynccontextmanager
async def raw_server(mode: str) -> AsyncIterator[Raw]:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    async with await anyio.open_process(
        [sys.executable, str(SERVER), mode], env=env, stderr=None
    ) as process:
        yield Raw(process)


def call(request_id: Any, arguments: Any = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "run_python", **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}

NAN_CALL = (
    '{"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "run_python", '
    '"arguments": {"code": "x", "timeout": NaN}}}'
)
"""Not JSON (NaN), yet the SDK's parser takes it: the fast path leaves it to the SDK."""

_CALL_LINE = (
    '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "run_python", '
    '"arguments": {"code": "x"%s}%s}}'
)
REFUSED_BY_THE_SDKS_PARSER = [
    _CALL_LINE % ('"\\ud800"', "", ""),  # a lone surrogate as the id
    _CALL_LINE % ("33", ', "session": "\\udc00"', ""),  # in an argument
    _CALL_LINE % ("34", "", ', "_meta": {"progressToken": "\\ud800"}'),
    _CALL_LINE % ("35", ', "extra": ' + "[" * 300 + "]" * 300, ""),  # past its depth limit
]
"""Lines ``json`` takes but the SDK's parser refuses (a parse error with a null id): never
taken by the fast path, which would otherwise answer (or run) them."""

# (request or line, id of the answer to wait for)
CONVERSATION: list[tuple[dict[str, Any] | str, Any]] = [
    (call(2, {"code": "1+1"}), 2),
    (call("an id", {"code": 'print:héllo ✓ \u2028 \x01 \x7f 😀 "q" \\ \n\t'}), "an id"),
    (call(0, {"code": "1+1"}), 0),
    (call(-7, {"code": "1+1", "session": "other", "reset": True, "timeout": 1.5}), -7),
    (call(3, {"code": "progress"}, _meta={"progressToken": "tok"}), 3),
    (call(4, {"code": "progress"}, _meta={"progressToken": 44}), 4),
    (call(5, {"code": "progress"}), 5),
    (call(6, {"code": ""}), 6),
    (call(7, {"code": "x", "timeout": -1}), 7),
    (call(8, {"code": 5}), 8),
    (call(9, {"code": "x", "extra": 1}), 9),
    (call(10, {}), 10),
    (call(11), 11),
    (call(12, {"code": "x", "session": "../bad"}), 12),
    (call(13, {"code": "boom"}), 13),
    (call(14, {"code": "refused"}), 14),
    (call(15, {"code": "x"}, _meta={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}), 15),
    # Left to the SDK on both sides, answered alike:
    ({**call(16, {"code": "x"}), "name": "run_python"}, 16),  # unknown top-level key
    (call(17, ["not", "an", "object"]), 17),
    ({**call(18), "params": {"name": "other", "arguments": {"code": "x"}}}, 18),
    (call(19, {"code": "x"}, _meta={"progressToken": True}), 19),
    (call(2**63, {"code": "x"}), 2**63),
    (NAN_CALL, 30),
    ("{not json", None),
    *((line, None) for line in REFUSED_BY_THE_SDKS_PARSER),
    ({"jsonrpc": "2.0", "id": 31, "method": "ping"}, 31),
    ({"jsonrpc": "2.0", "id": 32, "method": "tools/list"}, 32),
]


async def converse(mode: str) -> tuple[list[bytes], list[Any]]:
    """The whole conversation with one server; returns every line it wrote and how many calls
    its fast path took."""
    async with raw_server(mode) as raw:
        with anyio.fail_after(30):
            await raw.send(INITIALIZE)
            await raw.until_answer(1)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            # A call cancelled by the client is never answered; the next one is.
            await raw.send(call(20, {"code": "block"}))
            await raw.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 20}}
            )
            for message, answer in CONVERSATION:
                await raw.send(message)
                if answer is not None:
                    await raw.until_answer(answer)
                else:  # a line that is no JSON-RPC message: answered with a null id
                    await raw.until_answer(None)
            await raw.send(call(40, {"code": "cancelled?"}))
            await raw.until_answer(40)
            await raw.send(call(41, {"code": "taken?"}))
            await raw.until_answer(41)
            taken = ast.literal_eval(json.loads(raw.lines.pop())["result"]["content"][0]["text"])
            # The client leaves while a call runs: that call is answered "Connection closed".
            await raw.send(call(42, {"code": "block"}))
            assert raw.process.stdin is not None
            await raw.process.stdin.aclose()
            await raw.rest()
        return raw.lines, taken


async def test_the_fast_path_answers_byte_for_byte_what_the_sdk_path_answers() -> None:
    sdk_lines, sdk_taken = await converse("sdk")
    fast_lines, fast_taken = await converse("fast")
    assert sdk_taken == []
    # Every run_python call of the common shape was taken, none of those left to the SDK.
    assert fast_taken == [20, 2, "an id", 0, -7, *range(3, 16), 40, 41]
    assert fast_lines == sdk_lines
    answers = [json.loads(line) for line in fast_lines]
    ids = [a.get("id") for a in answers if "result" in a or "error" in a]
    assert 20 not in ids  # the cancelled call
    assert answers[-1] == {
        "jsonrpc": "2.0",
        "id": 42,
        "error": {"code": types.CONNECTION_CLOSED, "message": "Connection closed"},
    }
    progress = [a["params"] for a in answers if a.get("method") == "notifications/progress"]
    assert [p["progressToken"] for p in progress] == ["tok"] * 3 + [44] * 3


@asynccontextmanager
async def client(**callbacks: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER), "fast"],
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, **callbacks) as session,
    ):
        await session.initialize()
        yield session


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_call_the_client_cancels_stops_its_execution_and_the_next_call_is_served() -> None:
    async with client() as session:
        with anyio.fail_after(30):
            with pytest.raises(MCPError):
                # The SDK client's read timeout sends notifications/cancelled for the call.
                await session.call_tool("run_python", {"code": "block"}, read_timeout_seconds=0.5)
            result = await session.call_tool("run_python", {"code": "cancelled?"})
            taken = await session.call_tool("run_python", {"code": "taken?"})
    assert _text(result) == "1"
    assert len(ast.literal_eval(_text(taken))) == 3  # all three calls took the fast path


async def test_output_and_the_codes_own_progress_reach_the_client_as_progress() -> None:
    received: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, total, message))

    async with client() as session:
        with anyio.fail_after(30):
            await session.call_tool(
                "run_python", {"code": "progress"}, progress_callback=on_progress
            )
            taken = await session.call_tool("run_python", {"code": "taken?"})
    assert received == [(1, None, "first line"), (2, None, "second line"), (5, 10, "half way")]
    assert len(ast.literal_eval(_text(taken))) == 2


async def test_a_taken_call_can_ask_the_client_and_gets_its_answer() -> None:
    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///work"}]})

    async with client(list_roots_callback=list_roots) as session:
        with anyio.fail_after(30):
            result = await session.call_tool("run_python", {"code": "roots"})
    assert _text(result) == "['file:///work']"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"code": ""}, "'code' must not be empty"),
        ({"code": "x", "timeout": 0}, "'timeout' is 0"),
        ({"code": 1}, "'code' is required and must be"),
        ({"code": "x", "bogus": 1}, "unknown argument(s) 'bogus'"),
        ({"code": "x", "session": "a b"}, "'session' is 'a b'"),
    ],
)
async def test_bad_arguments_are_an_error_result_naming_what_was_wrong(
    arguments: dict[str, Any], named: str
) -> None:
    async with client() as session:
        with anyio.fail_after(30):
            result = await session.call_tool("run_python", arguments)
    assert result.is_error is True
    assert named in _text(result)
    assert result.structured_content is not None
    assert result.structured_content["error"]["type"] == "InvalidArguments"


async def test_a_failing_executor_is_an_error_result_and_the_server_keeps_serving() -> None:
    async with client() as session:
        with anyio.fail_after(30):
            failed = await session.call_tool("run_python", {"code": "boom"})
            after = await session.call_tool("run_python", {"code": "after"})
    assert failed.is_error is True
    assert "RuntimeError: boom" in _text(failed)
    assert _text(after) == "'after'"


async def test_a_client_of_the_2026_protocol_is_served_by_the_sdk_alone() -> None:
    # mcp.Client in auto mode opens with the 2026-07-28 per-request envelope, no handshake.
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER), "fast"],
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    async with Client(params, mode="auto") as session:
        with anyio.fail_after(30):
            result = await session.call_tool("run_python", {"code": "1+1"})
            taken = await session.call_tool("run_python", {"code": "taken?"})
    assert _text(result) == "'1+1'"
    assert _text(taken) == "[]"


def test_an_sdk_without_the_parts_of_the_fast_path_leaves_every_call_to_the_sdk(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_code_execution_mode import serve

    monkeypatch.setitem(sys.modules, "mcp_code_execution_mode._serving", None)  # import fails
    assert serve._fast_serving() is None
    assert "fast path off" in caplog.text
