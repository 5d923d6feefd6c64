"""Turning one raw server entry into a :class:`ServerSpec`, or into problems explaining the skip."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal
from urllib.parse import urlsplit

from bridge_core.discovery._expand import expand, prompted_inputs
from bridge_core.discovery._model import DiscoveryProblem, RawEntry, Severity
from bridge_core.servers import ServerSpec

__all__ = ["SELF_MARKERS", "launches_bridge", "parse_entry"]

SELF_MARKERS = ("mcp_code_execution_mode", "mcp-code-execution-mode")
"""An entry whose command or arguments contain one of these would launch this bridge itself."""

_COMMON_FIELDS = frozenset(
    {"type", "transport", "command", "args", "env", "cwd", "url", "headers", "description"}
)
# Fields several clients use that change nothing for us: accepted silently.
_IGNORED_FIELDS = frozenset({"disabled", "enabled", "timeout", "name"})

_TRANSPORTS: dict[str, Literal["stdio", "http", "sse"]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}


class _Skip(Exception):
    """The entry cannot be used; the message says why."""


def parse_entry(
    raw: RawEntry, *, source: str, environ: Mapping[str, str], problems: list[DiscoveryProblem]
) -> ServerSpec | None:
    """Validate and expand one entry. Appends to ``problems``; returns None when it is skipped."""

    def report(message: str, severity: Severity) -> None:
        problems.append(DiscoveryProblem(source, raw.name, message, severity))

    value = raw.value
    if not raw.name.strip():
        report("empty server name", "error")
        return None
    if not isinstance(value, dict):
        report(f"entry is a {type(value).__name__}, expected an object", "error")
        return None
    if value.get("disabled") is True or value.get("enabled") is False:
        report("disabled in its configuration; skipped", "info")
        return None
    asked = prompted_inputs(value)
    if asked:
        # The bridge cannot prompt; proxied, the server would receive the text `${input:ID}`
        # itself as its token or key. VS Code, which can ask, loads it directly.
        report(
            f"uses {', '.join(asked)}, a value VS Code asks the user for when it starts the "
            "server, which the bridge cannot do; not proxied (VS Code loads it itself)",
            "info",
        )
        return None
    for key in sorted(set(value) - _COMMON_FIELDS - _IGNORED_FIELDS - raw.known_fields):
        report(f"unknown field {key!r} ignored", "warning")
    try:
        spec = _build(raw, value, f"{source}#{raw.location}", environ, report)
    except _Skip as exc:
        report(str(exc), "error")
        return None
    return spec


def launches_bridge(spec: ServerSpec) -> bool:
    """Whether the entry would start this bridge (so the bridge must never proxy it)."""
    launched = " ".join((spec.command or "", *spec.args))
    return any(marker in launched for marker in SELF_MARKERS)


def _build(
    raw: RawEntry,
    value: Mapping[str, object],
    source: str,
    environ: Mapping[str, str],
    report: Callable[[str, Severity], None],
) -> ServerSpec:
    missing: list[str] = []

    def text(field: str, item: object, *, scalars: bool = True) -> str:
        # Numbers are accepted where clients accept them (``"args": ["--port", 8080]``).
        allowed = (str, int, float) if scalars else (str,)
        if isinstance(item, bool) or not isinstance(item, allowed):
            raise _Skip(f"{field} must be a string, got {type(item).__name__}")
        expanded, unset = expand(str(item), environ)
        missing.extend(unset)
        return expanded

    def mapping(field: str) -> dict[str, str]:
        item = value.get(field, {})
        if item is None:
            return {}
        if not isinstance(item, dict):
            raise _Skip(f"{field} must be an object of strings, got {type(item).__name__}")
        if field == "env":
            # Booleans in env blocks are common ("DEBUG": true); the process sees a string.
            item = {k: str(v).lower() if isinstance(v, bool) else v for k, v in item.items()}
        return {str(k): text(f"{field}.{k}", v) for k, v in item.items()}

    transport = _transport(value)
    description = value.get("description", "")
    if not isinstance(description, str):
        raise _Skip("description must be a string")
    if transport == "stdio":
        command = value.get("command")
        if command is None or command == "":
            raise _Skip("missing command (a stdio server needs one)")
        args = value.get("args", [])
        if args is None:
            args = []
        if not isinstance(args, list):
            raise _Skip(f"args must be a list of strings, got {type(args).__name__}")
        cwd = value.get("cwd")
        spec = ServerSpec(
            name=raw.name,
            transport="stdio",
            command=text("command", command, scalars=False),
            args=tuple(text(f"args[{i}]", a) for i, a in enumerate(args)),
            env=mapping("env"),
            cwd=None if cwd is None else text("cwd", cwd),
            description=description,
            source=source,
        )
    else:
        url = value.get("url")
        if url is None or url == "":
            raise _Skip(f"missing url (a {transport} server needs one)")
        expanded_url = text("url", url, scalars=False)
        scheme = urlsplit(expanded_url).scheme
        if scheme not in ("http", "https"):
            # Not the URL itself: it may hold a token, and this message reaches logs and doctor.
            got = f"a {scheme}: URL" if scheme else "no scheme"
            raise _Skip(f"url must start with http:// or https://, got {got}")
        spec = ServerSpec(
            name=raw.name,
            transport=transport,
            url=expanded_url,
            headers=mapping("headers"),
            description=description,
            source=source,
        )
    for name in dict.fromkeys(missing):
        report(f"environment variable {name} is not set; expanded to an empty string", "warning")
    return spec


def _transport(value: Mapping[str, object]) -> Literal["stdio", "http", "sse"]:
    declared = value.get("type", value.get("transport"))
    if declared is not None:
        if not isinstance(declared, str) or declared.lower() not in _TRANSPORTS:
            raise _Skip(f"unknown transport {declared!r} (expected stdio, http or sse)")
        return _TRANSPORTS[declared.lower()]
    has_command, has_url = "command" in value, "url" in value
    if has_command and has_url:
        raise _Skip("has both command and url; set type to stdio, http or sse")
    if has_url:
        # Clients that infer the transport treat an .../sse endpoint as the legacy SSE transport.
        url = value["url"]
        return "sse" if isinstance(url, str) and url.rstrip("/").endswith("/sse") else "http"
    return "stdio"
