"""Turn an :class:`~bridge_core.sessions.types.ExecutionResult` into one MCP ``CallToolResult``.

``content`` is what the model reads, in up to two text blocks, so that it can always tell what
the bridge says from what the code printed:

1. the code's block: stdout exactly (made visible by the session manager), then marked stderr,
   the value of the last expression and the traceback; in ``toon`` mode the same fields as TOON
   when that is shorter. Anything in it may come from the code.
2. the bridge's block, only when there is something to say: a status line for every result that
   is not ``ok`` and one ``[notice]`` line per notice. Code output never enters it, and the
   sandbox text it quotes (an exception's type and message, an exit reason) is made visible on a
   single line, so no line of it can be forged.

Images follow as ``ImageContent``. ``structuredContent`` carries the small facts a program uses
(status, session, duration, truncated, where the full output is, the error's type and message,
notices, images) and never a second copy of the output; ``isError`` is set exactly when the
status is not ``ok``.
"""

from __future__ import annotations

import ast
import base64
import json
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types
import toons
from bridge_core.sessions import visible_head

if TYPE_CHECKING:
    from bridge_core.sessions.types import ExecutionResult

__all__ = [
    "OutputMode",
    "WireResult",
    "error_result",
    "error_wire",
    "render_result",
    "render_wire",
    "structured_payload",
]

OutputMode = Literal["compact", "toon"]
WireResult = dict[str, Any]
"""A ``CallToolResult`` as its JSON object (camelCase keys)."""

_STATUS_LINES = {
    "error": "the code raised an exception",
    "interrupted": "the execution was cancelled",
    "timeout": "the execution did not finish in time",
    "crashed": "the sandbox died",
    "unavailable": "no sandbox could run this code",
}
NOTICE_LIMIT = 1000
"""Characters of one notice or status line (they may quote sandbox text: an exit reason)."""


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


def _line(text: str) -> str:
    """Sandbox-quoting text made safe for one line of the bridge's block."""
    line, taken = visible_head(text, NOTICE_LIMIT, single_line=True)
    return line if taken == len(text) else line + "…"


SANDBOX_START_SHOWN = 0.001
"""A call that waited at least this long (s) for its sandbox to start says so."""


def structured_payload(result: ExecutionResult) -> dict[str, Any]:
    """The ``structuredContent`` dict: status, session, duration, and when they apply truncated,
    full_output, error (type and message), notices, images and sandbox_start. No output text:
    that is in ``content`` once."""
    payload: dict[str, Any] = {
        "status": result.status,
        "session": result.session,
        "duration": round(result.duration, 3),
    }
    if result.truncated:
        payload["truncated"] = True
    if result.full_output_path:
        payload["full_output"] = result.full_output_path
    if result.error is not None:
        error = result.error
        payload["error"] = {"type": _line(error.type), "message": _line(error.message)}
    if result.notices:
        payload["notices"] = [_line(notice) for notice in result.notices]
    if result.images:
        payload["images"] = len(result.images)
    if result.sandbox_start >= SANDBOX_START_SHOWN:
        payload["sandbox_start"] = round(result.sandbox_start, 3)
    return payload


def _code_text(result: ExecutionResult) -> str:
    """The code's block: everything in it may come from the code."""
    sections = []
    if result.stdout:
        # Exact stdout; only a trailing newline is dropped because sections are joined by one.
        sections.append(result.stdout.removesuffix("\n"))
    if result.stderr:
        sections.append("[stderr]\n" + result.stderr.removesuffix("\n"))
    if result.value is not None:
        sections.append(result.value if not sections else "[result] " + result.value)
    if result.error is not None and result.error.traceback.strip():
        sections.append("[traceback]\n" + result.error.traceback.rstrip("\n"))
    return "\n".join(sections)


def _code_toon(result: ExecutionResult) -> str:
    fields: dict[str, Any] = {}
    if result.stdout:
        fields["stdout"] = result.stdout
    if result.stderr:
        fields["stderr"] = result.stderr
    if result.value is not None:
        fields["result"] = _as_data(result.value)
    if result.error is not None and result.error.traceback.strip():
        fields["traceback"] = result.error.traceback
    return toons.dumps(fields) if fields else ""


def _bridge_text(result: ExecutionResult, payload: dict[str, Any]) -> str:
    """The bridge's block: one line per statement, none of them writable by the code."""
    lines = []
    error = payload.get("error")
    if not result.ok:
        said = f"{error['type']}: {error['message']}".rstrip(": ") if error else ""
        lines.append(f"[{result.status}] {said or _STATUS_LINES[result.status]}")
    # A notice that only repeats the error message is said once, in the status line.
    repeated = error["message"] if error else None
    lines.extend(f"[notice] {n}" for n in payload.get("notices", ()) if n != repeated)
    return "\n".join(lines)


def _image_blocks(result: ExecutionResult) -> list[dict[str, Any]]:
    return [
        {
            "data": base64.b64encode(image.data).decode("ascii"),
            "mimeType": image.mime,
            "type": "image",
        }
        for image in result.images
    ]


def _wire(blocks: list[dict[str, Any]], is_error: bool, payload: dict[str, Any]) -> WireResult:
    # Keys in the order the SDK's result sieve writes them (its versioned surface models).
    return {"content": blocks, "isError": is_error, "structuredContent": payload}


def render_wire(result: ExecutionResult, mode: OutputMode = "compact") -> WireResult:
    """Render one execution for the model as the ``CallToolResult`` JSON object (see the module
    docstring for the shape)."""
    payload = structured_payload(result)
    code = _code_text(result)
    if mode == "toon" and code:
        encoded = _code_toon(result)
        # TOON pays off only on uniform tables; plain text output is usually shorter as text.
        if len(encoded) < len(code):
            code = encoded
    texts = [text for text in (code, _bridge_text(result, payload)) if text] or ["(no output)"]
    blocks = [{"text": text, "type": "text"} for text in texts]
    blocks.extend(_image_blocks(result))
    return _wire(blocks, not result.ok, payload)


def error_wire(message: str, *, kind: str = "InvalidArguments") -> WireResult:
    """An ``isError`` result the model should read (bad arguments, bridge-side failure), as the
    ``CallToolResult`` JSON object."""
    return _wire(
        [{"text": message, "type": "text"}],
        True,
        {"status": "error", "error": {"type": kind, "message": message}},
    )


def render_result(result: ExecutionResult, mode: OutputMode = "compact") -> types.CallToolResult:
    """:func:`render_wire` as the SDK's model."""
    return types.CallToolResult.model_validate(render_wire(result, mode))


def error_result(message: str, *, kind: str = "InvalidArguments") -> types.CallToolResult:
    """:func:`error_wire` as the SDK's model."""
    return types.CallToolResult.model_validate(error_wire(message, kind=kind))
