"""run_python arguments: every validation case names the field and what is allowed."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp_code_execution_mode.tool import (
    SESSION_NAME_PATTERN,
    InvalidArguments,
    RunPythonArgs,
    parse_arguments,
    run_python_tool,
)


def _parse(arguments: dict[str, Any] | None) -> RunPythonArgs:
    return parse_arguments(arguments, max_timeout=600)


def test_minimal_call_uses_default_session_and_timeout() -> None:
    assert _parse({"code": "1+1"}) == RunPythonArgs(code="1+1")


def test_all_arguments_are_passed_through() -> None:
    args = _parse({"code": "x", "timeout": 5, "session": "work-1", "reset": True})
    assert args == RunPythonArgs(code="x", timeout=5.0, session="work-1", reset=True)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (None, "'code'"),
        ({}, "'code'"),
        ({"code": 3}, "'code'"),
        ({"code": "   \n"}, "'code'"),
        ({"code": "x", "timeout": 0}, "'timeout'"),
        ({"code": "x", "timeout": -1}, "'timeout'"),
        ({"code": "x", "timeout": 601}, "'timeout'"),
        ({"code": "x", "timeout": "10"}, "'timeout'"),
        ({"code": "x", "timeout": True}, "'timeout'"),
        ({"code": "x", "timeout": float("nan")}, "'timeout'"),
        ({"code": "x", "session": ""}, "'session'"),
        ({"code": "x", "session": "../etc"}, "'session'"),
        ({"code": "x", "session": "a" * 65}, "'session'"),
        ({"code": "x", "session": 7}, "'session'"),
        ({"code": "x", "reset": "yes"}, "'reset'"),
        ({"code": "x", "cwd": "/"}, "'cwd'"),
    ],
)
def test_invalid_arguments_name_the_field(arguments: dict[str, Any] | None, field: str) -> None:
    with pytest.raises(InvalidArguments) as info:
        _parse(arguments)
    assert field in str(info.value)


def test_timeout_error_states_the_allowed_range() -> None:
    with pytest.raises(InvalidArguments, match=r"\(0, 600\] seconds"):
        _parse({"code": "x", "timeout": 601})


def test_session_error_states_the_pattern() -> None:
    with pytest.raises(InvalidArguments) as info:
        _parse({"code": "x", "session": "no spaces"})
    assert SESSION_NAME_PATTERN in str(info.value)


def test_tools_list_result_is_under_1000_bytes_and_teaches_the_workflow() -> None:
    result = types.ListToolsResult(tools=[run_python_tool()])
    wire = json.dumps(
        result.model_dump(by_alias=True, mode="json", exclude_none=True), separators=(",", ":")
    )
    assert len(wire.encode()) <= 1000
    description = run_python_tool().description or ""
    for form in (
        "from mcp import runtime, mcp_servers",
        "await runtime.discovered_servers()",
        'await runtime.search_tool_docs("query", limit=5)',
        'await runtime.query_tool_docs("server")',
        'await mcp_servers["server"].tool(arg=...)',
        "persist",
        # What the default (standard) image preinstalls, so the model does not probe for it.
        "pandas",
        "matplotlib",
        "jq",
    ):
        assert form in description
