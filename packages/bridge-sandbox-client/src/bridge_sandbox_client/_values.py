"""Tool arguments in (checked at the call site), tool results out (unwrapped to Python values)."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bridge_sandbox_client.errors import ToolError

__all__ = ["MAX_ARGUMENT_DEPTH", "Audio", "Image", "encode_arguments", "unwrap_result"]

MAX_ARGUMENT_DEPTH = 24
"""Nesting allowed in arguments: the wire decoder's depth limit (32) minus the frame's own maps."""


@dataclass(frozen=True, slots=True)
class Image:
    """An image returned by a tool: raw bytes and their MIME type."""

    data: bytes
    mime_type: str

    def __repr__(self) -> str:
        return f"Image(mime_type={self.mime_type!r}, {len(self.data)} bytes)"


@dataclass(frozen=True, slots=True)
class Audio:
    """Audio returned by a tool: raw bytes and their MIME type."""

    data: bytes
    mime_type: str

    def __repr__(self) -> str:
        return f"Audio(mime_type={self.mime_type!r}, {len(self.data)} bytes)"


def encode_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``arguments`` are JSON-serialisable and return the JSON-ready copy to send.

    bytes, bytearray and memoryview become base64 text (MCP arguments are JSON, which has no
    bytes); tuples become lists. Anything else that JSON cannot carry raises TypeError naming the
    argument, so the mistake surfaces at the call site rather than as an upstream error.
    """
    return {name: _encode(value, name, 0) for name, value in arguments.items()}


def _encode(value: Any, path: str, depth: int) -> Any:
    if depth > MAX_ARGUMENT_DEPTH:
        raise TypeError(f"argument {path!r} is nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"argument {path!r} is {value!r}, which JSON cannot represent")
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"argument {path!r} has a {type(key).__name__} key {key!r}; "
                    "JSON object keys must be str"
                )
            out[key] = _encode(item, f"{path}.{key}", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_encode(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise TypeError(
        f"argument {path!r} of type {type(value).__name__} is not JSON-serialisable "
        "(use str, int, float, bool, None, list, dict or bytes)"
    )


def unwrap_result(result: Any, *, server: str, tool: str) -> Any:
    """The Python value of a ``CallToolResult`` dict; raise :class:`ToolError` on ``isError``.

    ``structuredContent`` wins when present: that object, except that an object with exactly
    one field whose value is a string is that string (``{"content": "..."}`` → ``"..."``).
    Otherwise one content item becomes its value (text parsed as JSON when it is JSON) and
    several become a list.
    """
    if not isinstance(result, dict):
        raise ToolError(
            f"the host answered {server}.{tool} with a {type(result).__name__}, not a result",
            server=server,
            tool=tool,
        )
    content = result.get("content")
    items = content if isinstance(content, list) else []
    if result.get("isError"):
        texts = [i.get("text") for i in items if isinstance(i, dict) and i.get("type") == "text"]
        message = "\n".join(t for t in texts if isinstance(t, str)) or f"{server}.{tool} failed"
        raise ToolError(message, server=server, tool=tool, result=result)
    structured = result.get("structuredContent")
    if structured is not None:
        return _structured_value(structured)
    values = [_content_value(item) for item in items]
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return values


def _structured_value(structured: Any) -> Any:
    # MCP makes structured content an object, so a tool whose answer is one string wraps it:
    # the filesystem server's {"content": text}, the Python SDK's {"result": text} for a
    # function returning str. Code wants the string (docs/decisions/0092, "Structured results").
    if isinstance(structured, dict) and len(structured) == 1:
        (value,) = structured.values()
        if isinstance(value, str):
            return value
    return structured


def _content_value(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    kind = item.get("type")
    if kind == "text":
        return _text_value(item.get("text", ""))
    if kind in ("image", "audio"):
        cls = Image if kind == "image" else Audio
        return cls(data=_b64(item.get("data", "")), mime_type=str(item.get("mimeType", "")))
    if kind == "resource":
        resource = item.get("resource")
        if isinstance(resource, dict):
            if "text" in resource:
                return _text_value(resource["text"])
            if "blob" in resource:
                return _b64(resource["blob"])
        return resource
    return item  # resource_link and future content types: the dict as sent


def _text_value(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _b64(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return base64.b64decode(str(data), validate=False)
    except (binascii.Error, ValueError):
        return str(data).encode()
