"""Resources and prompts of upstream servers, for sandbox code (``runtime.list_resources``,
``read_resource``, ``list_prompts``, ``get_prompt``).

Request methods (``Request.method`` → ``params`` → reply value), answered by the gateway:

- ``list_resources`` ``{server}`` → ``[{"uri", "name", ...}, ...]``
- ``read_resource`` ``{server, uri}`` → ``{"contents": [...]}``
- ``list_prompts`` ``{server}`` → ``[{"name", "description", "arguments"}, ...]``
- ``get_prompt`` ``{server, name, arguments: {str: str}}`` → ``{"description", "messages"}``

The same rules as tools: the server policy (a denied or unknown server is refused without I/O),
every configured secret masked in answers and errors (by the gateway), one audit line per read
or prompt (``tool`` is ``resources/read`` or ``prompts/get``, arguments by size only), and bounds
on what a server can make the host hold: listings stop at :data:`MAX_ITEMS` entries and
:data:`MAX_PAGES` pages; one answer is bounded by the upstream message limit and then by the
sandbox frame limit (a larger one becomes a fault).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from bridge_protocol import ErrorCode, JSONValue
from mcp import ClientSession

from bridge_core.gateway import CallFailed

__all__ = ["MAX_ITEMS", "MAX_PAGES", "RESOURCE_METHODS", "answer", "audit_name"]

MAX_ITEMS = 2000
"""Most resources or prompts one listing returns (a server listing more is cut, said in a log)."""
MAX_PAGES = 50
MAX_URI_CHARS = 8192
MAX_PROMPT_ARGUMENTS = 64

RESOURCE_METHODS = frozenset({"list_resources", "read_resource", "list_prompts", "get_prompt"})


def _text(params: Mapping[str, Any], key: str, limit: int) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value or len(value) > limit:
        raise CallFailed(
            ErrorCode.INVALID_ARGUMENTS,
            f"{key!r} must be a non-empty string of at most {limit} characters",
        )
    return value


def _arguments(params: Mapping[str, Any]) -> dict[str, str]:
    arguments = params.get("arguments") or {}
    if (
        not isinstance(arguments, dict)
        or len(arguments) > MAX_PROMPT_ARGUMENTS
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in arguments.items())
    ):
        raise CallFailed(
            ErrorCode.INVALID_ARGUMENTS,
            f"prompt arguments must be a dict of at most {MAX_PROMPT_ARGUMENTS} str: str",
        )
    return arguments


def audit_name(method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """What the audit log records for a request: the ``tool`` column and the arguments (of which
    it keeps sizes only)."""
    if method == "read_resource":
        return "resources/read", {"uri": params.get("uri")}
    if method == "get_prompt":
        return "prompts/get", {"name": params.get("name"), **(params.get("arguments") or {})}
    return f"{method.replace('_', '/', 1)}", {}


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _pages(fetch: Callable[[str | None], Awaitable[tuple[list[Any], str | None]]]) -> Any:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page, cursor = await fetch(cursor)
        items.extend(page[: MAX_ITEMS - len(items)])
        if cursor is None or len(items) >= MAX_ITEMS:
            break
    return [_dump(item) for item in items]


async def answer(session: ClientSession, method: str, params: Mapping[str, Any]) -> JSONValue:
    """Answer one resource/prompt request on ``session`` (the server's live session)."""
    if method == "list_resources":

        async def resources(cursor: str | None) -> tuple[list[Any], str | None]:
            page = await session.list_resources(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            return list(page.resources), page.next_cursor

        listed: JSONValue = await _pages(resources)
        return listed
    if method == "list_prompts":

        async def prompts(cursor: str | None) -> tuple[list[Any], str | None]:
            page = await session.list_prompts(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            return list(page.prompts), page.next_cursor

        found: JSONValue = await _pages(prompts)
        return found
    if method == "read_resource":
        read: JSONValue = _dump(await session.read_resource(_text(params, "uri", MAX_URI_CHARS)))
        return read
    prompt = await session.get_prompt(_text(params, "name", 256), _arguments(params))
    filled: JSONValue = _dump(prompt)
    return filled
