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
from bridge_core.proxy.errors import UpstreamRPCError, UpstreamTimeout
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
        assert lane.take(text.encode())
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
        assert not lane.take(other)  # another id: left to the SDK's session
        answer = _line({"jsonrpc": "2.0", "id": request["id"], "result": RESULT})
        assert lane.take(answer)
        assert not lane.take(answer)  # a second answer to the same call: not ours
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
        assert not lane.take(f'{{"id": "{ID_PREFIX}'.encode())  # junk: the session's
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

        assert lane.take(progress(progressToken=token, progress=1, total=4, message="a"))
        await anyio.wait_all_tasks_blocked()  # the call's task relays it
        assert lane.take(progress(progressToken=token, progress=True))
        assert lane.take(progress(progressToken=token, progress="2"))
        assert lane.take(progress(progressToken=token, progress=2.5, total="x"))
        assert not lane.take(progress(progressToken=token + "9", progress=3))
        assert not lane.take(_line({"jsonrpc": "2.0", "method": "x", "params": {}}))
        await anyio.wait_all_tasks_blocked()
        assert lane.take(_line({"jsonrpc": "2.0", "id": token, "result": RESULT}))
    assert seen == [(1.0, 4.0, "a"), (2.5, None, None)]


async def test_progress_the_client_is_slow_to_take_keeps_only_the_newest_few() -> None:
    # The reader never waits on the relay: it keeps the newest 16 progress values, which the
    # call's own task relays once the previous one is through.
    pipe = Pipe()
    lane = CallLane(pipe.send_line, {})
    seen: list[float] = []
    release = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lane.call({"name": "t"}, time_limit=10, on_progress=on_progress))
        token = (await _requested(pipe))["id"]
        with anyio.fail_after(5):
            assert lane.take(_progress_line(token, 1))
            await anyio.wait_all_tasks_blocked()  # its relay now holds the call's task
            for value in range(2, 1001):
                assert lane.take(_progress_line(token, value))
            release.set()
            await anyio.wait_all_tasks_blocked()
            assert lane.take(_progress_line(token, 1001))
            assert lane.take(_line({"jsonrpc": "2.0", "id": token, "result": RESULT}))
    assert seen == [1.0, *map(float, range(985, 1002))]


async def test_progress_read_with_the_answer_reaches_the_client_before_the_result() -> None:
    # server-everything writes its last progress and its answer back to back: one read.
    pipe = Pipe()
    lane = CallLane(pipe.send_line, {})
    events: list[object] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append(progress)

    async def call() -> None:
        events.append(await lane.call({"name": "t"}, time_limit=10, on_progress=on_progress))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        token = (await _requested(pipe))["id"]
        assert lane.take(_progress_line(token, 3))
        assert lane.take(_line({"jsonrpc": "2.0", "id": token, "result": RESULT}))
    assert events == [3.0, RESULT]


def _progress_line(token: str, value: int) -> bytes:
    params = {"progressToken": token, "progress": value}
    return _line({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


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


async def _received(pool: UpstreamPool) -> list[dict[str, Any]]:
    """What the hostile server has read so far."""
    received: list[dict[str, Any]] = json.loads(_text(await pool.call_tool("hostile", "received")))
    return received


async def test_an_error_answer_with_the_generic_server_error_code_is_the_servers_error(
    hostile: ProbeFactory,
) -> None:
    # -32000 is JSON-RPC's generic "server error", and also the code of the SDK's (and the
    # lane's) "connection closed": a live server's error answer must not be taken for its end
    # (the call used to wait 10 s for a crash report, then say the server closed its connection).
    error = {"code": types.CONNECTION_CLOSED, "message": "boom"}
    line = '{"jsonrpc": "2.0", "id": @ID@, "error": ' + json.dumps(error) + "}"
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(5), pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("hostile", "script", {"lines": [line]})
        assert caught.value.code == types.CONNECTION_CLOSED
        assert "boom" in str(caught.value)
        assert pool.is_running("hostile")


async def test_an_answer_whose_id_is_escaped_json_still_answers_its_call(
    hostile: ProbeFactory, anyio_backend: str
) -> None:
    # Valid JSON for the same id, which the byte search does not see: the session's parse
    # finds it, and it must still reach its call (not wait out the timeout).
    if anyio_backend != "asyncio":
        pytest.skip("the call lane runs on asyncio")
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(5):
            ran = json.loads(_text(await pool.call_tool("hostile", "request")))
            serial = int(ran["id"].removeprefix(ID_PREFIX)) + 1
            escaped = json.dumps(f"{ID_PREFIX}{serial}").replace("-", "\\u002d")
            line = f'{{"jsonrpc": "2.0", "id": {escaped}, "result": {json.dumps(RESULT)}}}'
            result = await pool.call_tool("hostile", "script", {"lines": [line]})
    assert result == RESULT


async def test_a_call_timed_out_while_the_servers_stdin_is_full_is_still_cancelled_upstream(
    hostile: ProbeFactory, anyio_backend: str
) -> None:
    if anyio_backend != "asyncio":
        pytest.skip("the call lane runs on asyncio")  # the SDK's clock starts after the write
    # The request is in the pipe's buffer once its write began: the server reads it later, so
    # it must be told the call was abandoned (the cancel used to be skipped when the time ran
    # out while the write waited for the server to read).
    async with UpstreamPool([hostile()]) as pool, anyio.create_task_group() as tg:
        tg.start_soon(lambda: pool.call_tool("hostile", "stall", {"seconds": 1.5}))
        await anyio.sleep(0.3)
        with pytest.raises(UpstreamTimeout):
            await pool.call_tool("hostile", "echo", {"text": "x" * 1_000_000}, call_timeout=0.3)
        with anyio.fail_after(10):
            received = await _received(pool)
    (echo,) = [m for m in received if m["name"] == "echo"]
    cancels = [m["requestId"] for m in received if m["method"] == "notifications/cancelled"]
    assert echo["id"] in cancels


async def test_a_server_that_stops_reading_stdin_does_not_pile_up_abandoned_requests(
    hostile: ProbeFactory, anyio_backend: str
) -> None:
    # Each request used to go into the pipe's buffer whether or not the server read it, and
    # stay there after its call timed out: a server that stops reading stdin grew the bridge by
    # every request sent to it, for as long as it lived. Now one write waits on the full pipe
    # and the others wait for it to drain with nothing written.
    if anyio_backend != "asyncio":
        pytest.skip("the call lane runs on asyncio")
    timeouts: list[UpstreamTimeout] = []

    async def abandoned_call() -> None:
        try:
            await pool.call_tool("hostile", "echo", {"text": "x" * 200_000}, call_timeout=0.3)
        except UpstreamTimeout as exc:
            timeouts.append(exc)

    async with UpstreamPool([hostile()]) as pool:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: pool.call_tool("hostile", "stall", {"seconds": 3}))
            await anyio.sleep(0.3)
            for _ in range(10):
                tg.start_soon(abandoned_call)
        with anyio.fail_after(10):
            received = await _received(pool)
    assert len(timeouts) == 10
    echoes = [m for m in received if m["name"] == "echo"]
    assert len(echoes) == 1, len(echoes)


class _StuckClient:
    """A client that never takes a log notification (its connection is not read)."""

    identity = None

    def supports(self, capability: object) -> bool:
        return True

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        await anyio.sleep_forever()


async def test_progress_for_a_stuck_client_does_not_hold_up_other_calls(
    hostile: ProbeFactory,
) -> None:
    # The relay bounds each log notification to the client at 1 s; awaited in the reader, five
    # progress notifications held every other answer of the server up for 5 s.
    progress = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    ).replace('"progress": 1}', '"progress": 1, "progressToken": @ID@}')
    answer = '{"jsonrpc": "2.0", "id": @ID@, "result": ' + json.dumps(RESULT) + "}"
    client: Any = _StuckClient()
    async with UpstreamPool([hostile()]) as pool, anyio.create_task_group() as tg:
        lines = [progress] * 5 + [answer]
        tg.start_soon(lambda: pool.call_tool("hostile", "script", {"lines": lines}, client=client))
        await anyio.sleep(0.1)
        with anyio.fail_after(0.5):
            assert _text(await pool.call_tool("hostile", "echo", {"text": "other"})) == "other"


async def test_a_servers_own_timeout_error_is_its_error_not_the_bridges_timeout(
    hostile: ProbeFactory,
) -> None:
    # -32001 is the SDK's code for a request that timed out; a server may send it itself (its
    # own backend timed out) at once: the user must read the server's message, not "did not
    # answer within 60s", which would send them to raise MCP_BRIDGE_CALL_TIMEOUT.
    answer = '{"jsonrpc": "2.0", "id": @ID@, "error": {"code": -32001, "message": "db slow"}}'
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(20), pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("hostile", "script", {"lines": [answer]})
    assert caught.value.code == -32001
    assert "db slow" in str(caught.value)


async def test_on_the_sdks_path_a_call_behind_a_stuck_write_times_out_at_its_own_limit(
    hostile: ProbeFactory,
) -> None:
    # With tracing on (as on trio and for HTTP servers) calls go through the SDK's dispatcher,
    # whose clock starts once its writer took the request: a call queued behind a write the
    # server does not read waited for the server (10 s here), not for its own limit. Now it
    # ends at its limit plus the SDK's bound on the courtesy cancel's write (5 s).
    tracing.enable(NoOpTracerProvider())
    try:
        async with UpstreamPool([hostile()]) as pool, anyio.create_task_group() as tg:
            tg.start_soon(lambda: pool.call_tool("hostile", "stall", {"seconds": 10}))
            await anyio.sleep(0.3)
            tg.start_soon(lambda: _timed_out(pool, "x" * 1_000_000))  # fills the pipe
            await anyio.sleep(0.1)
            with anyio.fail_after(7.5):
                await _timed_out(pool, "small")
            tg.cancel_scope.cancel()
    finally:
        tracing.disable()


async def _timed_out(pool: UpstreamPool, text: str) -> None:
    with pytest.raises(UpstreamTimeout):
        await pool.call_tool("hostile", "echo", {"text": text}, call_timeout=0.3)
