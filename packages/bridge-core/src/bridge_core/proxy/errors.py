"""Failures of proxied MCP servers, one class per thing a caller can do differently about it.

Every message names the server (and the tool, for call failures) so it can be shown to the
model as-is.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bridge_core.errors import UpstreamError

__all__ = [
    "UnknownServer",
    "UpstreamUnavailable",
    "UpstreamCrashed",
    "UpstreamTimeout",
    "UpstreamRPCError",
]


class UnknownServer(UpstreamError):
    """No configured server has this name; ``suggestions`` holds close names."""

    def __init__(self, server: str, suggestions: list[str]) -> None:
        hint = f"; did you mean {', '.join(map(repr, suggestions))}?" if suggestions else ""
        super().__init__(f"unknown MCP server {server!r}{hint}")
        self.server = server
        self.suggestions = suggestions


class UpstreamUnavailable(UpstreamError):
    """The server could not be started, or it is cooling down after repeated failures."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server = server


class UpstreamCrashed(UpstreamUnavailable):
    """The server's connection ended while calls were in flight (exit status and stderr tail
    are in the message)."""

    def __init__(
        self, server: str, message: str, *, exit_status: int | None, stderr_tail: str
    ) -> None:
        super().__init__(server, message)
        self.exit_status = exit_status
        self.stderr_tail = stderr_tail


class UpstreamTimeout(UpstreamError):
    """A call took longer than the per-call timeout; a cancel was sent to the server."""

    def __init__(self, server: str, tool: str, timeout: float) -> None:
        super().__init__(
            f"{server}.{tool} did not answer within {timeout:g}s ([servers] call_timeout in "
            "bridge.toml); the call was cancelled on the server"
        )
        self.server = server
        self.tool = tool
        self.timeout = timeout


class UpstreamRPCError(UpstreamError):
    """The server answered a call with a JSON-RPC error (not an ``isError`` result)."""

    def __init__(self, server: str, tool: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{server}.{tool} failed: {message} (JSON-RPC error {code})")
        self.server = server
        self.tool = tool
        self.code = code
        self.rpc_message = message
        self.data = data


_SHOWN_ERRORS = 3
_SHOWN_ERROR_CHARS = 300


def validation_summary(error: ValidationError, *, arms: tuple[str, ...] = ()) -> str:
    """What is wrong with an upstream's answer, on one bounded line: the first few failed
    fields with pydantic's reason, never the value itself (its bytes are the upstream's).

    Where a union refused a value, the members whose ``type`` did not match say nothing about
    it (a text block is not an image): their errors are left out while another member's remain.
    ``arms``: top-level union members to prefer the same way (an answer's, not a request's)."""
    details = error.errors(include_url=False, include_input=False)
    other_kind = {
        detail["loc"][:-1]
        for detail in details
        if detail["loc"][-1:] == ("type",) and detail["type"] == "literal_error"
    }
    fitting = [d for d in details if not any(d["loc"][: len(k)] == k for k in other_kind)]
    if not fitting:  # no member's type matched: that is what is wrong
        fitting = [d for d in details if d["loc"][:-1] in other_kind and d["loc"][-1] == "type"]
    preferred = [d for d in fitting or details if d["loc"][:1] and d["loc"][0] in arms]
    shown = "; ".join(
        f"{'.'.join(str(part) for part in detail['loc']) or 'the result'}: {detail['msg']}"
        for detail in (preferred or fitting or details)[:_SHOWN_ERRORS]
    )
    return shown[:_SHOWN_ERROR_CHARS]
