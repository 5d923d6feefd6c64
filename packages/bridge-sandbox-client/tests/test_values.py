"""Argument checks and result unwrapping, in process (pure functions)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from bridge_protocol import ErrorCode, Fault
from bridge_sandbox_client._display import sniff_mime
from bridge_sandbox_client._values import Audio, Image, encode_arguments, unwrap_result
from bridge_sandbox_client.errors import (
    InvalidArguments,
    ToolError,
    UpstreamUnavailable,
    error_from_fault,
)
from hypothesis import given
from hypothesis import strategies as st

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), json_values, max_size=5))
def test_json_arguments_are_sent_unchanged(arguments: dict[str, Any]) -> None:
    encoded = encode_arguments(arguments)
    assert encoded == arguments
    assert json.loads(json.dumps(encoded)) == arguments


def test_bytes_like_arguments_become_base64_text_at_any_depth() -> None:
    encoded = encode_arguments(
        {"a": b"\x00\xff", "b": [bytearray(b"x")], "c": {"d": memoryview(b"y")}}
    )
    assert encoded == {
        "a": base64.b64encode(b"\x00\xff").decode(),
        "b": [base64.b64encode(b"x").decode()],
        "c": {"d": base64.b64encode(b"y").decode()},
    }


def test_type_error_names_the_nested_argument_path() -> None:
    with pytest.raises(TypeError, match=r"'filters\.when\[1\]'"):
        encode_arguments({"filters": {"when": [1, object()]}})


def test_arguments_nested_too_deep_are_a_type_error() -> None:
    value: Any = 1
    for _ in range(40):
        value = [value]
    with pytest.raises(TypeError, match="nested"):
        encode_arguments({"deep": value})


def test_structured_content_wins_over_text() -> None:
    result = {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"a": 1}}
    assert unwrap_result(result, server="s", tool="t") == {"a": 1}


def test_structured_content_of_one_string_field_is_that_string() -> None:
    # The filesystem server's read_file: the text twice, once wrapped in {"content": ...}.
    text = "month,revenue\njan,120\n"
    result = {"content": [{"type": "text", "text": text}], "structuredContent": {"content": text}}
    assert unwrap_result(result, server="filesystem", tool="read_file") == text


@pytest.mark.parametrize(
    "structured",
    [
        {"datetime": "2026-01-01T00:00:00+01:00", "timezone": "Europe/Paris"},
        {"result": 3},
        {"entities": [{"name": "a"}]},
        {"content": None},
        {},
    ],
)
def test_other_structured_content_stays_the_object(structured: dict[str, Any]) -> None:
    result = {"content": [{"type": "text", "text": "x"}], "structuredContent": structured}
    assert unwrap_result(result, server="s", tool="t") == structured


@pytest.mark.parametrize(
    ("text", "value"),
    [("42", 42), ('{"a": [1]}', {"a": [1]}), ("null", None), ("hello", "hello"), ("", "")],
)
def test_single_text_is_json_when_it_parses(text: str, value: Any) -> None:
    assert (
        unwrap_result({"content": [{"type": "text", "text": text}]}, server="s", tool="t") == value
    )


def test_audio_and_embedded_resources_are_unwrapped() -> None:
    audio = {"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"}
    resource_text = {"type": "resource", "resource": {"uri": "file:///a", "text": "[1, 2]"}}
    resource_blob = {
        "type": "resource",
        "resource": {"uri": "file:///b", "blob": base64.b64encode(b"\x01").decode()},
    }
    link = {"type": "resource_link", "uri": "file:///c", "name": "c"}
    value = unwrap_result(
        {"content": [audio, resource_text, resource_blob, link]}, server="s", tool="t"
    )
    assert value == [Audio(b"RIFF", "audio/wav"), [1, 2], b"\x01", link]


def test_image_repr_is_short() -> None:
    assert repr(Image(b"x" * 10_000, "image/png")) == "Image(mime_type='image/png', 10000 bytes)"


def test_is_error_without_text_still_names_the_tool() -> None:
    with pytest.raises(ToolError, match=r"s\.t failed") as caught:
        unwrap_result({"content": [], "isError": True}, server="s", tool="t")
    assert caught.value.result == {"content": [], "isError": True}


def test_a_result_that_is_not_a_dict_is_a_tool_error() -> None:
    with pytest.raises(ToolError):
        unwrap_result(["not", "a", "result"], server="s", tool="t")


def test_faults_map_to_their_exception_classes_and_keep_the_code() -> None:
    error = error_from_fault(Fault(ErrorCode.UPSTREAM_UNAVAILABLE, "down"), server="s", tool="t")
    assert type(error) is UpstreamUnavailable
    assert (error.code, error.server, error.tool, str(error)) == (203, "s", "t", "down")
    assert type(error_from_fault(Fault(ErrorCode.INVALID_ARGUMENTS, "x"))) is InvalidArguments
    assert type(error_from_fault(Fault(9999, "new code"))) is ToolError


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (b"\x89PNG\r\n\x1a\n...", "image/png"),
        (b"\xff\xd8\xff\xe0", "image/jpeg"),
        (b"GIF89a", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"plain text", None),
    ],
)
def test_image_types_are_sniffed_from_magic_bytes(data: bytes, mime: str | None) -> None:
    assert sniff_mime(data) == mime
