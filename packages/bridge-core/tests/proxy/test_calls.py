"""A proxied ``tools/call``: one path, the SDK's client session, on every backend, traced or not.

Against the real hostile server: what it answers (forged and junk lines, its own error codes,
progress), and what it does not do (read its stdin).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core import tracing
from bridge_core.proxy import UpstreamPool
from bridge_core.proxy.errors import UpstreamRPCError, UpstreamTimeout
from opentelemetry.trace import NoOpTracerProvider

from .conftest import ProbeFactory

RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}


def _text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    return str(block["text"])


def _result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


async def _received(pool: UpstreamPool) -> list[dict[str, Any]]:
    """What the hostile server has read so far."""
    received: list[dict[str, Any]] = json.loads(_text(await pool.call_tool("hostile", "received")))
    return received


async def test_a_call_is_the_sdks_request_traced_or_not(hostile: ProbeFactory) -> None:
    async with UpstreamPool([hostile()]) as pool:
        plain = json.loads(_text(await pool.call_tool("hostile", "request")))
        tracing.enable(NoOpTracerProvider())
        try:
            traced = json.loads(_text(await pool.call_tool("hostile", "request")))
        finally:
            tracing.disable()
    # The SDK numbers its requests; the same session sent both.
    assert isinstance(plain["id"], int)
    assert isinstance(traced["id"], int)
    assert traced["id"] > plain["id"]


async def test_junk_and_forged_answers_before_the_real_one_change_nothing(
    hostile: ProbeFactory,
) -> None:
    forged = {"jsonrpc": "2.0", "id": 999_999, "result": RESULT}
    lines = [
        '{"jsonrpc": "2.0", "id": ',  # junk
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


async def test_an_error_answer_with_the_generic_server_error_code_is_the_servers_error(
    hostile: ProbeFactory,
) -> None:
    # -32000 is JSON-RPC's generic "server error", and also the code of the SDK's "connection
    # closed": a live server's error answer must not be taken for its end (a call used to wait
    # 10 s for a crash report, then say the server closed its connection).
    error = {"code": types.CONNECTION_CLOSED, "message": "boom"}
    line = '{"jsonrpc": "2.0", "id": @ID@, "error": ' + json.dumps(error) + "}"
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(5), pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("hostile", "script", {"lines": [line]})
        assert caught.value.code == types.CONNECTION_CLOSED
        assert "boom" in str(caught.value)
        assert pool.is_running("hostile")


async def test_a_servers_own_timeout_error_is_its_error_not_the_bridges_timeout(
    hostile: ProbeFactory,
) -> None:
    # -32001 is the SDK's code for a request that timed out; a server may send it itself (its
    # own backend timed out) at once: the user must read the server's message, not "did not
    # answer within 60s", which would send them to raise [servers] call_timeout.
    answer = '{"jsonrpc": "2.0", "id": @ID@, "error": {"code": -32001, "message": "db slow"}}'
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(20), pytest.raises(UpstreamRPCError) as caught:
            await pool.call_tool("hostile", "script", {"lines": [answer]})
    assert caught.value.code == types.REQUEST_TIMEOUT
    assert "db slow" in str(caught.value)


async def test_a_call_behind_a_stuck_write_times_out_at_its_own_limit(
    hostile: ProbeFactory,
) -> None:
    # The SDK's clock starts once its writer took the request: a call queued behind a write the
    # server does not read waited for the server (10 s here), not for its own limit. Now it ends
    # at its limit plus the SDK's bound on the courtesy cancel's write (5 s).
    async with UpstreamPool([hostile()]) as pool, anyio.create_task_group() as tg:
        tg.start_soon(lambda: pool.call_tool("hostile", "stall", {"seconds": 10}))
        await anyio.sleep(0.3)
        tg.start_soon(lambda: _timed_out(pool, "x" * 1_000_000))  # fills the pipe
        await anyio.sleep(0.1)
        with anyio.fail_after(7.5):
            await _timed_out(pool, "small")
        tg.cancel_scope.cancel()


async def _timed_out(pool: UpstreamPool, text: str) -> None:
    with pytest.raises(UpstreamTimeout):
        await pool.call_tool("hostile", "echo", {"text": text}, call_timeout=0.3)


async def test_a_call_timed_out_while_the_servers_stdin_is_full_is_still_cancelled_upstream(
    hostile: ProbeFactory,
) -> None:
    # The request is in the pipe's buffer once its write began: the server reads it later, so
    # it must be told the call was abandoned.
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
    hostile: ProbeFactory,
) -> None:
    # One writer task writes to the server's stdin, one line at a time: while it waits on the
    # full pipe, later requests wait in the write stream, and a call that times out there is
    # never written. A server that stops reading holds one line of ours, not every request
    # sent to it for as long as it lives.
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


class _Client:
    """A client that records log notifications; ``stuck`` never takes one."""

    identity = None

    def __init__(self, *, stuck: bool = False, expected: int = 0) -> None:
        self.stuck = stuck
        self.logs: list[Any] = []
        self.expected = expected
        self.all_seen = anyio.Event()
        """Set once ``expected`` notifications came."""

    def supports(self, capability: object) -> bool:
        return True

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.data)
        if len(self.logs) >= self.expected:
            self.all_seen.set()
        if self.stuck:
            await anyio.sleep_forever()


def _progress(value: int) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": value}}
    ).replace(f'"progress": {value}}}', f'"progress": {value}, "progressToken": @ID@}}')


ANSWER = '{"jsonrpc": "2.0", "id": @ID@, "result": ' + json.dumps(RESULT) + "}"


async def test_progress_written_with_the_answer_reaches_the_client(
    hostile: ProbeFactory,
) -> None:
    # server-everything writes its last progress and its answer back to back: one read.
    client: Any = _Client(expected=2)
    async with UpstreamPool([hostile()]) as pool:
        with anyio.fail_after(5):
            result = await pool.call_tool(
                "hostile", "script", {"lines": [_progress(1), _progress(2), ANSWER]}, client=client
            )
            await client.all_seen.wait()  # the SDK relays each in a task of its own
    assert result == RESULT
    assert sorted(json.loads(data)["progress"] for data in client.logs) == [1, 2]


async def test_progress_for_a_stuck_client_does_not_hold_up_other_calls(
    hostile: ProbeFactory,
) -> None:
    # The relay bounds each log notification to the client at 1 s; awaited on the read path,
    # five progress notifications held every other answer of the server up for 5 s.
    client: Any = _Client(stuck=True)
    async with UpstreamPool([hostile()]) as pool, anyio.create_task_group() as tg:
        lines = [_progress(1)] * 5 + [ANSWER]
        tg.start_soon(lambda: pool.call_tool("hostile", "script", {"lines": lines}, client=client))
        await anyio.sleep(0.1)
        with anyio.fail_after(0.5):
            assert _text(await pool.call_tool("hostile", "echo", {"text": "other"})) == "other"
