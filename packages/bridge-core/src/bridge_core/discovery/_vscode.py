"""VS Code: ``.vscode/mcp.json`` and the user profile's ``mcp.json`` (key ``servers``, JSONC)."""

from __future__ import annotations

from pathlib import Path

from bridge_core.discovery._files import entries_of, load_json, table_at
from bridge_core.discovery._model import RawEntry, Source, Where

__all__ = ["KNOWN_FIELDS", "project_sources", "user_sources"]

# ``envFile`` and ``dev`` (watch/debug options) change nothing for a proxy; ``inputs`` live beside
# ``servers``, not inside entries; an entry using ``${input:...}`` is skipped (no prompt here).
KNOWN_FIELDS = frozenset({"envFile", "dev", "gallery", "version"})


def _read(path: Path) -> list[RawEntry]:
    table = table_at(load_json(path, comments=True), "servers")
    return [] if table is None else entries_of(table, "servers", known_fields=KNOWN_FIELDS)


def project_sources(where: Where) -> list[Source]:
    """The workspace's ``.vscode/mcp.json``."""
    path = where.cwd / ".vscode" / "mcp.json"
    return [Source("VS Code (workspace)", path, _read, app="vscode", scope="project")]


def user_sources(where: Where) -> list[Source]:
    """The user profile's ``mcp.json`` (macOS or Linux location)."""
    if where.platform == "darwin":
        user_dir = where.home / "Library" / "Application Support" / "Code" / "User"
    else:
        user_dir = (
            Path(where.environ.get("XDG_CONFIG_HOME") or where.home / ".config") / "Code" / "User"
        )
    return [Source("VS Code (user)", user_dir / "mcp.json", _read, app="vscode")]
