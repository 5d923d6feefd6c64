"""Catalog errors: an unknown server or tool, with the closest known names in the message."""

from __future__ import annotations

from collections.abc import Iterable

from bridge_protocol import ErrorCode
from rapidfuzz import fuzz, process, utils

from bridge_core.errors import BridgeError
from bridge_core.gateway import CallFailed

__all__ = ["CatalogError", "UnknownServer", "UnknownTool", "closest_names"]

_SUGGESTIONS = 3
# Below this WRatio a "suggestion" is noise; then the message lists what exists instead.
_SUGGESTION_CUTOFF = 50.0
# Names come from sandbox code: a megabyte "name" must cost neither fuzzy-matching time nor a
# megabyte error message.
_MAX_NAME = 200


def _shown(name: str) -> str:
    return repr(name) if len(name) <= _MAX_NAME else repr(name[:_MAX_NAME]) + "..."


def closest_names(name: str, known: Iterable[str], limit: int = _SUGGESTIONS) -> list[str]:
    """The known names most similar to ``name`` (typos, case, separators), best first."""
    matches = process.extract(
        name[:_MAX_NAME],
        list(known),
        scorer=fuzz.WRatio,
        processor=utils.default_process,
        limit=limit,
        score_cutoff=_SUGGESTION_CUTOFF,
    )
    return [match[0] for match in matches]


class CatalogError(CallFailed, BridgeError):
    """A catalog lookup failed. It is a :class:`CallFailed`, so the gateway can let it through
    to the sandbox as a ``Fault`` with its :attr:`code`."""

    def __init__(self, code: ErrorCode, message: str, suggestions: list[str]) -> None:
        super().__init__(code, message, {"suggestions": list(suggestions)})
        self.suggestions = suggestions


def _listing(suggestions: list[str], known: list[str]) -> str:
    if suggestions:
        return "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
    if not known:
        return "none are available"
    shown = ", ".join(repr(k) for k in sorted(known)[:10])
    return f"available: {shown}" + (f" (and {len(known) - 10} more)" if len(known) > 10 else "")


class UnknownServer(CatalogError):
    """No configured (and allowed) server has this name."""

    def __init__(self, server: str, known: Iterable[str]) -> None:
        names = list(known)
        suggestions = closest_names(server, names)
        message = f"unknown server {_shown(server)}: {_listing(suggestions, names)}"
        super().__init__(ErrorCode.UNKNOWN_SERVER, message, suggestions)
        self.server = server


class UnknownTool(CatalogError):
    """The server exists but offers no (allowed) tool with this name."""

    def __init__(self, server: str, tool: str, known: Iterable[str]) -> None:
        names = list(known)
        suggestions = closest_names(tool, names)
        message = f"server {server!r} has no tool {_shown(tool)}: {_listing(suggestions, names)}"
        super().__init__(ErrorCode.UNKNOWN_TOOL, message, suggestions)
        self.server = server
        self.tool = tool
