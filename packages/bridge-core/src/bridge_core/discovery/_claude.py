"""Claude Desktop, Claude Code (``~/.claude.json`` user and project scopes) and ``.mcp.json``."""

from __future__ import annotations

from pathlib import Path

from bridge_core.discovery._files import entries_of, load_json, table_at
from bridge_core.discovery._model import RawEntry, Source, Where

__all__ = ["desktop_sources", "project_sources", "user_sources"]


def _desktop_path(where: Where) -> Path:
    if where.platform == "darwin":
        return where.home / "Library" / "Application Support" / "Claude"
    if where.platform.startswith("win"):
        appdata = where.environ.get("APPDATA")
        return (
            Path(appdata) / "Claude" if appdata else where.home / "AppData" / "Roaming" / "Claude"
        )
    config = where.environ.get("XDG_CONFIG_HOME") or str(where.home / ".config")
    return Path(config) / "Claude"


def _mcp_servers(path: Path) -> list[RawEntry]:
    table = table_at(load_json(path), "mcpServers")
    return [] if table is None else entries_of(table, "mcpServers")


def desktop_sources(where: Where) -> list[Source]:
    """Claude Desktop's ``claude_desktop_config.json`` (macOS, Linux or Windows location)."""
    path = _desktop_path(where) / "claude_desktop_config.json"
    return [Source("Claude Desktop", path, _mcp_servers, app="claude-desktop")]


def _claude_json(where: Where) -> Path:
    config_dir = where.environ.get("CLAUDE_CONFIG_DIR")
    return Path(config_dir) / ".claude.json" if config_dir else where.home / ".claude.json"


def project_sources(where: Where) -> list[Source]:
    """Claude Code's local scope (``projects[<cwd>]`` of ``~/.claude.json``) and ``.mcp.json``."""
    keys = dict.fromkeys([str(where.cwd), str(where.cwd.resolve())])

    def read_local(path: Path) -> list[RawEntry]:
        projects = table_at(load_json(path), "projects")
        for key in keys:
            if projects is not None and key in projects:
                table = table_at(projects, key, "mcpServers")
                if table is not None:
                    return entries_of(table, f"projects[{key!r}].mcpServers")
        return []

    return [
        Source(
            "Claude Code (local)",
            _claude_json(where),
            read_local,
            section="project",
            app="claude-code",
            scope="project",
        ),
        Source(
            "Claude Code (project)",
            where.cwd / ".mcp.json",
            _mcp_servers,
            app="claude-code",
            scope="project",
        ),
    ]


def user_sources(where: Where) -> list[Source]:
    """Claude Code's user scope: top-level ``mcpServers`` of ``~/.claude.json``."""
    path = _claude_json(where)
    return [Source("Claude Code (user)", path, _mcp_servers, section="user", app="claude-code")]
