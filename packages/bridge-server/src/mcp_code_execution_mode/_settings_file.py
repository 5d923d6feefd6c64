"""The settings file, ``bridge.toml`` beside the servers file: policy, approvals, quotas and the
options of the proxied servers, which an MCP client's entry should not have to carry.

:data:`FILE_KEYS` is the one table of its keys. :func:`read_settings_file` validates the whole
file: an unknown section or key (a typo in ``deny_tools`` must not silently allow a tool), a
value of the wrong type or syntax, each is a :class:`SettingsError` naming the file, the line and
the key. ``tomllib`` reports lines only for syntax errors, so a key's line is found again in the
text (:func:`key_line`): the first line that writes that key in that section.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bridge_core.local_files import NotARegularFile, TooLarge, read_regular

from mcp_code_execution_mode import _units as u
from mcp_code_execution_mode._settings_error import SettingsError

__all__ = [
    "FILE_KEYS",
    "FILE_NAME",
    "FileKey",
    "key_line",
    "read_settings_file",
    "settings_file_path",
]

FILE_NAME = "bridge.toml"
"""The settings file's name, in the directory of the servers file."""

MAX_FILE_BYTES = 1024 * 1024
"""A settings file is a screenful of keys; anything larger is a wrong path, not settings."""

Kind = Literal["duration", "size", "count", "choice", "name", "path", "list"]


@dataclass(frozen=True, slots=True)
class FileKey:
    """One key of the settings file."""

    section: str
    key: str
    field: str
    """The attribute of :class:`~mcp_code_execution_mode.settings.Settings` it sets."""
    kind: Kind
    parse: Callable[[str], Any]
    default: str
    """As a user would write it in the file (``unset`` when there is none)."""
    help: str

    @property
    def name(self) -> str:
        """``[section] key``, as messages and the docs name it."""
        return f"[{self.section}] {self.key}"


def _k(section: str, key: str, field: str, kind: Kind, parse: Callable[[str], Any],
       default: str, help: str) -> FileKey:  # fmt: skip
    return FileKey(section, key, field, kind, parse, default, help)


FILE_KEYS: tuple[FileKey, ...] = (
    _k("policy", "allow_servers", "allow_servers", "list", u.parse_name_list, "unset",
       "Only these servers are reachable (names or globs)."),
    _k("policy", "deny_servers", "deny_servers", "list", u.parse_name_list, "unset",
       "These servers are never reachable."),
    _k("policy", "allow_tools", "allow_tools", "list", u.parse_name_list, "unset",
       "Only these tools are callable (server.tool, globs allowed)."),
    _k("policy", "deny_tools", "deny_tools", "list", u.parse_name_list, "unset",
       "These tools are never callable (server.tool, globs allowed)."),
    _k("approval", "mode", "approval", "choice",
       u.choice("off", "destructive", "writes", "all"), '"destructive"',
       "Which tool calls need the user's approval: destructive (destructiveHint), writes (not "
       "readOnlyHint), all, off."),
    _k("approval", "tools", "approve_tools", "list", u.parse_name_list, "unset",
       "Tools (server.tool, globs allowed) whose calls always need approval."),
    _k("approval", "timeout", "approval_timeout", "duration", u.parse_duration, '"120s"',
       "Time the user has to answer; no answer declines the call."),
    _k("approval", "fallback", "approval_fallback", "choice", u.choice("refuse", "allow"),
       '"refuse"', "What a call needing approval gets when the client cannot ask."),
    _k("audit", "log", "audit_log", "path", u.parse_path, "unset",
       "Append one JSON line per proxied tool call here."),
    _k("sandbox", "tmpfs_size", "tmpfs_size", "size", u.parse_size, '"64m"',
       "Size of the writable /tmp of each sandbox."),
    _k("sandbox", "pool_size", "pool_size", "count", u.parse_non_negative_int, "1",
       "Sandboxes started ahead of demand; 0 disables."),
    _k("sandbox", "pool_imports", "pool_imports", "list", u.parse_module_list, "unset",
       "Top-level modules every warm-pool sandbox imports as it starts (each costs memory)."),
    _k("sandbox", "start_timeout", "sandbox_start_timeout", "duration", u.parse_duration,
       '"60s"', "Time a sandbox gets to start; not counted in the call's timeout."),
    _k("sessions", "max", "max_sessions", "count", u.parse_positive_int, "8",
       "Most live session sandboxes; past it the least recently used idle one hibernates."),
    _k("sessions", "max_per_client", "max_sessions_per_client", "count", u.parse_positive_int,
       "4", "Most live session sandboxes one HTTP client may hold."),
    _k("sessions", "idle_ttl", "session_ttl", "duration", u.parse_duration, '"30m"',
       "Idle time after which a session's sandbox stops (the session hibernates)."),
    _k("sessions", "store", "session_store", "name", u.parse_store_name, '"default"',
       "This bridge's store of saved sessions; each bridge sharing a state dir needs its own."),
    _k("sessions", "state_max", "session_state_max", "size", u.parse_size, '"512m"',
       "Largest saved state of one session."),
    _k("sessions", "state_disk", "session_state_disk", "size", u.parse_size, '"4g"',
       "Most disk all saved sessions of the store may use."),
    _k("sessions", "state_disk_per_client", "session_state_disk_per_client", "size",
       u.parse_size, '"1g"', "Most of that disk one HTTP client's saved sessions may use."),
    _k("sessions", "state_retention", "session_state_retention", "duration", u.parse_duration,
       '"7d"', "Saved states unused for this long are deleted."),
    _k("servers", "call_timeout", "call_timeout", "duration", u.parse_duration, '"60s"',
       "Timeout of one tool call made by sandbox code."),
    _k("servers", "start_timeout", "server_start_timeout", "duration", u.parse_duration,
       '"30s"', "Time a proxied server gets to start and list its tools."),
    _k("servers", "max_tools", "max_server_tools", "count", u.parse_positive_int, "2000",
       "Most tools one server may list; a server listing more is refused."),
    _k("servers", "max_tool_list_size", "max_tool_list_size", "size", u.parse_size, '"8m"',
       "Largest tool list of one server (JSON, all pages); a larger one is refused."),
    _k("http", "connections_per_client", "http_connections_per_client", "count",
       u.parse_positive_int, "16", "MCP sessions one HTTP client may keep open."),
    _k("http", "anonymous_ttl", "http_anonymous_ttl", "duration", u.parse_duration, '"60s"',
       "Idle time after which an unauthenticated client's MCP session without a sandbox ends."),
    _k("engine", "channel", "channel", "choice", u.choice("auto", "socket", "stdio"), '"auto"',
       "How podman sandboxes reach the bridge: socket, stdio, or auto (stdio over ssh, "
       "always off Linux)."),
    _k("engine", "identity", "runtime_identity", "path", u.parse_path, "unset",
       "The ssh private key for an ssh:// MCP_BRIDGE_RUNTIME_URL."),
    _k("engine", "known_hosts", "runtime_known_hosts", "path", u.parse_path, "unset",
       "The known_hosts file for that host (default ~/.ssh/known_hosts)."),
    _k("image", "release", "image_release", "path", u.parse_path, "unset",
       "The release record naming the published images (default: the installed one)."),
    _k("check", "mode", "check", "choice", u.choice("nested", "all", "off"), '"nested"',
       "Check each cell before it runs: block it on a mistake in a literal nested tool call "
       "and show type errors as warnings (nested), block it on any type error too (all), or "
       "run it unchecked (off)."),
    _k("tools", "mode", "tools", "choice", u.choice("code", "direct", "both"), '"code"',
       "Which tools the bridge lists: code (run_python), direct (each proxied tool as "
       "server__tool) or both; serve --tools and an HTTP client's ?tools= override it."),
)  # fmt: skip

_BY_SECTION: dict[str, dict[str, FileKey]] = {}
for _key in FILE_KEYS:
    _BY_SECTION.setdefault(_key.section, {})[_key.key] = _key

_EXPECTED = {
    "duration": 'a duration like "30s", "2m" or a number of seconds',
    "size": 'a size like "512m", "2g" or a number of bytes',
    "count": "a whole number",
    "choice": "a string",
    "name": "a string",
    "path": "a path (a string)",
    "list": 'an array of strings, like ["github.delete_*"]',
}


def settings_file_path(config: Path | None, environ: Mapping[str, str]) -> Path:
    """``bridge.toml`` beside the servers file: ``MCP_BRIDGE_CONFIG``'s directory when it is set,
    else the bridge's own folder (``$XDG_CONFIG_HOME/mcp-code-execution-mode``)."""
    if config is not None:
        return config.parent / FILE_NAME
    from bridge_core.discovery import bridge_servers_file, where

    return bridge_servers_file(where(environ=environ)).parent / FILE_NAME


def read_settings_file(path: Path) -> dict[str, Any]:
    """The settings ``path`` sets, by :class:`Settings` field; ``{}`` when there is no file.

    Raises :class:`SettingsError` naming the file, the line and the key at fault.
    """
    data = _read_regular(path)
    if data is None:
        return {}
    try:
        text = data.decode("utf-8")
        table = tomllib.loads(text)
    except UnicodeDecodeError:
        raise _error(path, None, "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:  # "... (at line 3, column 5)": no attribute on 3.11
        found = re.search(r"at line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
        raise _error(path, line, f"is not valid TOML: {exc}") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise _error(path, None, "is not valid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise _error(path, None, f"is not valid TOML: {exc}") from None
    values: dict[str, Any] = {}
    for section, body in table.items():
        keys = _BY_SECTION.get(section)
        if keys is None or not isinstance(body, dict):
            line = key_line(text, "", section)
            raise _error(
                path, line, f"{section!r} is not a section of this file; the sections are "
                + ", ".join(f"[{s}]" for s in _BY_SECTION), names=(section,),
            )  # fmt: skip
        for key, value in body.items():
            spec = keys.get(key)
            if spec is None:
                raise _error(
                    path, key_line(text, section, key),
                    f"[{section}] {key} is not a key of this file; the keys of [{section}] are "
                    + ", ".join(keys), names=(f"[{section}] {key}",),
                )  # fmt: skip
            try:
                values[spec.field] = spec.parse(_raw(spec, value))
            except ValueError as exc:
                raise _error(
                    path, key_line(text, section, key),
                    f"{spec.name} = {_shown(value)}: {exc}", names=(spec.name,),
                ) from None  # fmt: skip
    return values


def _read_regular(path: Path) -> bytes | None:
    # The file's bytes, None when there is none: a regular file only (a symlink is followed),
    # at most MAX_FILE_BYTES (bridge_core.local_files says why it is read this way).
    try:
        return read_regular(path, MAX_FILE_BYTES)
    except NotARegularFile:
        raise _error(path, None, "is not a regular file: not a settings file") from None
    except TooLarge:
        too_large = f"is larger than {MAX_FILE_BYTES:,} bytes: not a settings file"
        raise _error(path, None, too_large) from None
    except OSError as exc:
        raise _error(path, None, f"cannot be read: {exc.strerror or exc}") from None


def _raw(spec: FileKey, value: object) -> str:
    # TOML gives typed values; the parsers of the variables read strings. Each kind accepts the
    # TOML types a person would write for it, and nothing else (no bool for a count).
    if spec.kind == "list":
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return ",".join(value)
    elif isinstance(value, str):
        return value
    elif (
        spec.kind in ("duration", "size", "count")
        and isinstance(value, int | float)
        and not isinstance(value, bool)  # an int to Python, never a count to a person
    ):
        return str(value)
    raise ValueError(f"expected {_EXPECTED[spec.kind]}")


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key_line(text: str, section: str, key: str) -> int | None:
    """The line (1-based) that writes ``key`` of ``section`` (``""``: the top level), or None.

    Each line's key path is its table header's path plus the dotted key left of ``=``, so
    ``[section]`` + ``key = ...``, ``section.key = ...``, ``section = {key = ...}`` (the
    section's line) and ``[section.key]`` are all found. A line inside a multi-line string that
    looks like a key can be taken for one: the line is a pointer for a person; the error itself
    names the key.
    """
    wanted = (section, key) if section else (key,)
    current: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.fullmatch(line)
        if header is not None:
            current = _path(header.group(1)) or ()
            here = current
        elif "=" in line and (left := _path(line.split("=", 1)[0])) is not None:
            here = current + left
            if wanted[: len(here)] == here:  # an inline table holding the key
                return number
        else:
            continue
        if here[: len(wanted)] == wanted:
            return number
    return None


def _path(dotted: str) -> tuple[str, ...] | None:
    # A TOML key path (bare or quoted parts, dot-separated), or None for text that is not one.
    parts = []
    for part in dotted.split("."):
        part = part.strip()
        if len(part) >= 2 and part[0] == part[-1] and part[0] in "\"'":
            parts.append(part[1:-1])
        elif _BARE_KEY.fullmatch(part):
            parts.append(part)
        else:
            return None
    return tuple(parts)


def _error(
    path: Path, line: int | None, problem: str, *, names: tuple[str, ...] = ()
) -> SettingsError:
    place = f"{path}:{line}" if line is not None else str(path)
    return SettingsError(f"{place}: {problem}", names=names, place=place)
