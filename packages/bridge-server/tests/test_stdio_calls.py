"""``run_python`` over the bridge's stdio server, as a client sees it on the pipes: each shape of
call (good, bad arguments, malformed, unknown) gets its answer, a call the client cancels is never
answered, progress carries the call's token, requests to the client are answered during a call,
and a client leaving mid-call gets "Connection closed". The server runs as a process
(``scripted_server.py``, the real ``serve_stdio`` with a scripted executor), reached over its real
pipes and through the SDK's own stdio client in both protocol eras.
"""

from __future__ import annotations

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

SERVER = Path(__file__).with_name("scripted_server.py")
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
async def raw_server() -> AsyncIterator[Raw]:
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    async with await anyio.open_process(
        [sys.executable, str(SERVER)], env=env, stderr=None
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

_CALL_LINE = (
    '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "run_python", '
    '"arguments": {"code": "x"%s}%s}}'
)

NAN_CALL = (
    '{"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "run_python", '
    '"arguments": {"code": "x", "timeout": NaN}}}'
)

OK = "ok"
BAD_ARGUMENTS = "InvalidArguments"
BRIDGE_ERROR = "BridgeError"

# (request or line, id of its answer, what the answer is: OK, an isError result's error type,
# or a JSON-RPC error code)
CONVERSATION: list[tuple[dict[str, Any] | str, Any, str | int]] = [
    (call(2, {"code": "1+1"}), 2, OK),
    (call("an id", {"code": 'print:héllo ✓ \u2028 \x01 \x7f 😀 "q" \\ \n\t'}), "an id", OK),
    (call(0, {"code": "1+1"}), 0, OK),
    (call(-7, {"code": "1+1", "session": "other", "reset": True, "timeout": 1.5}), -7, OK),
    (call(3, {"code": "progress"}, _meta={"progressToken": "tok"}), 3, OK),
    (call(4, {"code": "progress"}, _meta={"progressToken": 44}), 4, OK),
    (call(5, {"code": "progress"}), 5, OK),
    (call(6, {"code": ""}), 6, BAD_ARGUMENTS),
    (call(7, {"code": "x", "timeout": -1}), 7, BAD_ARGUMENTS),
    (call(8, {"code": 5}), 8, BAD_ARGUMENTS),
    (call(9, {"code": "x", "extra": 1}), 9, BAD_ARGUMENTS),
    (call(10, {}), 10, BAD_ARGUMENTS),
    (call(11), 11, BAD_ARGUMENTS),
    (call(12, {"code": "x", "session": "../bad"}), 12, BAD_ARGUMENTS),
    (call(13, {"code": "boom"}), 13, BRIDGE_ERROR),
    (call(14, {"code": "refused"}), 14, BAD_ARGUMENTS),
    (
        call(15, {"code": "x"}, _meta={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}),
        15,
        OK,
    ),
    ({**call(16, {"code": "x"}), "name": "run_python"}, 16, OK),  # an unknown top-level key
    (call(17, ["not", "an", "object"]), 17, types.INVALID_PARAMS),
    ({**call(18), "params": {"name": "other", "arguments": {"code": "x"}}}, 18, BAD_ARGUMENTS),
    # The SDK's parser takes these as they are (a boolean token, an id past 64 bits):
    (call(19, {"code": "x"}, _meta={"progressToken": True}), 19, OK),
    (call(2**63, {"code": "x"}), 2**63, OK),
    # Not JSON (NaN), yet the SDK's parser takes it: a bad timeout.
    (NAN_CALL, 30, BAD_ARGUMENTS),
    ("{not json", None, types.PARSE_ERROR),
    # Lines ``json`` takes but the SDK's parser refuses: a parse error with a null id.
    (_CALL_LINE % ('"\\ud800"', "", ""), None, types.PARSE_ERROR),  # a lone surrogate as the id
    (_CALL_LINE % ("33", ', "session": "\\udc00"', ""), None, types.PARSE_ERROR),
    (_CALL_LINE % ("34", "", ', "_meta": {"progressToken": "\\ud800"}'), None, types.PARSE_ERROR),
    (_CALL_LINE % ("35", ', "extra": ' + "[" * 300 + "]" * 300, ""), None, types.PARSE_ERROR),
    ({"jsonrpc": "2.0", "id": 31, "method": "ping"}, 31, OK),
    ({"jsonrpc": "2.0", "id": 32, "method": "tools/list"}, 32, OK),
]


def _verdict(answer: dict[str, Any]) -> str | int:
    if "error" in answer:
        code: int = answer["error"]["code"]
        return code
    result = answer["result"]
    if result.get("isError"):
        kind: str = result["structuredContent"]["error"]["type"]
        return kind
    return OK


async def test_each_shape_of_call_gets_its_answer_and_a_cancelled_call_none() -> None:
    async with raw_server() as raw:
        with anyio.fail_after(30):
            await raw.send(INITIALIZE)
            await raw.until_answer(1)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            # A call cancelled by the client is never answered; the next one is.
            await raw.send(call(20, {"code": "block"}))
            await raw.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 20}}
            )
            verdicts = []
            for message, request_id, _expected in CONVERSATION:
                await raw.send(message)
                verdicts.append(_verdict(await raw.until_answer(request_id)))
            await raw.send(call(40, {"code": "cancelled?"}))
            cancelled = await raw.until_answer(40)
            # The client leaves while a call runs: that call is answered "Connection closed".
            await raw.send(call(42, {"code": "block"}))
            assert raw.process.stdin is not None
            await raw.process.stdin.aclose()
            await raw.rest()
    assert verdicts == [expected for _message, _id, expected in CONVERSATION]
    assert cancelled["result"]["content"][0]["text"] == "1"  # the cancel reached the execution
    answers = [json.loads(line) for line in raw.lines]
    ids = [a.get("id") for a in answers if "result" in a or "error" in a]
    assert 20 not in ids  # the cancelled call
    assert answers[-1] == {
        "jsonrpc": "2.0",
        "id": 42,
        "error": {"code": types.CONNECTION_CLOSED, "message": "Connection closed"},
    }
    progress = [a["params"] for a in answers if a.get("method") == "notifications/progress"]
    assert [p["progressToken"] for p in progress] == ["tok"] * 3 + [44] * 3


async def test_an_answer_is_one_line_with_the_result_as_the_model_reads_it() -> None:
    async with raw_server() as raw:
        with anyio.fail_after(30):
            await raw.send(INITIALIZE)
            await raw.until_answer(1)
            await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await raw.send(call(2, {"code": "print:héllo ✓ \u2028 😀\n"}))
            await raw.until_answer(2)
    # U+2028 stays as it is (JSON allows it; only a newline would end the line early).
    assert raw.lines[-1] == (
        b'{"jsonrpc":"2.0","id":2,"result":{"content":[{"text":"h\xc3\xa9llo \xe2\x9c\x93 '
        b'\xe2\x80\xa8 \xf0\x9f\x98\x80","type":"text"}],"isError":false,'
        b'"structuredContent":{"status":"ok","session":"default","duration":0.0}}}'
    )


@asynccontextmanager
async def client(**callbacks: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], env={**os.environ, "PYTHONPATH": PYTHONPATH}
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
    assert _text(result) == "1"


async def test_output_and_the_codes_own_progress_reach_the_client_as_progress() -> None:
    received: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, total, message))

    async with client() as session:
        with anyio.fail_after(30):
            await session.call_tool(
                "run_python", {"code": "progress"}, progress_callback=on_progress
            )
    assert received == [(1, None, "first line"), (2, None, "second line"), (5, 10, "half way")]


async def test_a_call_can_ask_the_client_and_gets_its_answer() -> None:
    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///work"}]})

    async with client(list_roots_callback=list_roots) as session:
        with anyio.fail_after(30):
            can_ask = await session.call_tool("run_python", {"code": "can ask?"})
            result = await session.call_tool("run_python", {"code": "roots"})
    assert _text(can_ask) == "True"
    assert _text(result) == "['file:///work']"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"code": ""}, "'code' must not be empty"),
        ({"code": "x", "timeout": 0}, "'timeout' is 0"),
        ({"code": 1}, "'code' must be a string"),
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


async def test_a_client_of_the_2026_protocol_is_served_and_its_calls_cannot_ask_it() -> None:
    # mcp.Client in auto mode opens with the 2026-07-28 per-request envelope, no handshake: a
    # request to the client has no channel there (questions travel as input_required results).
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], env={**os.environ, "PYTHONPATH": PYTHONPATH}
    )
    async with Client(params, mode="auto") as session:
        with anyio.fail_after(30):
            result = await session.call_tool("run_python", {"code": "1+1"})
            can_ask = await session.call_tool("run_python", {"code": "can ask?"})
    assert _text(result) == "'1+1'"
    assert _text(can_ask) == "False"
