"""A tool's result checked against its output schema without the server's regular expressions."""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core.proxy._output_schema import UpstreamSession

BACKTRACKS = "^(a+)+$"
"""Nested quantifiers: a backtracking matcher takes 2^n steps to refuse n a's and a '!'."""


def _session(schemas: dict[str, dict[str, Any]]) -> UpstreamSession:
    send, receive = anyio.create_memory_object_stream[Any](1)
    return UpstreamSession(receive, send, output_schemas=schemas.get)


def _result(content: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[], structured_content=content)


async def test_a_backtracking_pattern_is_not_run_and_the_rest_of_the_schema_is_checked(
    anyio_backend: str,
) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "pattern": BACKTRACKS}, "n": {"type": "integer"}},
        "patternProperties": {BACKTRACKS: {"type": "string"}},
        "additionalProperties": False,
        "propertyNames": {"pattern": BACKTRACKS},
        "unevaluatedProperties": False,
    }
    session = _session({"t": schema})
    hostile = "a" * 40 + "!"  # 2^40 steps for `re`
    started = time.monotonic()
    await session.validate_tool_result("t", _result({"v": hostile, hostile: hostile, "n": 1}))
    assert time.monotonic() - started < 10  # `re` would take hours
    with pytest.raises(RuntimeError, match="Invalid structured content returned by tool t"):
        await session.validate_tool_result("t", _result({"v": hostile, "n": "one"}))


async def test_without_patterns_it_refuses_what_the_sdk_refuses(anyio_backend: str) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    session = _session({"t": schema, "bad": {"type": "nonsense"}})
    await session.validate_tool_result("t", _result({"n": 1}))
    await session.validate_tool_result("undeclared", _result(None))
    for content in ({"n": 1, "x": 2}, {}, None):
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await session.validate_tool_result("t", _result(content))
    with pytest.raises(RuntimeError, match="did not return structured content"):
        await session.validate_tool_result("t", types.CallToolResult(content=[]))
    with pytest.raises(RuntimeError, match="Invalid schema for tool bad"):
        await session.validate_tool_result("bad", _result({}))


MANY = {"type": "object", "properties": {"v": {"type": "array", "items": {"type": "integer"}}}}


async def test_a_large_result_is_checked_off_the_event_loop_and_the_check_stops_with_its_call(
    anyio_backend: str,
) -> None:
    session = _session({"t": MANY})
    large = _result({"v": [0] * 1_000_000})  # about 8 s of checking
    longest = 0.0

    async def ticks() -> None:
        nonlocal longest
        while True:
            before = time.monotonic()
            await anyio.sleep(0.01)
            longest = max(longest, time.monotonic() - before)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticks)
        with anyio.move_on_after(1) as given_up:
            await session.validate_tool_result("t", large)
        tg.cancel_scope.cancel()
    assert given_up.cancelled_caught
    assert longest < 3, f"the event loop waited {longest:.2f} s"  # on the loop: 8 s
    spent = time.process_time()
    await anyio.sleep(1)
    assert time.process_time() - spent < 0.5, "the check went on after its call was given up"
    await session.validate_tool_result("t", _result({"v": [1, 2]}))  # the next check runs


async def test_unique_items_is_not_compared_pairwise(anyio_backend: str) -> None:
    # Objects are compared two by two: 3,000 of them held a thread 10 s inside one keyword,
    # where no cancel reaches; 30,000 would hold it for a quarter of an hour.
    schema = {"type": "array", "uniqueItems": True, "items": {"type": "object"}}
    session = _session({"t": schema})
    many = [{"a": n, "b": [n]} for n in range(30_000)]
    with anyio.fail_after(20):
        await session.validate_tool_result("t", _result(many))
    with pytest.raises(RuntimeError, match="Invalid structured content"):
        await session.validate_tool_result("t", _result([1]))  # the rest is still checked
