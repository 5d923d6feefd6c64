"""The ``run_python`` tool: its definition (identical whatever servers are configured) and the
validation of its arguments.

The description teaches the discovery-first workflow and nothing about individual servers, so
``tools/list`` stays byte-identical (prompt caches stay valid) and small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from bridge_core.sessions import SESSION_NAME_PATTERN, validate_session_name

__all__ = [
    "SESSION_NAME_PATTERN",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "InvalidArguments",
    "RunPythonArgs",
    "parse_arguments",
    "run_python_tool",
]

TOOL_NAME = "run_python"


TOOL_DESCRIPTION = """\
Run Python in a persistent sandbox (no network, writable /tmp). Top-level await works; \
variables and imports persist per session. Your other MCP servers are callable from the code; \
discover before calling:
from mcp import runtime, mcp_servers
await runtime.discovered_servers()
await runtime.search_tool_docs("query", limit=5)
await runtime.query_tool_docs("server")
await mcp_servers["server"].tool(arg=...)
Loop, filter, retry in Python; print only what you need. Has numpy, pandas, scipy, \
sklearn, matplotlib (plots returned), jq."""

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "Python source"},
        "timeout": {"type": "number", "description": "seconds"},
        "session": {"type": "string", "description": "session name; default if absent"},
        "reset": {"type": "boolean", "description": "fresh namespace first"},
    },
    "required": ["code"],
    "additionalProperties": False,
}


def run_python_tool() -> types.Tool:
    """The one tool this server lists."""
    return types.Tool(
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        input_schema=_INPUT_SCHEMA,
    )


class InvalidArguments(ValueError):
    """A ``run_python`` argument is wrong; the message names the field and what is allowed."""


@dataclass(frozen=True, slots=True)
class RunPythonArgs:
    """Validated arguments of one ``run_python`` call."""

    code: str
    timeout: float | None = None
    session: str | None = None
    reset: bool = False


def parse_arguments(arguments: dict[str, Any] | None, *, max_timeout: float) -> RunPythonArgs:
    """Validate raw tool arguments (the SDK's low-level server does not validate the schema).

    Raises :class:`InvalidArguments` naming the field and the allowed values.
    """
    args = dict(arguments or {})
    unknown = sorted(set(args) - set(_INPUT_SCHEMA["properties"]))
    if unknown:
        raise InvalidArguments(
            f"unknown argument(s) {', '.join(map(repr, unknown))}: "
            "run_python takes code, timeout, session and reset"
        )
    code = args.get("code")
    if not isinstance(code, str):
        raise InvalidArguments("'code' is required and must be a string of Python source")
    if not code.strip():
        raise InvalidArguments("'code' must not be empty")

    timeout = args.get("timeout")
    if timeout is not None:
        # bool is an int subclass; `true` is not a number of seconds.
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise InvalidArguments(f"'timeout' must be a number of seconds in (0, {max_timeout:g}]")
        if not math.isfinite(timeout) or timeout <= 0 or timeout > max_timeout:
            raise InvalidArguments(
                f"'timeout' is {timeout!r}: allowed range is (0, {max_timeout:g}] seconds"
            )
        timeout = float(timeout)

    session = args.get("session")
    if session is not None:
        # The session manager's own rule (names end up in container names and labels): any
        # valid name creates its session on first use.
        try:
            validate_session_name(session)
        except ValueError:
            raise InvalidArguments(
                f"'session' is {session!r}: a session name must match {SESSION_NAME_PATTERN} "
                "(a new name creates that session on first use)"
            ) from None

    reset = args.get("reset", False)
    if reset is None:
        reset = False
    if not isinstance(reset, bool):
        raise InvalidArguments("'reset' must be true or false")
    return RunPythonArgs(code=code, timeout=timeout, session=session, reset=reset)
