"""Every setting of the bridge, declared once: name, env variable, CLI flag, parser, default, help.

:data:`SETTINGS` is the single table; :func:`load_settings` reads the environment and the parsed
command line (flags win over env) into a frozen :class:`Settings`. ``docs/configuration.md`` is
checked against the table by a test, so a new setting cannot go undocumented.
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

__all__ = [
    "DEFAULT_IMAGE",
    "SETTINGS",
    "Setting",
    "Settings",
    "SettingsError",
    "default_state_dir",
    "load_settings",
    "runtime_target",
]


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/mcp-code-execution-mode``, else ``~/.local/state/...`` likewise."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-code-execution-mode"


class SettingsError(ValueError):
    """A setting has a bad value; the message is one line naming the variable or flag."""

    def __init__(self, message: str, *, names: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.names = names
        """The variables or flags at fault, as the user wrote them."""

    @property
    def fix(self) -> str:
        """Where to correct it, for a user who sees the error in their MCP client."""
        flags = [n for n in self.names if n.startswith("--")]
        variables = [n for n in self.names if not n.startswith("--")]
        places = []
        if variables:
            places.append(
                f'correct or remove {" and ".join(variables)} in the "env" of this server\'s '
                "entry in your MCP client's configuration (or wherever its environment sets it)"
            )
        if flags:
            places.append(f'correct {" and ".join(flags)} in the "args" of that entry')
        return "; ".join(places or ["correct the setting"]) + ", then restart the server"


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
    _s("runtime", u.choice("auto", "podman", "docker", "local"), "auto",
       "Container runtime: podman, docker, or auto (podman first, then docker). "
       "local runs code as a plain process WITHOUT isolation (tests only)."),
    _s("runtime_url", u.parse_runtime_url, None,
       "The podman API to use: unix:///path/podman.sock, or ssh://user@host[:port]/run/podman/"
       "podman.sock for an engine on another machine (sandboxes then use the stdio channel); "
       "unset = CONTAINER_HOST or the usual local sockets."),
    _s("runtime_identity", u.parse_path, None,
       "The ssh private key for an ssh:// runtime URL (default: ssh's own keys and agent)."),
    _s("runtime_known_hosts", u.parse_path, None,
       "The known_hosts file holding the host key of an ssh:// runtime URL's host (default: "
       "~/.ssh/known_hosts); an unknown or changed key is refused."),
    _s("channel", u.choice("auto", "socket", "stdio"), "auto",
       "How podman sandboxes talk to the bridge: a unix socket in a bind-mounted directory, or "
       "the container's attached stdio; auto = socket on this machine, stdio over ssh."),
    _s("image", str, DEFAULT_IMAGE, "Sandbox container image."),
    _s("image_pull", u.choice("auto", "never"), "auto",
       "When the image is missing and is one of this release's published images: auto pulls it "
       "by digest and verifies its signature first; never leaves it to a local build "
       "(air-gapped)."),
    _s("image_release", u.parse_path, None,
       "The release record naming the published images (reference, digest, signing key); "
       "default: the one installed with the server."),
    _s("output_mode", u.choice("compact", "toon"), "compact",
       "How run_python results are rendered: compact text, or TOON when it is smaller."),
    _s("timeout", u.parse_duration, "120s",
       "Default execution timeout of one run_python call (30, 30s, 2m)."),
    _s("max_timeout", u.parse_duration, "15m",
       "Largest timeout a run_python call may ask for."),
    _s("memory_limit", u.parse_size, "512m", "Memory limit of each sandbox (512m, 2g)."),
    _s("session_persist", u.parse_bool, "true",
       "Keep variables between calls; false gives every call a fresh sandbox."),
    _s("cpu_quota", u.parse_optional_int, None,
       "CPU quota in microseconds per 100 ms period (50000 = half a core); unset = no limit."),
    _s("pids_limit", u.parse_positive_int, "128", "Maximum processes in each sandbox."),
    _s("security_opt", u.parse_word_list, None,
       "Extra --security-opt values, whitespace-separated; added to the built-in hardening."),
    _s("tmpfs_size", u.parse_size, "64m", "Size of the writable /tmp of each sandbox."),
    _s("config", u.parse_path, None,
       "An extra MCP servers file (mcpServers JSON) proxied besides the discovered ones."),
    _s("discover", u.parse_bool, "true",
       "Read the MCP client config files (Claude, Cursor, VS Code, ...) to find servers."),
    _s("state_dir", u.parse_path, None,
       "Where sessions, caches and logs live (default $XDG_STATE_HOME/mcp-code-execution-mode)."),
    _s("pool_size", u.parse_non_negative_int, "1",
       "Sandboxes started ahead of demand so the first call is fast; 0 disables."),
    _s("pool_imports", u.parse_module_list, None,
       "Top-level modules every warm-pool sandbox imports as it starts (numpy,pandas): a data "
       "session's first import, or restore, finds them loaded; each costs memory in every "
       "pooled sandbox."),
    _s("max_sessions", u.parse_positive_int, "8",
       "Most session containers alive at once; past it the least recently used idle session "
       "hibernates (its state is saved and comes back on its next call)."),
    _s("max_sessions_per_client", u.parse_positive_int, "4",
       "Most live session containers one HTTP client may hold (a token's holder, or an "
       "unauthenticated MCP session); stdio has a single client."),
    _s("session_ttl", u.parse_duration, "30m",
       "Idle time after which a session's sandbox is stopped (the session hibernates)."),
    _s("sandbox_start_timeout", u.parse_duration, "60s",
       "Time a sandbox gets to start when a call needs one; not counted in the call's timeout."),
    _s("session_store", u.parse_store_name, "default",
       "Name of this bridge's store of saved sessions in the state dir; one bridge at a time "
       "uses a store, so give each bridge sharing a state dir its own."),
    _s("session_state_max", u.parse_size, "512m",
       "Largest saved state of one session; a larger one is not saved (the last good one is "
       "kept)."),
    _s("session_state_disk", u.parse_size, "4g",
       "Most disk all saved sessions of the store may use; past it a new state is not saved."),
    _s("session_state_disk_per_client", u.parse_size, "1g",
       "Most of that disk the saved sessions of one HTTP client may use, so one client cannot "
       "leave the others unsaved; a stdio bridge's single client has the whole store."),
    _s("session_state_retention", u.parse_duration, "7d",
       "Saved session states unused for this long are deleted."),
    _s("output_cap", u.parse_size, "64k",
       "Characters of stdout+stderr returned per call; past it, head and tail are kept."),
    _s("call_timeout", u.parse_duration, "60s",
       "Timeout of one proxied tool call made by sandbox code."),
    _s("max_calls_in_flight", u.parse_positive_int, "256",
       "Most tool calls one sandbox may have in flight at once; past it a call fails at once."),
    _s("max_call_bytes", u.parse_size, "32m",
       "Most bytes of arguments and results those calls may hold on the host at once."),
    _s("server_start_timeout", u.parse_duration, "30s",
       "Time a proxied MCP server gets to start and list its tools (npx cold starts are slow)."),
    _s("max_upstream_message", u.parse_size, "32m",
       "Longest JSON-RPC message (one line) read from a stdio MCP server; past it the "
       "connection is cut and the server stopped."),
    _s("max_server_tools", u.parse_positive_int, "2000",
       "Most tools one MCP server may list; a server listing more is refused."),
    _s("max_tool_list_size", u.parse_size, "8m",
       "Largest tool list of one MCP server (JSON, all pages); a larger one is refused."),
    _s("http_token_file", u.parse_path, None,
       "Bearer tokens serve --http accepts (lines NAME sha256:HEX; add one with the token "
       "command); required to listen beyond loopback."),
    _s("http_allowed_hosts", u.parse_name_list, None,
       "Host names (or host:port) clients use to reach serve --http besides loopback; other "
       "Host headers are refused (DNS-rebinding protection)."),
    _s("http_connections_per_client", u.parse_positive_int, "16",
       "MCP sessions one HTTP client may keep open (per token; unauthenticated clients count "
       "together); past it the oldest idle one without a sandbox is ended."),
    _s("http_anonymous_ttl", u.parse_duration, "60s",
       "Idle time after which an unauthenticated HTTP client's MCP session that holds no "
       "sandbox ends."),
    _s("log_level", u.choice("debug", "info", "warning", "error"), "warning",
       "Log level (logs go to stderr, never stdout, and to the log file)."),
    _s("log_file", u.parse_path_or_off, None,
       "Log file, rotated at 1 MiB with 3 old files kept (default $STATE_DIR/logs/bridge.log); "
       "off disables it."),
    _s("audit_log", u.parse_path, None,
       "Append one JSON line per proxied tool call (server, tool, session, outcome) here."),
    _s("allow_servers", u.parse_name_list, None,
       "Only these servers are reachable (comma-separated names or globs)."),
    _s("deny_servers", u.parse_name_list, None, "These servers are never reachable."),
    _s("allow_tools", u.parse_name_list, None,
       "Only these tools are callable (server.tool, globs allowed)."),
    _s("deny_tools", u.parse_name_list, None, "These tools are never callable (server.tool)."),
    _s("approval", u.choice("off", "destructive", "writes", "all"), "destructive",
       "Which nested tool calls need the user's approval (asked through the client): "
       "destructive (annotated destructiveHint), writes (not annotated readOnlyHint), all, off."),
    _s("approve_tools", u.parse_name_list, None,
       "Tools (server.tool, globs allowed) whose calls always need the user's approval."),
    _s("approval_timeout", u.parse_duration, "120s",
       "Time the user has to answer an approval question; no answer declines the call."),
    _s("approval_fallback", u.choice("refuse", "allow"), "refuse",
       "What a call that needs approval gets when the client cannot ask (no elicitation): "
       "refuse, or allow without asking."),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Settings:
    """All settings, parsed. Field names are the ``name`` column of :data:`SETTINGS`."""

    runtime: str = "auto"
    runtime_url: str | None = None
    runtime_identity: Path | None = None
    runtime_known_hosts: Path | None = None
    channel: str = "auto"
    image: str = DEFAULT_IMAGE
    image_pull: str = "auto"
    image_release: Path | None = None
    output_mode: str = "compact"
    timeout: float = 120.0
    max_timeout: float = 900.0
    memory_limit: int = 512 * 1024 * 1024
    session_persist: bool = True
    cpu_quota: int | None = None
    pids_limit: int = 128
    security_opt: tuple[str, ...] = ()
    tmpfs_size: int = 64 * 1024 * 1024
    config: Path | None = None
    discover: bool = True
    state_dir: Path | None = None
    pool_size: int = 1
    pool_imports: tuple[str, ...] = ()
    max_sessions: int = 8
    max_sessions_per_client: int = 4
    session_ttl: float = 1800.0
    sandbox_start_timeout: float = 60.0
    session_store: str = "default"
    session_state_max: int = 512 * 1024 * 1024
    session_state_disk: int = 4 * 1024 * 1024 * 1024
    session_state_disk_per_client: int = 1024 * 1024 * 1024
    session_state_retention: float = 7 * 86400.0
    output_cap: int = 64 * 1024
    call_timeout: float = 60.0
    max_calls_in_flight: int = 256
    max_call_bytes: int = 32 * 1024 * 1024
    server_start_timeout: float = 30.0
    max_upstream_message: int = 32 * 1024 * 1024
    max_server_tools: int = 2000
    max_tool_list_size: int = 8 * 1024 * 1024
    http_token_file: Path | None = None
    http_allowed_hosts: tuple[str, ...] = ()
    http_connections_per_client: int = 16
    http_anonymous_ttl: float = 60.0
    log_level: str = "warning"
    log_file: Path | Literal[False] | None = None
    """None: the default place in the state dir; False: no log file."""
    audit_log: Path | None = None
    allow_servers: tuple[str, ...] = ()
    deny_servers: tuple[str, ...] = ()
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    approval: str = "destructive"
    approve_tools: tuple[str, ...] = ()
    approval_timeout: float = 120.0
    approval_fallback: str = "refuse"

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
    """Parse settings from CLI ``flags`` (by setting name; None = not given) over ``environ``.

    Raises :class:`SettingsError` with one line naming the variable or flag at fault.
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
    settings = Settings(**{k: v for k, v in values.items() if v is not None})
    if settings.timeout > settings.max_timeout:
        raise SettingsError(
            f"MCP_BRIDGE_TIMEOUT ({settings.timeout:g}s) is above MCP_BRIDGE_MAX_TIMEOUT "
            f"({settings.max_timeout:g}s): raise the maximum or lower the timeout",
            names=("MCP_BRIDGE_TIMEOUT", "MCP_BRIDGE_MAX_TIMEOUT"),
        )
    return settings


def _check_table_matches_dataclass() -> None:
    # The table and the dataclass must describe the same settings with the same defaults;
    # checked at import so a mismatch can never ship.
    names = [f.name for f in fields(Settings)]
    if names != [s.name for s in SETTINGS]:
        raise AssertionError("settings table and Settings fields differ")
    defaults = Settings()
    for setting in SETTINGS:
        if setting.default is not None:
            parsed = setting.parse(setting.default)
            if parsed != getattr(defaults, setting.name):
                raise AssertionError(f"default of {setting.name} differs")


_check_table_matches_dataclass()
