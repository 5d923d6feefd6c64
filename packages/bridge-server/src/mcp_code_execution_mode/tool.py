"""The ``run_python`` tool: its definition (identical whatever servers are configured) and the
validation of its arguments.

The description teaches the discovery-first workflow and nothing about individual servers, so
``tools/list`` stays byte-identical (prompt caches stay valid) and small.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from bridge_core.sessions import SESSION_NAME_PATTERN, validate_session_name

__all__ = [
    "FIELDS",
    "SESSION_NAME_PATTERN",
    "Field",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "InvalidArguments",
    "RunPythonArgs",
    "parse_arguments",
    "run_python_tool",
]

TOOL_NAME = "run_python"


TOOL_DESCRIPTION = """\
Run Python in a persistent sandbox (no network, writable /tmp, top-level await). Call your \
other MCP servers from it; discover first:
from mcp import runtime, mcp_servers
await runtime.discovered_servers()
await runtime.search_tool_docs("query")
await runtime.query_tool_docs("server")
await mcp_servers["server"].tool(arg=...)
runtime.save_workflow(fn)/workflow(name): reuse code later.
Print only what you need. Has numpy, pandas, scipy, sklearn, matplotlib, jq. yield_after=S: \
output so far, a run_id to resume or cancel."""


class InvalidArguments(ValueError):
    """A ``run_python`` argument is wrong; the message names the field and what is allowed."""


@dataclass(frozen=True, slots=True)
class RunPythonArgs:
    """Validated arguments of one ``run_python`` call."""

    code: str | None
    timeout: float | None = None
    session: str | None = None
    reset: bool = False
    yield_after: float | None = None
    resume: str | None = None
    cancel: str | None = None


JSONType = Literal["string", "number", "boolean"]
_PYTHON_TYPES: dict[JSONType, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "boolean": (bool,),
}


@dataclass(frozen=True, slots=True)
class Field:
    """One argument of ``run_python``: what the schema says of it and what the parser accepts.

    The schema shows only ``type`` and ``description`` (tools/list stays small and identical
    whatever the settings); ``must`` and ``bounds`` are the rest of the rule, applied by
    :func:`parse_arguments` and quoted in its errors.
    """

    name: str
    type: JSONType
    description: str
    must: str
    """What a valid value is, completing "'name' must be ...": ``<max_timeout>`` is filled in."""
    required: bool = False
    default: Any = None
    bounds: Callable[[Any, float], Any] | None = None
    """``bounds(value, max_timeout)``: the value to use, or InvalidArguments; after the type
    check."""

    def schema(self) -> dict[str, Any]:
        """This field's entry under the input schema's ``properties`` (a name that says it all
        has no description: the listing stays small)."""
        if not self.description:
            return {"type": self.type}
        return {"type": self.type, "description": self.description}

    def parse(self, value: Any, *, max_timeout: float) -> Any:
        """The validated value (``None`` or absent: the default); raises InvalidArguments."""
        if value is None and not self.required:
            return self.default
        kinds = _PYTHON_TYPES[self.type]
        # bool is an int subclass; `true` is not a number of seconds.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            verb = "is required and must be" if self.required else "must be"
            must = self.must.replace("<max_timeout>", f"{max_timeout:g}")
            raise InvalidArguments(f"'{self.name}' {verb} {must}")
        return value if self.bounds is None else self.bounds(value, max_timeout)


def _code(code: str, max_timeout: float) -> str:
    if not code.strip():
        raise InvalidArguments("'code' must not be empty")
    return code


def _seconds(field: str) -> Callable[[float, float], float]:
    """The bounds of a number of seconds in ``(0, max_timeout]``, named ``field`` in errors."""

    def bounds(seconds: float, max_timeout: float) -> float:
        # Compared before any conversion: JSON integers have no bound, and one past a float's
        # range overflows ``isfinite`` (or, past 4300 digits, ``repr``).
        if not (0 < seconds <= max_timeout) or not math.isfinite(seconds):
            big = type(seconds) is not float and abs(seconds) >= 10**15
            shown = "out of range" if big else repr(seconds)
            raise InvalidArguments(
                f"'{field}' is {shown}: allowed range is (0, {max_timeout:g}] seconds"
            )
        return float(seconds)

    return bounds


def _run_id(run_id: str, max_timeout: float) -> str:
    if not run_id or len(run_id) > 64:
        raise InvalidArguments("a run id is the run_id a yielded run_python call returned")
    return run_id


def _session(session: str, max_timeout: float) -> str:
    # The session manager's own rule (names end up in container names and labels): any valid
    # name creates its session on first use.
    try:
        return validate_session_name(session)
    except ValueError:
        raise InvalidArguments(
            f"'session' is {session!r}: a session name must match {SESSION_NAME_PATTERN} "
            "(a new name creates that session on first use)"
        ) from None


FIELDS: tuple[Field, ...] = (
    Field("code", "string", "Python source", must="a string of Python source", bounds=_code),
    Field(
        "timeout",
        "number",
        "seconds",
        must="a number of seconds in (0, <max_timeout>]",
        bounds=_seconds("timeout"),
    ),
    Field(
        "session",
        "string",
        "",
        must=f"a session name matching {SESSION_NAME_PATTERN}",
        bounds=_session,
    ),
    Field("reset", "boolean", "", must="true or false", default=False),
    Field(
        "yield_after",
        "number",
        "",
        must="a number of seconds in (0, <max_timeout>]",
        bounds=_seconds("yield_after"),
    ),
    Field("resume", "string", "", must="a run_id", bounds=_run_id),
    Field("cancel", "string", "", must="a run_id", bounds=_run_id),
)
"""The arguments of ``run_python``, in schema order: the one definition of both its input schema
and :func:`parse_arguments`."""

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {field.name: field.schema() for field in FIELDS},
    "additionalProperties": False,
}


def run_python_tool() -> types.Tool:
    """The one tool this server lists."""
    return types.Tool(
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        input_schema=_INPUT_SCHEMA,
    )


def parse_arguments(arguments: dict[str, Any] | None, *, max_timeout: float) -> RunPythonArgs:
    """Validate raw tool arguments against :data:`FIELDS` (the SDK's low-level server does not
    validate the schema).

    Raises :class:`InvalidArguments` naming the field and the allowed values.
    """
    args = dict(arguments or {})
    names = [field.name for field in FIELDS]
    unknown = sorted(set(args) - set(names))
    if unknown:
        raise InvalidArguments(
            f"unknown argument(s) {', '.join(map(repr, unknown))}: "
            f"run_python takes {', '.join(names[:-1])} and {names[-1]}"
        )
    values = {f.name: f.parse(args.get(f.name), max_timeout=max_timeout) for f in FIELDS}
    given = [name for name in ("code", "resume", "cancel") if values[name] is not None]
    if len(given) != 1:
        raise InvalidArguments(
            "give exactly one of 'code' (run it), 'resume' (a yielded run's run_id: what came "
            f"since) and 'cancel' (a run_id to stop); got {' and '.join(given) or 'none'}"
        )
    return RunPythonArgs(**values)
