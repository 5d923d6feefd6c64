"""run_python arguments: every validation case names the field and what is allowed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import mcp_types as types
import pytest
from mcp_code_execution_mode.tool import (
    FIELDS,
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
        ({"code": "x", "timeout": 10**400}, "'timeout' is out of range"),  # past a float's range
        ({"code": "x", "timeout": -(10**5000)}, "'timeout' is out of range"),  # past repr's limit
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


def test_the_tool_is_at_most_900_bytes_in_tools_list_and_teaches_the_workflow() -> None:
    result = types.ListToolsResult(tools=[run_python_tool()])
    wire = json.dumps(
        result.model_dump(by_alias=True, mode="json", exclude_none=True)["tools"][0],
        separators=(",", ":"),
    )
    assert len(wire.encode()) <= 900
    description = run_python_tool().description or ""
    for form in (
        "from mcp import runtime, mcp_servers",
        "await runtime.discovered_servers()",
        'await runtime.search_tool_docs("query")',
        'await runtime.query_tool_docs("server")',
        'await mcp_servers["server"].tool(arg=...)',
        "persistent",
        "yield_after=S",
        "resume or cancel",
        # What the default (standard) image preinstalls, so the model does not probe for it.
        "pandas",
        "matplotlib",
        "jq",
    ):
        assert form in description


def test_the_input_schema_is_the_field_table_and_its_bytes_do_not_change() -> None:
    # The schema as it is sent: prompt caches keyed on tools/list stay valid within a release.
    assert run_python_tool().input_schema == {
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python source"},
            "timeout": {"type": "number", "description": "seconds"},
            "session": {"type": "string"},
            "reset": {"type": "boolean"},
            "yield_after": {"type": "number"},
            "resume": {"type": "string"},
            "cancel": {"type": "string"},
        },
        "additionalProperties": False,
    }
    assert [f.name for f in FIELDS] == [f.name for f in dataclasses.fields(RunPythonArgs)]


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_field_refuses_a_value_of_another_json_type_naming_itself(field: Any) -> None:
    wrong = {"string": 1.5, "number": "1", "boolean": 1}[field.type]
    arguments = {"code": "x", field.name: wrong}
    with pytest.raises(InvalidArguments) as info:
        _parse(arguments)
    assert str(info.value).startswith(f"'{field.name}' ")


OPTIONAL = [f for f in FIELDS if f.name != "code"]


@pytest.mark.parametrize("field", OPTIONAL, ids=lambda f: f.name)
def test_an_optional_field_given_as_null_takes_its_default(field: Any) -> None:
    parsed = _parse({"code": "x", field.name: None})
    assert getattr(parsed, field.name) == field.default


@pytest.mark.parametrize(
    "arguments",
    [{}, {"code": "x", "resume": "r"}, {"resume": "r", "cancel": "r"}, {"code": None}],
)
def test_exactly_one_of_code_resume_and_cancel_is_given(arguments: dict[str, Any]) -> None:
    with pytest.raises(InvalidArguments, match="exactly one of 'code'"):
        _parse(arguments)


def test_resume_and_cancel_take_a_run_id_and_yield_after_seconds() -> None:
    assert _parse({"resume": "abc", "yield_after": 5}).resume == "abc"
    assert _parse({"cancel": "abc"}).cancel == "abc"
    with pytest.raises(InvalidArguments, match="'yield_after' is 0"):
        _parse({"code": "x", "yield_after": 0})
    with pytest.raises(InvalidArguments, match="run id"):
        _parse({"resume": "x" * 65})
