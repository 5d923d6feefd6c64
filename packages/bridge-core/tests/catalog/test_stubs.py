"""Typed stubs from real tools' JSON Schemas: correct types, valid Python, far fewer tokens."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest
from bridge_core.catalog import ToolDoc, python_name, render_stub, schema_type
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.types import Tool


def real(real_tools: dict[str, list[Tool]], server: str, name: str) -> ToolDoc:
    [tool] = [t for t in real_tools[server] if t.name == name]
    return ToolDoc.from_tool(server, tool)


def test_nested_object_arrays_get_a_shape_in_the_docstring_and_a_typed_dict_as_result(
    real_tools: dict[str, list[Tool]],
) -> None:
    assert render_stub(real(real_tools, "memory", "create_entities")) == (
        "async def create_entities(*, entities: list[dict]) -> CreateEntitiesResult:\n"
        '    """Create multiple new entities in the knowledge graph\n'
        "\n"
        "    entities: shape list[{entityType: str, name: str, observations: list[str]}]\n"
        '    """\n'
        "\n"
        "class CreateEntitiesResult(TypedDict):\n"
        "    entities: list[CreateEntitiesEntitiesItem]\n"
        "\n"
        "class CreateEntitiesEntitiesItem(TypedDict):\n"
        "    entityType: str\n"
        "    name: str\n"
        "    observations: list[str]"
    )


def test_enums_become_literals_and_defaults_are_kept(real_tools: dict[str, list[Tool]]) -> None:
    assert render_stub(real(real_tools, "everything", "get-annotated-message")) == (
        "async def get_annotated_message(*, "
        'messageType: Literal["error", "success", "debug"], includeImage: bool = False) -> Any:\n'
        '    """Demonstrates how annotations can be used to provide metadata about content.\n'
        "    (MCP tool name: 'get-annotated-message')\n"
        "\n"
        "    messageType: Type of message to demonstrate different annotation patterns\n"
        "    includeImage: Whether to include an example image\n"
        '    """'
    )


def test_an_output_schema_ref_becomes_one_typed_dict_named_after_its_definition(
    real_tools: dict[str, list[Tool]],
) -> None:
    stub = render_stub(real(real_tools, "time", "convert_time"))
    assert stub.splitlines()[0] == (
        "async def convert_time(*, source_timezone: str, time: str, target_timezone: str) "
        "-> ConvertTimeResult:"
    )
    assert stub.endswith(
        '    """\n'
        "\n"
        "class ConvertTimeResult(TypedDict):\n"
        "    source: ConvertTimeTimeResult\n"
        "    target: ConvertTimeTimeResult\n"
        "    time_difference: str\n"
        "\n"
        "class ConvertTimeTimeResult(TypedDict):\n"
        "    datetime: str\n"
        "    day_of_week: str\n"
        "    is_dst: bool\n"
        "    timezone: str"
    )


def test_optional_parameters_follow_required_ones_with_none_or_their_default(
    real_tools: dict[str, list[Tool]],
) -> None:
    head = render_stub(real(real_tools, "git", "git_log")).splitlines()[0]
    assert head == (
        "async def git_log(*, repo_path: str, end_timestamp: str | None = None, "
        "max_count: int = 10, start_timestamp: str | None = None) -> Any:"
    )
    head = render_stub(real(real_tools, "filesystem", "read_text_file")).splitlines()[0]
    assert head == (
        "async def read_text_file(*, path: str, head: float | None = None, "
        "tail: float | None = None) -> str:"
    )


def test_a_result_whose_only_field_is_a_string_is_typed_as_that_string(
    real_tools: dict[str, list[Tool]],
) -> None:
    # The filesystem server answers {"content": "<text>"}; the sandbox gives the text.
    stub = render_stub(real(real_tools, "filesystem", "read_text_file"))
    assert stub.splitlines()[0].endswith(") -> str:")
    assert "    Returns str: the result's only field, 'content'" in stub.splitlines()


def test_a_string_field_that_may_be_alone_is_typed_dict_or_str() -> None:
    output = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "warning": {"type": "string"}},
        "required": ["text"],
    }
    stub = render_stub(ToolDoc(server="s", name="read", output_schema=output))
    assert stub.splitlines()[0] == "async def read() -> ReadResult | str:"
    assert "Returns str when 'text' is alone" in stub
    assert "class ReadResult(TypedDict):\n    text: str\n    warning: NotRequired[str]" in stub


@pytest.mark.parametrize(
    "properties",
    [
        {"result": {"type": "integer"}},  # the SDK's wrapper of an int stays a dict
        {"entities": {"type": "array", "items": {"type": "string"}}},
        {"a": {"type": "string"}, "b": {"type": "string"}},  # no field is ever alone
    ],
)
def test_other_structured_results_are_typed_dicts(properties: dict[str, Any]) -> None:
    output = {"type": "object", "properties": properties, "required": list(properties)}
    stub = render_stub(ToolDoc(server="s", name="t", output_schema=output))
    assert stub.splitlines()[0] == "async def t() -> TResult:"
    assert "\nclass TResult(TypedDict):\n" in stub


def test_a_tool_without_parameters_has_an_empty_signature(
    real_tools: dict[str, list[Tool]],
) -> None:
    assert render_stub(real(real_tools, "everything", "get-env")) == (
        "async def get_env() -> Any:\n"
        '    """Returns all environment variables, helpful for debugging MCP server configuration\n'
        "    (MCP tool name: 'get-env')\n"
        '    """'
    )


def _tokens(text: str) -> int:
    # A rough BPE-like count: words and punctuation marks.
    return len(re.findall(r"\w+|[^\w\s]", text))


def test_every_real_tool_renders_as_valid_python_with_far_fewer_tokens_than_its_json(
    real_tools: dict[str, list[Tool]],
) -> None:
    for server, tools in real_tools.items():
        json_tokens = stub_tokens = 0
        for tool in tools:
            stub = render_stub(ToolDoc.from_tool(server, tool))
            ast.parse(stub)
            stub_tokens += _tokens(stub)
            json_tokens += _tokens(json.dumps(tool.model_dump(by_alias=True, exclude_none=True)))
        if server in _SCHEMA_HEAVY:
            assert stub_tokens < 0.5 * json_tokens, (server, stub_tokens, json_tokens)


# Servers whose tool JSON is mostly schema, where stubs save the most (docs/search.md). A
# stub keeps the whole description, so a tool that is mostly prose (sequential-thinking's one
# tool: 672 stub tokens for 1,180 JSON ones) saves less.
_SCHEMA_HEAVY = {"everything", "filesystem", "memory", "time", "git"}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "array"}, "list"),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "dict"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({"type": ["string", "null"]}, "str | None"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "str | None"),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, "int | str"),
        ({"enum": ["a", "b"]}, 'Literal["a", "b"]'),
        ({"enum": ["a", None]}, 'Literal["a"] | None'),
        ({"enum": [1, 2]}, "Literal[1, 2]"),
        ({"enum": [str(i) for i in range(20)], "type": "string"}, "str"),
        ({"const": "fixed"}, 'Literal["fixed"]'),
        ({}, "Any"),
        ({"type": "array", "items": {"anyOf": [{"type": "integer"}, {}]}}, "list[Any]"),
        ({"type": "wat"}, "Any"),
        ("not a schema", "Any"),
    ],
)
def test_schema_types_map_to_python_annotations(schema: Any, expected: str) -> None:
    assert schema_type(schema) == expected


def test_refs_resolve_against_defs_and_loops_stop() -> None:
    root = {
        "$defs": {"Node": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        "definitions": {"Name": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/Node"}, "b": {"$ref": "#/definitions/Name"}},
    }
    assert schema_type({"$ref": "#/definitions/Name"}, root) == "str"
    assert schema_type({"$ref": "#/$defs/Node"}, root) == "list[list[list[list[list[Any]]]]]"
    assert schema_type({"$ref": "#/$defs/Missing"}, root) == "Any"
    assert schema_type({"$ref": "https://example.com/schema"}, root) == "Any"


def test_argument_names_that_are_not_identifiers_go_to_kwargs() -> None:
    doc = ToolDoc(
        "s",
        "search",
        "Find things",
        {
            "type": "object",
            "properties": {"from": {"type": "string"}, "max-results": {"type": "integer"}},
            "required": ["from"],
        },
    )
    stub = render_stub(doc)
    ast.parse(stub)
    assert stub.splitlines()[0] == "async def search(**kwargs: Any) -> Any:"
    assert "**kwargs: arguments whose names are not identifiers: 'from', 'max-results'" in stub


@pytest.mark.parametrize(
    "description",
    ['Ends with a "quote"', 'Has """ inside', "Has a \\ backslash and \\N{x}", "", "   "],
)
def test_any_description_yields_a_valid_docstring(description: str) -> None:
    doc = ToolDoc("s", "t", description, {"properties": {"x": {"description": description}}})
    tree = ast.parse(render_stub(doc))
    func = tree.body[0]
    assert isinstance(func, ast.AsyncFunctionDef)
    assert ast.get_docstring(func) is not None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("get-sum", "get_sum"),
        ("read_file", "read_file"),
        ("class", "class_"),
        ("2fa", "_2fa"),
        ("0", "_0"),
        ("café", "caf"),
        ("-", "_"),
    ],
)
def test_python_name_makes_identifiers(name: str, expected: str) -> None:
    assert python_name(name) == expected


_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_keys = st.sampled_from(
    ["type", "properties", "items", "required", "enum", "const", "anyOf", "oneOf", "allOf",
     "$ref", "default", "description", "additionalProperties", "$defs"]
)  # fmt: skip
_schema = st.recursive(
    st.dictionaries(_keys, _json, max_size=4),
    lambda inner: (
        st.dictionaries(_keys, inner | _json | st.lists(inner, max_size=3), max_size=5)
        | st.fixed_dictionaries(
            {
                "type": st.just("object"),
                "properties": st.dictionaries(st.text(max_size=10), inner, max_size=4),
            }
        )
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(
    input_schema=_schema,
    output_schema=st.none() | _schema,
    name=st.text(min_size=1, max_size=20),
    description=st.text(max_size=60),
)
def test_any_schema_from_an_upstream_renders_valid_python(
    input_schema: dict[str, Any], output_schema: dict[str, Any] | None, name: str, description: str
) -> None:
    doc = ToolDoc("s", name, description, input_schema, output_schema)
    ast.parse(render_stub(doc))
