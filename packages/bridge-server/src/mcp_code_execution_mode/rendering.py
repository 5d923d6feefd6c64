"""Turn an :class:`~bridge_core.sessions.types.ExecutionResult` into one MCP ``CallToolResult``.

``content`` is what the model reads: compact text (stdout exactly, then marked stderr, the value
of the last expression, the trimmed traceback) or, in ``toon`` mode, the structured payload as
TOON when that is shorter than the text. Images follow as ``ImageContent``. ``structuredContent``
always carries the payload with empty fields omitted, and ``isError`` is set exactly when the
status is not ``ok``.
"""

from __future__ import annotations

import ast
import base64
import json
from typing import Any, Literal

import mcp_types as types
import toons
from bridge_core.sessions.types import ExecutionResult

__all__ = ["OutputMode", "error_result", "render_result", "structured_payload"]

OutputMode = Literal["compact", "toon"]

_STATUS_LINES = {
    "error": "error",
    "interrupted": "interrupted: the execution was cancelled",
    "timeout": "timeout: the execution did not finish in time",
    "crashed": "crashed: the sandbox died",
    "unavailable": "unavailable: no sandbox could run this code",
}


_LITERAL_LIMIT = 256 * 1024
"""Longest ``result`` repr parsed back into data for TOON (parsing is linear but not free)."""


def _as_data(value: str) -> Any:
    """The repr of the last expression as plain data when it is a literal that JSON can carry
    (so a list of dicts becomes a TOON table); otherwise the repr string itself."""
    if len(value) > _LITERAL_LIMIT:
        return value
    try:
        # The repr comes from the sandbox: literal_eval never runs code; deep nesting can only
        # raise, which falls back to the string.
        data = ast.literal_eval(value)
        json.dumps(data)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return value
    return data


def structured_payload(result: ExecutionResult) -> dict[str, Any]:
    """The ``structuredContent`` dict: status, stdout, stderr, result, error, session, duration,
    notices — fields that are empty are left out."""
    payload: dict[str, Any] = {"status": result.status, "session": result.session}
    if result.stdout:
        payload["stdout"] = result.stdout
    if result.stderr:
        payload["stderr"] = result.stderr
    if result.value is not None:
        payload["result"] = result.value
    if result.error is not None:
        error: dict[str, str] = {"type": result.error.type, "message": result.error.message}
        if result.error.traceback:
            error["traceback"] = result.error.traceback
        payload["error"] = error
    payload["duration"] = round(result.duration, 3)
    notices = list(result.notices)
    if (
        result.truncated
        and result.full_output_path
        and not any(result.full_output_path in notice for notice in notices)
    ):
        notices.append(f"output truncated; the full output is at {result.full_output_path}")
    if notices:
        payload["notices"] = notices
    if result.images:
        payload["images"] = len(result.images)
    return payload


def _compact_text(result: ExecutionResult, payload: dict[str, Any]) -> str:
    # A notice that only repeats the error message is said once, in the error section.
    repeated = result.error.message if result.error is not None else None
    sections = [f"[notice] {n}" for n in payload.get("notices", ()) if n != repeated]
    if result.stdout:
        # Exact stdout; only a trailing newline is dropped because sections are joined by one.
        sections.append(result.stdout.removesuffix("\n"))
    if result.stderr:
        sections.append("[stderr]\n" + result.stderr.removesuffix("\n"))
    if result.value is not None:
        sections.append(result.value if len(sections) == 0 else "[result] " + result.value)
    if result.error is not None:
        summary = f"{result.error.type}: {result.error.message}".rstrip(": ")
        trace = result.error.traceback.rstrip("\n")
        # A formatted traceback already ends with the "Type: message" line; add it otherwise.
        last = trace.rsplit("\n", 1)[-1]
        body = (
            trace if trace and last.startswith(result.error.type) else f"{trace}\n{summary}".strip()
        )
        if result.status == "error":
            sections.append("[error]\n" + body if "\n" in body else "[error] " + body)
        else:
            sections.append(f"[{_STATUS_LINES[result.status]}]\n{body}")
    elif not result.ok:
        sections.append(f"[{_STATUS_LINES[result.status]}]")
    if not sections:
        return "(no output)"
    return "\n".join(sections)


def _image_contents(result: ExecutionResult) -> list[types.ImageContent]:
    return [
        types.ImageContent(
            type="image", data=base64.b64encode(image.data).decode("ascii"), mime_type=image.mime
        )
        for image in result.images
    ]


def render_result(result: ExecutionResult, mode: OutputMode = "compact") -> types.CallToolResult:
    """Render one execution for the model (see the module docstring for the shape)."""
    payload = structured_payload(result)
    text = _compact_text(result, payload)
    if mode == "toon":
        toon_payload = dict(payload)
        if result.value is not None:
            toon_payload["result"] = _as_data(result.value)
        encoded = toons.dumps(toon_payload)
        # TOON pays off only on uniform tables; plain text output is usually shorter as text.
        if len(encoded) < len(text):
            text = encoded
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    content.extend(_image_contents(result))
    return types.CallToolResult(content=content, structured_content=payload, is_error=not result.ok)


def error_result(message: str, *, kind: str = "InvalidArguments") -> types.CallToolResult:
    """An ``isError`` result the model should read (bad arguments, bridge-side failure)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structured_content={"status": "error", "error": {"type": kind, "message": message}},
        is_error=True,
    )
