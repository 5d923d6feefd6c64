"""A server's whole tool list, bounded: at most ``max_tools`` tools and ``max_bytes`` of JSON.

A server listing 100,000 tools used to grow the bridge by 767 MB, take 15 s to index and stall
every other session meanwhile. Real servers list tens of tools (the five reference servers: 50
tools, 40 KB), so a list past either bound is refused, naming the setting, rather than cut to
an arbitrary subset: the server's start fails with that message, and calls to it say so.

The bounds hold for every transport here, after each page is parsed (counted across pages). The
stdio transport also applies them *before* parsing an answer (``_stdio.py``), since parsing is
where memory goes: JSON objects grow tenfold and more as Python objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types
from mcp import ClientSession

__all__ = ["ToolListLimits", "ToolListTooLarge", "list_all_tools"]

MAX_TOOL_PAGES = 100
"""A server whose tools/list never stops paginating cannot hang start-up."""
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ToolListLimits:
    """Bounds on one server's tool list (``[servers] max_tools``,
    ``[servers] max_tool_list_size``)."""

    max_tools: int = 2000
    max_bytes: int = 8 * MIB

    def too_many(self, count: int) -> str | None:
        """Why ``count`` tools are refused, or None."""
        if count <= self.max_tools:
            return None
        return (
            f"it lists more than {self.max_tools:,} tools ({count:,} seen), the limit of "
            f"[servers] max_tools in bridge.toml; raise it to use this server"
        )

    def too_large(self, size: int) -> str | None:
        """Why a tool list of ``size`` bytes is refused, or None."""
        if size <= self.max_bytes:
            return None
        return (
            f"its tool list is larger than {_size(self.max_bytes)} ({_size(size)} seen), the "
            f"limit of [servers] max_tool_list_size in bridge.toml; raise it to use this server"
        )


class ToolListTooLarge(Exception):
    """A server's tool list is past a bound (the message names the setting)."""


async def list_all_tools(session: ClientSession, limits: ToolListLimits) -> list[types.Tool]:
    """Every page of ``tools/list``; raises :class:`ToolListTooLarge` past a bound."""
    tools: list[types.Tool] = []
    size = 0
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        size += len(result.model_dump_json(by_alias=True, exclude_none=True))
        tools.extend(result.tools)
        refused = limits.too_many(len(tools)) or limits.too_large(size)
        if refused is not None:
            raise ToolListTooLarge(refused)
        cursor = result.next_cursor
        if not cursor:
            break
    return tools


def _size(count: int) -> str:
    """``8388608`` → ``8 MiB``; ``14177830`` → ``13.5 MiB``."""
    if count < MIB:
        return f"{count / 1024:.0f} KiB"
    return f"{count / MIB:.1f} MiB".replace(".0 MiB", " MiB")
