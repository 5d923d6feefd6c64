"""Catalog errors: an unknown server or tool, with the closest known names in the message.

One did-you-mean for the whole product: every unknown name the sandbox can hit (attribute, item,
import, a docs request, a call) is answered here on the host, so the same typo always gets the
same suggestions.
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge_protocol import ErrorCode
from bridge_protocol.names import ALIAS_PREFIX, MAX_NAME_CHARS
from rapidfuzz import fuzz, process, utils

from bridge_core.errors import BridgeError
from bridge_core.gateway import CallFailed

__all__ = ["CatalogError", "UnknownServer", "UnknownTool", "closest_names"]

SUGGESTIONS = 3
SUGGESTION_CUTOFF = 50.0
"""Least similarity (0-100) of a suggestion. The scorer is the plain edit-distance ratio over
lower-cased names with separators as spaces (difflib's measure): ``WRatio``'s partial matching
scores a short typo ~60 against any long name (``ech`` → ``get-resource-reference``)."""
_SHOWN_CHARS = 200


def _shown(name: str) -> str:
    return repr(name) if len(name) <= _SHOWN_CHARS else repr(name[:_SHOWN_CHARS]) + "..."


def closest_names(name: str, known: Iterable[str], limit: int = SUGGESTIONS) -> list[str]:
    """The known names most similar to ``name`` (typos, case, separators), best first; each name
    once, ties in name order. A name longer than any name can be gets none (and costs nothing)."""
    if len(name) > MAX_NAME_CHARS:
        return []
    matches = process.extract(
        name,
        sorted(set(known)),
        scorer=fuzz.ratio,
        processor=utils.default_process,
        limit=limit,
        score_cutoff=SUGGESTION_CUTOFF,
    )
    ranked = sorted(matches, key=lambda match: (-match[1], match[0]))
    return [match[0] for match in ranked]


class CatalogError(CallFailed, BridgeError):
    """A catalog lookup failed. It is a :class:`CallFailed`, so the gateway can let it through
    to the sandbox as a ``Fault`` with its :attr:`code`."""

    def __init__(self, code: ErrorCode, message: str, suggestions: list[str]) -> None:
        super().__init__(code, message, {"suggestions": list(suggestions)})
        self.suggestions = suggestions


def _listing(name: str, suggestions: list[str], known: list[str]) -> str:
    if len(name) > MAX_NAME_CHARS:
        return f"names are at most {MAX_NAME_CHARS} characters"
    if suggestions:
        return "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
    if not known:
        return "none are available"
    names = sorted(set(known))
    shown = ", ".join(repr(k) for k in names[:10])
    return f"available: {shown}" + (f" (and {len(names) - 10} more)" if len(names) > 10 else "")


class UnknownServer(CatalogError):
    """No configured (and allowed) server has this name; ``known`` are the visible servers."""

    def __init__(self, server: str, known: Iterable[str]) -> None:
        names = list(known)
        # ``mcp_githb`` is the alias form of a typo of ``github``: match the server part.
        suggestions = closest_names(server.removeprefix(ALIAS_PREFIX) or server, names)
        message = f"unknown server {_shown(server)}: {_listing(server, suggestions, names)}"
        super().__init__(ErrorCode.UNKNOWN_SERVER, message, suggestions)
        self.server = server


class UnknownTool(CatalogError):
    """The server exists but offers no (allowed) tool with this name; ``known`` are its allowed
    tools."""

    def __init__(self, server: str, tool: str, known: Iterable[str]) -> None:
        names = list(known)
        suggestions = closest_names(tool, names)
        listing = _listing(tool, suggestions, names)
        message = f"server {server!r} has no tool {_shown(tool)}: {listing}"
        super().__init__(ErrorCode.UNKNOWN_TOOL, message, suggestions)
        self.server = server
        self.tool = tool
