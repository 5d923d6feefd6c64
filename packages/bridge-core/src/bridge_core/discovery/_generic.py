"""Files only the bridge reads: the explicit config file, the bridge's own servers file
(``~/.config/mcp-code-execution-mode/servers.json``, where ``setup`` moves servers) and the
client-neutral ``~/.config/mcp/servers/*.json``.

All accept any of the JSON shapes the clients use (``mcpServers``, VS Code's ``servers``, or a
single server object named after the file) and, for the explicit file, Codex TOML.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bridge_core.discovery import _codex, _cursor, _gemini, _vscode, _windsurf
from bridge_core.discovery._codex import read_codex
from bridge_core.discovery._files import entries_of, load_json, table_at
from bridge_core.discovery._model import RawEntry, Source, SourceUnreadable, Where

__all__ = [
    "BRIDGE_CONFIG_DIR_NAME",
    "bridge_file_source",
    "bridge_servers_file",
    "config_dir_sources",
    "explicit_source",
    "read_any",
]

BRIDGE_CONFIG_DIR_NAME = "mcp-code-execution-mode"
"""The bridge's folder under ``$XDG_CONFIG_HOME`` (holds ``servers.json``)."""

# A file copied (or moved by ``setup``) from any client must not produce warnings for that
# client's own fields.
_KNOWN = (
    frozenset({"alwaysAllow"})
    | _codex.KNOWN_FIELDS
    | _cursor.KNOWN_FIELDS
    | _gemini.KNOWN_FIELDS
    | _vscode.KNOWN_FIELDS
    | _windsurf.KNOWN_FIELDS
)


def _normalise(entry: Mapping[str, object]) -> dict[str, object]:
    fields = dict(entry)
    for alias in ("serverUrl", "httpUrl"):  # Windsurf and Gemini spellings of a streamable URL
        if alias in fields and "url" not in fields:
            fields["url"] = fields.pop(alias)
    return fields


def read_any(path: Path) -> list[RawEntry]:
    """Read a file in any supported shape (TOML by suffix, else JSON/JSONC)."""
    if path.suffix == ".toml":
        return read_codex(path)
    data = load_json(path, comments=True)
    for key in ("mcpServers", "servers", "mcp_servers"):
        table = table_at(data, key)
        if table is not None:
            return entries_of(table, key, known_fields=_KNOWN, normalise=_normalise)
    if isinstance(data, dict) and ("command" in data or "url" in data):
        return [RawEntry(path.stem, _normalise(data), path.stem, _KNOWN)]
    raise SourceUnreadable("no mcpServers, servers or mcp_servers table, and not a server object")


def explicit_source(path: Path) -> Source:
    """The file given by setting or flag; it comes first in precedence."""
    return Source("explicit config", path, read_any)


def _config_home(where: Where) -> Path:
    return Path(where.environ.get("XDG_CONFIG_HOME") or where.home / ".config")


def bridge_servers_file(where: Where) -> Path:
    """``$XDG_CONFIG_HOME/mcp-code-execution-mode/servers.json`` (default ``~/.config``)."""
    return _config_home(where) / BRIDGE_CONFIG_DIR_NAME / "servers.json"


def bridge_file_source(where: Where) -> Source:
    """The bridge's own servers file: what ``setup`` moved out of the clients' files."""
    return Source("bridge servers file", bridge_servers_file(where), read_any)


def config_dir_sources(where: Where) -> list[Source]:
    """One source per ``*.json`` in ``$XDG_CONFIG_HOME/mcp/servers`` (sorted by name)."""
    directory = _config_home(where) / "mcp" / "servers"
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not files:
        # Listed anyway so that `doctor` shows the place was looked at.
        return [Source("MCP servers directory", directory / "*.json", read_any)]
    return [Source("MCP servers directory", file, read_any) for file in files]
