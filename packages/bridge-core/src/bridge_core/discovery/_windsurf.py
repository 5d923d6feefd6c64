"""Windsurf: ``~/.codeium/windsurf/mcp_config.json`` (key ``mcpServers``; HTTP as ``serverUrl``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bridge_core.discovery._files import entries_of, load_json, table_at
from bridge_core.discovery._model import RawEntry, Source, Where

__all__ = ["KNOWN_FIELDS", "user_sources"]

KNOWN_FIELDS = frozenset({"disabledTools"})


def _normalise(entry: Mapping[str, object]) -> dict[str, object]:
    fields = dict(entry)
    if "serverUrl" in fields and "url" not in fields:
        fields["url"] = fields.pop("serverUrl")
    return fields


def _read(path: Path) -> list[RawEntry]:
    table = table_at(load_json(path), "mcpServers")
    if table is None:
        return []
    return entries_of(table, "mcpServers", known_fields=KNOWN_FIELDS, normalise=_normalise)


def user_sources(where: Where) -> list[Source]:
    """``~/.codeium/windsurf/mcp_config.json``."""
    path = where.home / ".codeium" / "windsurf" / "mcp_config.json"
    return [Source("Windsurf", path, _read, app="windsurf")]
