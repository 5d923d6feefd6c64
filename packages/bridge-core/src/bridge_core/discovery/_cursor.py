"""Cursor: ``~/.cursor/mcp.json`` and the project's ``.cursor/mcp.json`` (key ``mcpServers``)."""

from __future__ import annotations

from pathlib import Path

from bridge_core.discovery._files import entries_of, load_json, table_at
from bridge_core.discovery._model import RawEntry, Source, Where

__all__ = ["KNOWN_FIELDS", "project_sources", "user_sources"]

KNOWN_FIELDS = frozenset({"envFile", "autoApprove"})


def _read(path: Path) -> list[RawEntry]:
    table = table_at(load_json(path), "mcpServers")
    return [] if table is None else entries_of(table, "mcpServers", known_fields=KNOWN_FIELDS)


def project_sources(where: Where) -> list[Source]:
    """The project's ``.cursor/mcp.json``."""
    path = where.cwd / ".cursor" / "mcp.json"
    return [Source("Cursor (project)", path, _read, app="cursor", scope="project")]


def user_sources(where: Where) -> list[Source]:
    """``~/.cursor/mcp.json``."""
    return [Source("Cursor", where.home / ".cursor" / "mcp.json", _read, app="cursor")]
