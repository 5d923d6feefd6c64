"""The answer to a ``tools/call`` as the sandbox gets it: the upstream's own JSON object, checked
for the shape of a ``CallToolResult`` instead of built into the SDK's models and dumped back.

Why: through :meth:`mcp.ClientSession.call_tool` a proxied call built the request model and
dumped it, validated the answer twice (the negotiated version's surface, then the result union)
and the gateway dumped the model again for the sandbox: about a third of the host's CPU per
proxied call on top of the JSON-RPC plumbing, for a value the sandbox receives as a plain
dict anyway. :func:`checked_call_result` is the bounded replacement: one pass over the top level
and the content list (each block's own fields, not its nested values), refusing what the model
refused (a missing or non-list ``content``, an unknown block type, a text block without text, a
non-object ``structuredContent``, a non-boolean ``isError``, an input-required round) with an
error naming the field.

Bounds that do not move here: the line was read by our stdio transport under
``max_message_bytes`` and parsed by the SDK's JSON-RPC message adapter; the reply to the
sandbox is refused past the frame limit (``_sandbox.py``); every value is masked by the
gateway's redactor. What an upstream puts inside a text or a structured value reaches the
sandbox as it is, as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["InvalidCallResult", "checked_call_result", "describe"]

_SHOWN = 60
"""Characters of an upstream-chosen name shown in an error (its bytes are hostile)."""

_REQUIRED_TEXT: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}
"""The string fields each content block type must carry (``resource`` carries an object)."""


class InvalidCallResult(ValueError):
    """The upstream answered ``tools/call`` with something that is not a ``CallToolResult``."""


def checked_call_result(raw: object) -> dict[str, Any]:
    """``raw`` (the ``result`` of the JSON-RPC answer) when it has the shape of a complete
    ``CallToolResult``, with ``null`` optional fields dropped (as the model's dump did).

    Raises :class:`InvalidCallResult` naming the first field that is wrong.
    """
    if not isinstance(raw, dict):
        raise InvalidCallResult(f"the result is {describe(raw)}, not an object")
    kind = raw.get("resultType")
    if kind is not None and kind != "complete":
        # An input-required round (or an extension's claimed result): the sandbox cannot answer.
        raise InvalidCallResult(f"resultType is {_shown(kind)}; only 'complete' can be proxied")
    content = raw.get("content")
    if not isinstance(content, list):
        raise InvalidCallResult(f"'content' is {describe(content)}, not a list of content blocks")
    for index, block in enumerate(content):
        _check_block(index, block)
    is_error = raw.get("isError")
    if is_error is not None and not isinstance(is_error, bool):
        raise InvalidCallResult(f"'isError' is {describe(is_error)}, not true or false")
    structured = raw.get("structuredContent")
    if structured is not None and not isinstance(structured, dict):
        raise InvalidCallResult(f"'structuredContent' is {describe(structured)}, not an object")
    if None in raw.values():
        return {key: value for key, value in raw.items() if value is not None}
    return raw


def _check_block(index: int, block: object) -> None:
    where = f"content[{index}]"
    if not isinstance(block, dict):
        raise InvalidCallResult(f"{where} is {describe(block)}, not a content block object")
    kind = block.get("type")
    if kind == "resource":
        if not isinstance(block.get("resource"), dict):
            raise InvalidCallResult(f"{where} (resource) has no 'resource' object")
        return
    required = _REQUIRED_TEXT.get(kind) if isinstance(kind, str) else None
    if required is None:
        raise InvalidCallResult(
            f"{where} has type {_shown(kind)}; a tool result's content blocks are "
            f"{', '.join(sorted([*_REQUIRED_TEXT, 'resource']))}"
        )
    for field in required:
        if not isinstance(block.get(field), str):
            raise InvalidCallResult(f"{where} ({kind}) has no string {field!r}")


def describe(value: object) -> str:
    """What kind of JSON value ``value`` is, for an error message (never the value itself)."""
    if value is None:
        return "missing (or null)"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _shown(value: object) -> str:
    if not isinstance(value, str):
        return describe(value)
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")
