"""Result types: a declared ``outputSchema`` as ``TypedDict`` definitions, and a shape observed
from the results of a tool that declares none (bounded, keys and types only, escaped)."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest
from bridge_core.catalog import Catalog, ToolDoc, render_stub
from bridge_core.catalog._observed import (
    MAX_DEPTH,
    MAX_KEY_CHARS,
    MAX_KEYS,
    MAX_NODES,
    MAX_TEXT_CHARS,
    ObservedShapes,
    observable_value,
)
from bridge_core.catalog._typed import MAX_FIELDS, MAX_TYPES, result_types
from bridge_core.servers import ServerSpec
from hypothesis import given, settings
from hypothesis import strategies as st

# -- declared schemas as TypedDicts -----------------------------------------------------------


def test_nested_objects_become_nested_typed_dicts_named_after_their_keys() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "now": {
                "type": "object",
                "properties": {"temp_c": {"type": "number"}, "wind": {"type": "integer"}},
                "required": ["temp_c"],
            },
            "days": {
                "type": "array",
                "items": {"type": "object", "properties": {"high": {"type": "number"}}},
            },
        },
        "required": ["city", "now", "days"],
    }
    annotation, classes = result_types(schema, "GetWeather")
    assert annotation == "GetWeatherResult"
    assert classes == [
        "class GetWeatherResult(TypedDict):\n"
        "    city: str\n"
        "    now: GetWeatherNow\n"
        "    days: list[GetWeatherDaysItem]",
        "class GetWeatherNow(TypedDict):\n    temp_c: float\n    wind: NotRequired[int]",
        "class GetWeatherDaysItem(TypedDict):\n    high: NotRequired[float]",
    ]


def test_union_members_with_properties_each_get_a_typed_dict() -> None:
    schema = {
        "type": "object",
        "properties": {
            "hit": {
                "anyOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}},
                    {"type": "null"},
                ]
            }
        },
    }
    annotation, classes = result_types(schema, "T")
    assert annotation == "TResult"
    assert classes[0] == "class TResult(TypedDict):\n    hit: NotRequired[THit1 | None]"
    assert classes[1] == "class THit1(TypedDict):\n    a: NotRequired[str]"


def test_a_self_referencing_schema_names_itself_and_ends() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
        "$ref": "#/$defs/Node",
    }
    annotation, classes = result_types(schema, "Tree")
    assert annotation == "TreeNode"
    assert classes == ["class TreeNode(TypedDict):\n    children: NotRequired[list[TreeNode]]"]


def test_keys_that_are_not_ascii_identifiers_use_the_functional_form_quoted_and_escaped() -> None:
    hostile = [
        "max-results",
        "class",
        "ﬁle",  # folds to "file" as an identifier: must stay a string
        'a"\n    injected: str  # observed (from 99 results)',
        "rtl\u202eevil",
        "zero\u200bwidth",
        "bad\ud800surrogate",
    ]
    schema = {"type": "object", "properties": {key: {"type": "string"} for key in hostile}}
    stub = render_stub(ToolDoc("s", "t", output_schema=schema))
    tree = ast.parse(stub)
    [func, assign] = tree.body
    assert isinstance(func, ast.AsyncFunctionDef)
    assert isinstance(assign, ast.Assign)
    assert isinstance(assign.value, ast.Call)
    fields = assign.value.args[1]
    assert isinstance(fields, ast.Dict)
    keys = [ast.literal_eval(k) for k in fields.keys if k is not None]
    # Keys a reader could misread are shown as escapes; the rest are exactly the keys.
    assert keys[:4] == hostile[:4]
    assert "\u202e" not in stub
    assert "\\u202e" in stub
    assert "\u200b" not in stub
    assert "\\u200b" in stub
    assert "\\ud800" in stub
    # The injected "field" and "mark" stay inside one string literal on one line.
    assert [line for line in stub.splitlines() if "injected" in line] == [
        '    "a\\"\\n    injected: str  # observed (from 99 results)": NotRequired[str],'
    ]


def test_types_and_fields_per_type_are_bounded() -> None:
    wide = {"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(100)}}
    [shown] = result_types(wide, "W")[1]
    assert shown.count(": NotRequired[str]") == MAX_FIELDS
    assert shown.endswith(f"    # and {100 - MAX_FIELDS} more keys")

    many = {
        "type": "object",
        "properties": {
            f"k{i}": {"type": "object", "properties": {"x": {"type": "string"}}} for i in range(30)
        },
    }
    _annotation, classes = result_types(many, "M")
    assert len(classes) == MAX_TYPES
    assert "    k29: NotRequired[dict]" in classes[0]


def test_a_declared_tool_stub_parses_with_its_types_defined_after_the_function() -> None:
    schema = {
        "type": "object",
        "properties": {"temp_c": {"type": "number"}, "city": {"type": "string"}},
        "required": ["temp_c", "city"],
    }
    stub = render_stub(ToolDoc("weather", "get-weather", output_schema=schema))
    assert stub.splitlines()[0] == "async def get_weather() -> GetWeatherResult:"
    assert stub.endswith("class GetWeatherResult(TypedDict):\n    temp_c: float\n    city: str")
    assert "observed" not in stub
    ast.parse(stub)


# -- observed shapes -------------------------------------------------------------------------


def observed(*values: dict[str, Any], structured: bool = True) -> dict[str, Any]:
    shapes = ObservedShapes()
    for value in values:
        shapes.record("s", "t", value, structured)
    shape = shapes.get("s", "t")
    assert shape is not None
    return shape.schema


def test_observed_shapes_merge_keys_and_types_and_a_key_seen_once_is_optional() -> None:
    schema = observed(
        {"id": 1, "name": "a", "tags": ["x"], "owner": {"login": "me"}},
        {"id": 2.5, "name": None, "tags": [], "owner": {"login": "you", "site": "x"}, "extra": 1},
    )
    assert schema == {
        "type": "object",
        "properties": {
            "id": {"type": "number"},
            "name": {"type": ["string", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "owner": {
                "type": "object",
                "properties": {"login": {"type": "string"}, "site": {"type": "string"}},
                "required": ["login"],
            },
            "extra": {"type": "integer"},
        },
        "required": ["id", "name", "tags", "owner"],
        "description": "observed (from 2 results)",
    }


def test_observed_shapes_hold_no_values() -> None:
    secret = "s3cr3t-value-never-kept"
    schema = observed({"token": secret, "nested": {"list": [secret, {"k": secret}]}})
    assert secret not in json.dumps(schema)


def test_list_items_of_objects_merge_into_one_item_shape() -> None:
    schema = observed({"rows": [{"a": 1}, {"a": 2, "b": "x"}]})
    assert schema["properties"]["rows"]["items"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"],
    }


def test_observed_depth_keys_and_key_length_are_bounded() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_DEPTH + 5):
        node["d"] = {}
        node = node["d"]
    schema = observed(deep)
    levels = 0
    while "properties" in schema:
        schema = schema["properties"]["d"]
        levels += 1
    assert levels == MAX_DEPTH
    assert schema == {"type": "object"}

    wide = observed({f"k{i}": i for i in range(MAX_KEYS * 10)})
    assert len(wide["properties"]) == MAX_KEYS
    assert wide["additionalProperties"] is True

    long_key = observed({"x" * (MAX_KEY_CHARS + 1): 1, "ok": 1})
    assert list(long_key["properties"]) == ["ok"]
    assert long_key["additionalProperties"] is True


def test_the_keys_of_one_tool_are_bounded_in_all_levels() -> None:
    shapes = ObservedShapes()
    for n in range(50):
        value = {f"a{n}_{i}": {f"b{j}": j for j in range(MAX_KEYS)} for i in range(MAX_KEYS)}
        shapes.record("s", "t", value, True)
    shape = shapes.get("s", "t")
    assert shape is not None

    def count(schema: dict[str, Any]) -> int:
        props = schema.get("properties", {})
        return len(props) + sum(count(sub) for sub in props.values())

    assert count(shape.schema) <= MAX_NODES
    assert shape.results == 50


def test_the_number_of_tools_with_a_shape_is_bounded_oldest_forgotten_first() -> None:
    shapes = ObservedShapes(max_tools=3)
    for tool in ("a", "b", "c"):
        shapes.record("s", tool, {"x": 1}, True)
    shapes.record("s", "a", {"x": 1}, True)  # used again: now the newest
    shapes.record("s", "d", {"x": 1}, True)
    assert len(shapes) == 3
    assert shapes.get("s", "b") is None
    assert all(shapes.get("s", tool) is not None for tool in ("a", "c", "d"))


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"structuredContent": {"a": 1}, "content": []}, ({"a": 1}, True)),
        ({"content": [{"type": "text", "text": ' {"a": [1]}'}]}, ({"a": [1]}, False)),
        ({"content": [{"type": "text", "text": "[1, 2]"}]}, None),
        ({"content": [{"type": "text", "text": "hello"}]}, None),
        ({"content": [{"type": "text", "text": "{not json"}]}, None),
        ({"content": [{"type": "text", "text": "[" * 100_000}]}, None),
        ({"content": [{"type": "text", "text": "{}"}, {"type": "text", "text": "{}"}]}, None),
        ({"content": [{"type": "image", "data": "", "mimeType": "image/png"}]}, None),
        ({"structuredContent": {"a": 1}, "isError": True}, None),
        ({"structuredContent": [1]}, None),
    ],
)
def test_only_structured_content_or_one_json_object_text_is_observed(
    result: dict[str, Any], expected: Any
) -> None:
    assert observable_value(result) == expected


def test_a_text_too_long_to_parse_on_the_event_loop_is_not_observed() -> None:
    text = json.dumps({"a": "x" * MAX_TEXT_CHARS})
    assert observable_value({"content": [{"type": "text", "text": text}]}) is None


def test_a_deeply_nested_json_text_is_not_observed_and_raises_nothing() -> None:
    text = '{"a":' * 100_000 + "1" + "}" * 100_000
    assert observable_value({"content": [{"type": "text", "text": text}]}) is None


def test_an_observed_stub_is_marked_outside_the_docstring_and_keys_are_escaped() -> None:
    shapes = ObservedShapes()
    shapes.record("s", "list-items", {"items": [{"id": 1}], "next\u202e": None}, False)
    shapes.record("s", "list-items", {"items": []}, False)
    shape = shapes.get("s", "list-items")
    assert shape is not None
    stub = render_stub(
        ToolDoc("s", "list-items", '"""\n# observed (from 99 results)'), observed=shape
    )
    ast.parse(stub)
    lines = stub.splitlines()
    assert lines[0] == "async def list_items() -> ListItemsResult:"
    # The bridge's mark is the only comment line outside the docstring.
    marks = [line for line in lines if line.startswith("#")]
    assert marks == ["# ListItemsResult: observed (from 2 results); the tool declares no schema"]
    assert 'ListItemsResult = TypedDict("ListItemsResult", {' in stub
    assert '    "items": list[ListItemsItemsItem],' in stub
    assert '    "next\\u202e": NotRequired[None],' in stub
    assert "class ListItemsItemsItem(TypedDict):\n    id: int" in stub


def test_an_observed_object_from_text_is_not_unwrapped_as_a_lone_string() -> None:
    # The sandbox unwraps {"content": "..."} only from structuredContent, never from text.
    shapes = ObservedShapes()
    shapes.record("s", "read", {"content": "x"}, False)
    stub = render_stub(ToolDoc("s", "read"), observed=shapes.get("s", "read"))
    assert stub.splitlines()[0] == "async def read() -> ReadResult:"
    shapes.record("s", "read2", {"content": "x"}, True)
    stub = render_stub(ToolDoc("s", "read2"), observed=shapes.get("s", "read2"))
    assert stub.splitlines()[0] == "async def read2() -> str:"
    assert "# str: observed (from 1 result); the tool declares no schema" in stub


# -- the catalog ------------------------------------------------------------------------------

DECLARED = {"type": "object", "properties": {"temp_c": {"type": "number"}}, "required": ["temp_c"]}


async def catalog_with_tools() -> Catalog:
    catalog = Catalog({"w": ServerSpec(name="w", transport="stdio", command="x")})
    await catalog.set_tools(
        "w", [ToolDoc("w", "forecast", output_schema=DECLARED), ToolDoc("w", "get-env")]
    )
    return catalog


def env_result(**env: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(env)}], "isError": False}


async def test_the_catalog_shows_an_observed_shape_after_calls_and_says_which_kind() -> None:
    catalog = await catalog_with_tools()
    assert await catalog.result_shape("w", "get-env") is None
    catalog.observe_result("w", "get-env", env_result(HOME="/root", PATH="/bin"))
    catalog.observe_result("w", "get-env", env_result(HOME="/home/me"))
    catalog.observe_result("w", "forecast", {"structuredContent": {"other": 1}})

    shape = await catalog.result_shape("w", "get_env")  # Python forms resolve too
    assert shape is not None
    schema, kind = shape
    assert kind == "observed"
    assert schema["required"] == ["HOME"]
    assert schema["description"] == "observed (from 2 results)"
    assert await catalog.result_shape("w", "forecast") == (DECLARED, "declared")

    full = await catalog.query_tool_docs("w", detail="full")
    by_name = {t["name"]: t for t in full["tools"]}
    assert by_name["get-env"]["observedOutputSchema"] == schema
    assert "outputSchema" not in by_name["get-env"]
    assert "observedOutputSchema" not in by_name["forecast"]

    stubs = await catalog.query_tool_docs("w", "get-env", detail="stub")
    stub = stubs["tools"][0]["stub"]
    assert "# GetEnvResult: observed (from 2 results)" in stub
    assert "class GetEnvResult(TypedDict):\n    HOME: str\n    PATH: NotRequired[str]" in stub
    assert "/root" not in stub


async def test_a_new_tool_list_forgets_the_shapes_of_tools_that_left_or_gained_a_schema() -> None:
    catalog = await catalog_with_tools()
    catalog.observe_result("w", "get-env", env_result(HOME="/root"))
    await catalog.set_tools("w", [ToolDoc("w", "get-env")])
    assert await catalog.result_shape("w", "get-env") is not None
    await catalog.set_tools("w", [ToolDoc("w", "get-env", output_schema=DECLARED)])
    await catalog.set_tools("w", [ToolDoc("w", "get-env")])
    assert await catalog.result_shape("w", "get-env") is None


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(results=st.lists(st.dictionaries(st.text(), _values, max_size=6), min_size=1, max_size=4))
def test_any_observed_results_render_a_valid_stub_holding_no_value(
    results: list[dict[str, Any]],
) -> None:
    shapes = ObservedShapes()
    for result in results:
        shapes.record("s", "t", result, True)
    shape = shapes.get("s", "t")
    assert shape is not None
    assert shape.results == len(results)
    ast.parse(render_stub(ToolDoc("s", "t"), observed=shape))
