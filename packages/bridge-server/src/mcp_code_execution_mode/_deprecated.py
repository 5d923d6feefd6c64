"""The variables (and flags) that are no longer settings, and where each went: :data:`MOVED`.

They keep working for this release only. A variable whose setting moved to the settings file is
still applied when the file does not set that key; a variable for a bound that is now a fixed
constant is ignored (honouring it would let a user loosen what no user should). A variable that
was never a setting but that users set (:data:`NEVER_READ`) is ignored too. Either way
:func:`apply_deprecated` returns one :class:`Deprecation` per variable used, which the server
logs once at start and ``doctor`` prints. ``docs/configuration.md`` lists the same tables; a
test holds them together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_code_execution_mode._settings_error import SettingsError
from mcp_code_execution_mode._settings_file import FILE_KEYS, FileKey

__all__ = ["MOVED", "NEVER_READ", "Deprecation", "apply_deprecated"]

REMOVED_IN = "0.3.0"
"""The release that no longer reads the old names."""

MOVED: dict[str, str] = {
    "MCP_BRIDGE_RUNTIME_IDENTITY": "[engine] identity",
    "MCP_BRIDGE_RUNTIME_KNOWN_HOSTS": "[engine] known_hosts",
    "MCP_BRIDGE_CHANNEL": "[engine] channel",
    "MCP_BRIDGE_IMAGE_RELEASE": "[image] release",
    "MCP_BRIDGE_TMPFS_SIZE": "[sandbox] tmpfs_size",
    "MCP_BRIDGE_POOL_SIZE": "[sandbox] pool_size",
    "MCP_BRIDGE_POOL_IMPORTS": "[sandbox] pool_imports",
    "MCP_BRIDGE_SANDBOX_START_TIMEOUT": "[sandbox] start_timeout",
    "MCP_BRIDGE_MAX_SESSIONS": "[sessions] max",
    "MCP_BRIDGE_MAX_SESSIONS_PER_CLIENT": "[sessions] max_per_client",
    "MCP_BRIDGE_SESSION_TTL": "[sessions] idle_ttl",
    "MCP_BRIDGE_SESSION_STORE": "[sessions] store",
    "MCP_BRIDGE_SESSION_STATE_MAX": "[sessions] state_max",
    "MCP_BRIDGE_SESSION_STATE_DISK": "[sessions] state_disk",
    "MCP_BRIDGE_SESSION_STATE_DISK_PER_CLIENT": "[sessions] state_disk_per_client",
    "MCP_BRIDGE_SESSION_STATE_RETENTION": "[sessions] state_retention",
    "MCP_BRIDGE_CALL_TIMEOUT": "[servers] call_timeout",
    "MCP_BRIDGE_SERVER_START_TIMEOUT": "[servers] start_timeout",
    "MCP_BRIDGE_MAX_SERVER_TOOLS": "[servers] max_tools",
    "MCP_BRIDGE_MAX_TOOL_LIST_SIZE": "[servers] max_tool_list_size",
    "MCP_BRIDGE_HTTP_CONNECTIONS_PER_CLIENT": "[http] connections_per_client",
    "MCP_BRIDGE_HTTP_ANONYMOUS_TTL": "[http] anonymous_ttl",
    "MCP_BRIDGE_AUDIT_LOG": "[audit] log",
    "MCP_BRIDGE_ALLOW_SERVERS": "[policy] allow_servers",
    "MCP_BRIDGE_DENY_SERVERS": "[policy] deny_servers",
    "MCP_BRIDGE_ALLOW_TOOLS": "[policy] allow_tools",
    "MCP_BRIDGE_DENY_TOOLS": "[policy] deny_tools",
    "MCP_BRIDGE_APPROVAL": "[approval] mode",
    "MCP_BRIDGE_APPROVE_TOOLS": "[approval] tools",
    "MCP_BRIDGE_APPROVAL_TIMEOUT": "[approval] timeout",
    "MCP_BRIDGE_APPROVAL_FALLBACK": "[approval] fallback",
    # Bounds that protect the host from a sandbox or an upstream server: constants now.
    "MCP_BRIDGE_MAX_UPSTREAM_MESSAGE": "constant bridge_core.proxy.options.MAX_UPSTREAM_MESSAGE",
    "MCP_BRIDGE_MAX_CALLS_IN_FLIGHT": "constant bridge_core.sessions._budget.MAX_CALLS_IN_FLIGHT",
    "MCP_BRIDGE_MAX_CALL_BYTES": "constant bridge_core.sessions._budget.MAX_CALL_BYTES",
}
"""Each old variable → its new home: a settings-file key (``[section] key``) or a constant."""

NEVER_READ: dict[str, str] = {
    # Issue 36 named it; decision 0100 chose the file key and serve's --tools instead (the
    # variables are at their limit, and the mode is chosen per client). No hidden flag as for
    # MOVED: `--tools` is serve's own.
    "MCP_BRIDGE_TOOLS": "[tools] mode",
}
"""Variables that were never settings but that users set (an issue named them) → the setting
they meant. Each one set is reported as an old variable is, and ignored: applying it would make
a variable of what was decided against."""

_TOOLS_MODES = ("code", "direct", "both")

_FILE_KEYS: dict[str, FileKey] = {key.name: key for key in FILE_KEYS}


def old_flag(variable: str) -> str:
    """The command-line flag that went with an old variable (``--pool-size``)."""
    return "--" + variable.removeprefix("MCP_BRIDGE_").lower().replace("_", "-")


def old_name(variable: str) -> str:
    """The argparse destination of an old flag (``pool_size``)."""
    return variable.removeprefix("MCP_BRIDGE_").lower()


@dataclass(frozen=True, slots=True)
class Deprecation:
    """One old variable or flag in use, and where its setting lives now."""

    old: str
    """The variable or flag as the user wrote it."""
    home: str
    """Its row of :data:`MOVED`."""
    settings_file: Path
    applied: bool
    """Whether its value is used (False: a constant now, the file sets the key, or it was never
    read)."""
    value: str = ""
    """The value given, for a variable never read (its fix names the value to write instead)."""

    @property
    def line(self) -> str:
        """One line for the log and for ``doctor``."""
        if self.old in NEVER_READ:
            return (
                f"{self.old} is not a setting and is ignored: the tools mode is {self.home} in "
                "the settings file, or serve's --tools flag (docs/direct-tools.md)"
            )
        if self.home.startswith("constant "):
            return (
                f"{self.old} is no longer a setting and is ignored: the bound is the fixed "
                f"{self.home} (removed as a name in {REMOVED_IN})"
            )
        status = "used for now" if self.applied else f"ignored: {self.settings_file} sets it"
        return f"{self.old} is deprecated ({status}; removed in {REMOVED_IN})"

    @property
    def fix(self) -> str:
        """Where the setting goes instead."""
        if self.old in NEVER_READ:
            mode = self.value if self.value in _TOOLS_MODES else "direct"
            return (
                f'remove {self.old} and write `mode = "{mode}"` under [tools] in '
                f"{self.settings_file}, or start the bridge with `serve --tools {mode}`"
            )
        if self.home.startswith("constant "):
            return f"remove {self.old}"
        section, key = self.home.removeprefix("[").split("] ")
        return (
            f"remove {self.old} and write `{key} = ...` under [{section}] in {self.settings_file}"
        )


def apply_deprecated(
    flags: Mapping[str, str | None],
    environ: Mapping[str, str],
    from_file: Mapping[str, Any],
    settings_file: Path,
) -> tuple[dict[str, Any], tuple[Deprecation, ...]]:
    """The values old variables and flags (flags win) still give, by :class:`Settings` field,
    for the keys ``from_file`` does not set; and one :class:`Deprecation` per name used.

    Raises :class:`SettingsError` naming the variable or flag for a bad value, as before.
    """
    values: dict[str, Any] = {}
    used: list[Deprecation] = []
    for variable, home in MOVED.items():
        source, raw = old_flag(variable), flags.get(old_name(variable))
        if raw is None:
            source, raw = variable, environ.get(variable)
        if raw is None or not raw.strip():
            continue
        spec = _FILE_KEYS.get(home)
        applied = spec is not None and spec.field not in from_file
        used.append(Deprecation(source, home, settings_file, applied))
        if spec is None or not applied:
            continue
        try:
            values[spec.field] = spec.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{source}={raw!r}: {exc}", names=(source,)) from None
    for variable, home in NEVER_READ.items():
        raw = environ.get(variable)
        if raw is not None and raw.strip():
            used.append(Deprecation(variable, home, settings_file, False, raw.strip().lower()))
    return values, tuple(used)
