"""Every setting of the bridge: the variables of a client's entry, and the settings file.

:data:`SETTINGS` is the one table of the ``MCP_BRIDGE_*`` variables (each also a flag of every
command): what an MCP client's entry needs, at most :data:`MAX_VARIABLES` of them. Policy,
approvals, quotas and the options of the proxied servers live in the settings file
(:mod:`._settings_file`), and the variables that used to hold them still work for this release
(:mod:`._deprecated`). :func:`load_settings` reads all three into a frozen :class:`Settings`.
``docs/configuration.md`` is checked against the tables by tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from bridge_core.runtime.detect import RuntimeTarget
from bridge_image.names import DEFAULT_IMAGE

from mcp_code_execution_mode import _units as u
from mcp_code_execution_mode._deprecated import Deprecation, apply_deprecated
from mcp_code_execution_mode._settings_error import SettingsError
from mcp_code_execution_mode._settings_file import (
    FILE_KEYS,
    read_settings_file,
    settings_file_path,
)

__all__ = [
    "DEFAULT_IMAGE",
    "MAX_VARIABLES",
    "SETTINGS",
    "Setting",
    "Settings",
    "SettingsError",
    "default_state_dir",
    "load_settings",
    "runtime_target",
]

MAX_VARIABLES = 20
"""The most ``MCP_BRIDGE_*`` variables there may be: a user reads them all in one screen. A
new knob goes into the settings file, or is a constant."""


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/mcp-code-execution-mode``, else ``~/.local/state/...`` likewise."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-code-execution-mode"


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the settings table."""

    name: str
    """Attribute of :class:`Settings`."""
    env: str
    flag: str
    parse: Callable[[str], Any]
    default: str | None
    """The default as a user would write it (parsed like any value); None = unset."""
    help: str


def _s(name: str, parse: Callable[[str], Any], default: str | None, help: str) -> Setting:
    return Setting(
        name=name,
        env="MCP_BRIDGE_" + name.upper(),
        flag="--" + name.replace("_", "-"),
        parse=parse,
        default=default,
        help=help,
    )


SETTINGS: tuple[Setting, ...] = (
    _s("runtime", u.choice("auto", "podman", "docker"), "auto",
       "Container runtime: podman, docker, or auto (podman first, then docker)."),
    _s("runtime_url", u.parse_runtime_url, None,
       "The podman API to use: unix:///path/podman.sock, or ssh://user@host[:port]/run/podman/"
       "podman.sock for an engine on another machine (on macOS the only kind: podman "
       "machine's); unset = CONTAINER_HOST or the usual local sockets."),
    _s("image", str, DEFAULT_IMAGE, "Sandbox container image."),
    _s("image_pull", u.choice("auto", "never"), "auto",
       "A missing published image of this release: auto pulls it by digest and verifies it; "
       "never leaves it to a local build (air-gapped)."),
    _s("timeout", u.parse_duration, "120s",
       "Default execution timeout of one run_python call (30, 30s, 2m)."),
    _s("max_timeout", u.parse_duration, "15m",
       "Largest timeout a run_python call may ask for."),
    _s("memory_limit", u.parse_size, "512m", "Memory limit of each sandbox (512m, 2g)."),
    _s("cpu_quota", u.parse_optional_int, None,
       "CPU quota in microseconds per 100 ms period (50000 = half a core); unset = no limit."),
    _s("pids_limit", u.parse_positive_int, "128", "Maximum processes in each sandbox."),
    _s("security_opt", u.parse_word_list, None,
       "Extra --security-opt values, whitespace-separated; added to the built-in hardening."),
    _s("session_persist", u.parse_bool, "true",
       "Keep variables between calls; false gives every call a fresh sandbox."),
    _s("state_dir", u.parse_path, None,
       "Where sessions, caches and logs live (default $XDG_STATE_HOME/mcp-code-execution-mode)."),
    _s("config", u.parse_path, None,
       "An extra MCP servers file proxied besides the discovered ones; the settings file "
       "bridge.toml is read from its directory."),
    _s("discover", u.parse_bool, "true",
       "Read the MCP client config files (Claude, Cursor, VS Code, ...) to find servers."),
    _s("output_mode", u.choice("compact", "toon"), "compact",
       "How run_python results are rendered: compact text, or TOON when it is smaller."),
    _s("output_cap", u.parse_size, "24k",
       "Characters of stdout+stderr returned per call; past it, head and tail are kept."),
    _s("http_token_file", u.parse_path, None,
       "Bearer tokens serve --http accepts (add one with the token command); required to "
       "listen beyond loopback."),
    _s("http_allowed_hosts", u.parse_name_list, None,
       "Host names (or host:port) clients use to reach serve --http besides loopback."),
    _s("log_level", u.choice("debug", "info", "warning", "error"), "warning",
       "Log level (logs go to stderr, never stdout, and to the log file)."),
    _s("log_file", u.parse_path_or_off, None,
       "Log file, rotated at 1 MiB with 3 old files kept (default $STATE_DIR/logs/bridge.log); "
       "off disables it."),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Settings:
    """All settings, parsed: the fields named in :data:`SETTINGS` (variables) and in
    :data:`~mcp_code_execution_mode._settings_file.FILE_KEYS` (the settings file)."""

    # The variables (SETTINGS).
    runtime: str = "auto"
    runtime_url: str | None = None
    image: str = DEFAULT_IMAGE
    image_pull: str = "auto"
    timeout: float = 120.0
    max_timeout: float = 900.0
    memory_limit: int = 512 * 1024 * 1024
    cpu_quota: int | None = None
    pids_limit: int = 128
    security_opt: tuple[str, ...] = ()
    session_persist: bool = True
    state_dir: Path | None = None
    config: Path | None = None
    discover: bool = True
    output_mode: str = "compact"
    output_cap: int = 24 * 1024  # bridge_core.sessions.types.OUTPUT_CAP (not imported: startup)
    http_token_file: Path | None = None
    http_allowed_hosts: tuple[str, ...] = ()
    log_level: str = "warning"
    log_file: Path | Literal[False] | None = None
    """None: the default place in the state dir; False: no log file."""
    # The settings file (FILE_KEYS).
    allow_servers: tuple[str, ...] = ()
    deny_servers: tuple[str, ...] = ()
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    approval: str = "destructive"
    approve_tools: tuple[str, ...] = ()
    approval_timeout: float = 120.0
    approval_fallback: str = "refuse"
    audit_log: Path | None = None
    tmpfs_size: int = 64 * 1024 * 1024
    pool_size: int = 1
    pool_imports: tuple[str, ...] = ()
    sandbox_start_timeout: float = 60.0
    max_sessions: int = 8
    max_sessions_per_client: int = 4
    session_ttl: float = 1800.0
    session_store: str = "default"
    session_state_max: int = 512 * 1024 * 1024
    session_state_disk: int = 4 * 1024 * 1024 * 1024
    session_state_disk_per_client: int = 1024 * 1024 * 1024
    session_state_retention: float = 7 * 86400.0
    call_timeout: float = 60.0
    server_start_timeout: float = 30.0
    max_server_tools: int = 2000
    max_tool_list_size: int = 8 * 1024 * 1024
    http_connections_per_client: int = 16
    http_anonymous_ttl: float = 60.0
    channel: str = "auto"
    runtime_identity: Path | None = None
    runtime_known_hosts: Path | None = None
    image_release: Path | None = None
    tools: str = "code"
    check: str = "nested"
    # Where they came from.
    settings_file: Path | None = None
    """The settings file looked at (None: settings not loaded from the environment)."""
    deprecations: tuple[Deprecation, ...] = ()
    """Old variables and flags in use: logged once at start, printed by ``doctor``."""

    @property
    def resolved_state_dir(self) -> Path:
        """``state_dir`` or the XDG default."""
        return self.state_dir if self.state_dir is not None else default_state_dir()

    @property
    def resolved_log_file(self) -> Path | None:
        """The log file in use: ``log_file``, else ``STATE_DIR/logs/bridge.log``; None if off."""
        if self.log_file is False:
            return None
        if self.log_file is None:
            return self.resolved_state_dir / "logs" / "bridge.log"
        return self.log_file


def runtime_target(settings: Settings) -> RuntimeTarget:
    """Where the podman backend finds its engine, from the ``runtime_*`` and channel settings."""
    return RuntimeTarget(
        url=settings.runtime_url,
        identity=settings.runtime_identity,
        known_hosts=settings.runtime_known_hosts,
        channel=settings.channel,
    )


def load_settings(
    flags: Mapping[str, str | None] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Parse settings from CLI ``flags`` (by setting name; None = not given) over ``environ``,
    then the settings file beside the servers file, then the deprecated variables and flags
    for the keys the file does not set.

    Raises :class:`SettingsError` with one line naming the variable, flag or file key (and its
    line) at fault.
    """
    flags = flags or {}
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = flags.get(setting.name)
        source = setting.flag
        if raw is None:
            raw = environ.get(setting.env)
            source = setting.env
        if raw is None or not raw.strip():
            continue  # unset or set empty (common in client config files): the default applies
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{source}={raw!r}: {exc}", names=(source,)) from None
    path = settings_file_path(values.get("config"), environ)
    from_file = read_settings_file(path)
    from_old, deprecations = apply_deprecated(flags, environ, from_file, path)
    values |= from_old | from_file
    values = {k: v for k, v in values.items() if v is not None}
    settings = Settings(**values, settings_file=path, deprecations=deprecations)
    if settings.timeout > settings.max_timeout:
        raise SettingsError(
            f"MCP_BRIDGE_TIMEOUT ({settings.timeout:g}s) is above MCP_BRIDGE_MAX_TIMEOUT "
            f"({settings.max_timeout:g}s): raise the maximum or lower the timeout",
            names=("MCP_BRIDGE_TIMEOUT", "MCP_BRIDGE_MAX_TIMEOUT"),
        )
    return settings


def _check_tables_match_dataclass() -> None:
    # The tables and the dataclass must describe the same settings with the same defaults;
    # checked at import so a mismatch can never ship.
    if len(SETTINGS) > MAX_VARIABLES:
        raise AssertionError(f"more than {MAX_VARIABLES} MCP_BRIDGE_* variables")
    names = {f.name for f in fields(Settings)} - {"settings_file", "deprecations"}
    if names != {s.name for s in SETTINGS} | {k.field for k in FILE_KEYS}:
        raise AssertionError("settings tables and Settings fields differ")
    defaults = Settings()
    for setting in SETTINGS:
        if setting.default is not None and setting.parse(setting.default) != getattr(
            defaults, setting.name
        ):
            raise AssertionError(f"default of {setting.name} differs")
    for key in FILE_KEYS:
        if key.default != "unset" and key.parse(key.default.strip('"')) != getattr(
            defaults, key.field
        ):
            raise AssertionError(f"default of {key.name} differs")


_check_tables_match_dataclass()
