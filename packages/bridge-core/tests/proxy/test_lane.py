"""The call lane (``bridge_core.proxy._lane``): ``tools/call`` past the SDK's dispatcher.

The lane's own rules against a recorded pipe (matching, progress, malformed answers, timeouts,
cancels, a closed connection), then through the pool against the real hostile server (the id
on the wire, forged and junk lines before the real answer).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core import tracing
from bridge_core.proxy import UpstreamPool
from bridge_core.proxy._lane import ID_PREFIX, CallLane
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import NoOpTracerProvider

from .conftest import ProbeFactory

RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}


class Pipe:
    """What the lane writes, line by line; ``broken`` makes every write fail."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.written = anyio.Event()
        self.broken = False

    async def send_line(self, line: bytes) -> None:
        if self.broken:
            raise anyio.BrokenResourceError
        assert line.endswith(b"\n"), line
        assert line.count(b"\n") == 1, line
        self.lines.append(json.loads(line))
        self.written.set()


async def _requested(pipe: Pipe) -> dict[str, Any]:
    with anyio.fail_after(5):
        await pipe.written.wait()
    return pipe.lines[0]


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


async def _call_and_answer(answer: dict[str, Any]) -> Any:
    """A call whose request is answered with ``answer`` (``@ID@``: the request's id)."""
    pipe = Pipe()
    lane = CallLane(pipe.send_line, {})
    outcome: dict[str, Any] = {}

    async def call() -> None:
        try:
            outcome["value"] = await lane.call({"name": "t", "arguments": {}}, time_limit=10)
        except MCPError as exc:
            outcome["error"] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        request = await _requested(pipe)
        text = json.dumps(answer).replace('"@ID@"', json.dumps(request["id"]))
        assert lane.expects(text.encode())
        assert await lane.take(text.encode())
    return outcome.get("error", outcome.get("value"))


async def test_a_call_is_one_json_line_and_its_answer_is_matched_by_id() -> None:
    pipe = Pipe()
    in_flight: dict[Any, str] = {}
    lane = CallLane(pipe.send_line, in_flight)
    results: list[Any] = []

    async def call() -> None:
        results.append(await lane.call({"name": "echo", "arguments": {"t": "é\n"}}, time_limit=10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        request = await _requested(pipe)
        assert request == {
            "jsonrpc": "2.0",
            "id": request["id"],
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"t": "é\n"}},
        }
        assert request["id"].startswith(ID_PREFIX)
        # While it waits, the transport counts it as a request awaiting an answer.
        assert in_flight == {request["id"]: "tools/call"}
        other = _line({"jsonrpc": "2.0", "id": request["id"] + "0", "result": RESULT})
        assert not await lane.take(other)  # another id: left to the SDK's session
        answer = _line({"jsonrpc": "2.0", "id": request["id"], "result": RESULT})
        assert await lane.take(answer)
        assert not await lane.take(answer)  # a second answer to the same call: not ours
    assert results == [RESULT]
    assert in_flight == {}
    assert not lane.expects(answer)  # nothing in flight: no line is even searched


async def test_lines_without_a_lane_id_are_not_parsed() -> None:
    lane = CallLane(Pipe().send_line, {})
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lane.call({"name": "t"}, time_limit=10))
        await anyio.wait_all_tasks_blocked()
        assert not lane.expects(_line({"jsonrpc": "2.0", "id": 3, "result": RESULT}))
        assert lane.expects(f'{{"id": "{ID_PREFIX}'.encode())
        assert not await lane.take(f'{{"id": "{ID_PREFIX}'.encode())  # junk: the session's
        tg.cancel_scope.cancel()


async def test_progress_reaches_the_callback_and_malformed_values_are_dropped() -> None:
    pipe = Pipe()
    lane = CallLane(pipe.send_line, {})
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lane.call({"name": "t"}, time_limit=10, on_progress=on_progress))
        request = await _requested(pipe)
        token = request["params"]["_meta"]["progressToken"]
        assert token == request["id"]

        def progress(**params: Any) -> bytes:
            message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
            return _line(message)

        assert await lane.take(progress(progressToken=token, progress=1, total=4, message="a"))
        assert await lane.take(progress(progressToken=token, progress=True))
        assert await lane.take(progress(progressToken=token, progress="2"))
        assert await lane.take(progress(progressToken=token, progress=2.5, total="x"))
        assert not await lane.take(progress(progressToken=token + "9", progress=3))
        assert not await lane.take(_line({"jsonrpc": "2.0", "method": "x", "params": {}}))
        assert await lane.take(_line({"jsonrpc": "2.0", "id": token, "result": RESULT}))
    assert seen == [(1.0, 4.0, "a"), (2.5, None, None)]


@pytest.mark.parametrize(
    ("answer", "code", "named"),
    [
        ({"error": {"code": -32000, "message": "boom", "data": [1]}}, -32000, "boom"),
        ({"error": {"code": "1", "message": "m"}}, types.INTERNAL_ERROR, "error.code"),
        ({"error": {"code": True, "message": "m"}}, types.INTERNAL_ERROR, "error.code"),
        ({"error": {"code": 1, "message": 5}}, types.INTERNAL_ERROR, "error.message"),
        ({"error": "boom"}, types.INTERNAL_ERROR, "'error' is not an object"),
        ({}, types.INTERNAL_ERROR, "neither 'result' nor 'error'"),
        ({"result": [1]}, types.INTERNAL_ERROR, "'result' is a list, not an object"),
        ({"result": RESULT, "jsonrpc": "1.0"}, types.INTERNAL_ERROR, "'jsonrpc'"),
    ],
)
async def test_an_error_answer_is_the_servers_error_and_a_malformed_one_names_what_is_wrong(
    answer: dict[str, Any], code: int, named: str
) -> None:
    outcome = await _call_and_answer({"jsonrpc": "2.0", "id": "@ID@", **answer})
    assert isinstance(outcome, MCPError)
    assert outcome.code == code
    assert named in outcome.message
    if code == -32000:
        assert outcome.data == [1]
    else:
        assert outcome.message.startswith("the answer to tools/call is not a valid JSON-RPC")


async def test_a_call_past_its_time_limit_is_cancelled_upstream_naming_the_request() -> None:
    pipe = Pipe()
    in_flight: dict[Any, str] = {}
    lane = CallLane(pipe.send_line, in_flight)
    with pytest.raises(MCPError) as caught:
        await lane.call({"name": "t"}, time_limit=0.05)
    assert caught.value.code == types.REQUEST_TIMEOUT
    request, cancel = pipe.lines
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request["id"], "reason": "timed out after 0.05s"},
    }
    assert in_flight == {}


async def test_a_cancelled_caller_cancels_its_request_upstream() -> None:
    pipe = Pipe()
    lane = CallLane(pipe.send_line, {})
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lane.call({"name": "t"}, time_limit=10))
        request = await _requested(pipe)
        tg.cancel_scope.cancel()
    assert pipe.lines[1]["params"] == {"requestId": request["id"], "reason": "caller cancelled"}
    # Its answer, arriving late, is no longer the lane's.
    assert not lane.expects(_line({"jsonrpc": "2.0", "id": request["id"], "result": RESULT}))


async def test_the_end_of_the_connection_fails_calls_in_flight_and_later_ones() -> None:
    pipe = Pipe()
    lane = CallLane(pipe.send_line, {})
    errors: list[MCPError] = []

    async def call() -> None:
        with pytest.raises(MCPError) as caught:
            await lane.call({"name": "t"}, time_limit=10)
        errors.append(caught.value)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _requested(pipe)
            lane.close("the server went away")
        await call()
    closed = (types.CONNECTION_CLOSED, "the server went away")
    assert [(e.code, e.message) for e in errors] == [closed, closed]
    assert len(pipe.lines) == 1  # nothing written once closed


async def test_a_write_to_a_broken_pipe_is_a_closed_connection() -> None:
    pipe = Pipe()
    pipe.broken = True
    lane = CallLane(pipe.send_line, {})
    with pytest.raises(MCPError) as caught:
        await lane.call({"name": "t"}, time_limit=10)
    assert caught.value.code == types.CONNECTION_CLOSED


# --- through the pool, against the real hostile server -------------------------------------------


def _text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    return str(block["text"])


async def test_the_request_takes_the_lane_on_asyncio_and_the_dispatcher_on_trio_or_when_traced(
    hostile: ProbeFactory, anyio_backend: str
) -> None:
    async with UpstreamPool([hostile()]) as pool:
        direct = json.loads(_text(await pool.call_tool("hostile", "request")))
        tracing.enable(NoOpTracerProvider())
        try:
            traced = json.loads(_text(await pool.call_tool("hostile", "request")))
        finally:
            tracing.disable()
    if anyio_backend == "asyncio":
        assert direct["id"].startswith(ID_PREFIX)
    else:
        assert isinstance(direct["id"], int)
    assert isinstance(traced["id"], int)  # the SDK numbers its requests


async def test_junk_and_forged_answers_before_the_real_one_change_nothing(
    hostile: ProbeFactory,
) -> None:
    forged = {"jsonrpc": "2.0", "id": f"{ID_PREFIX}999999", "result": RESULT}
    lines = [
        f'{{"jsonrpc": "2.0", "id": "{ID_PREFIX}',  # junk holding the lane's mark
        json.dumps(forged),  # an answer to a call nobody made
        json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}),
        '{"jsonrpc": "2.0", "id": @ID@, "result": ' + json.dumps(_result("real")) + "}",
        '{"jsonrpc": "2.0", "id": @ID@, "result": ' + json.dumps(_result("again")) + "}",
    ]
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(20):
            first = await pool.call_tool("hostile", "script", {"lines": lines})
            after = await pool.call_tool("hostile", "echo", {"text": "still here"})
    assert _text(first) == "real"
    assert _text(after) == "still here"


def _result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}
