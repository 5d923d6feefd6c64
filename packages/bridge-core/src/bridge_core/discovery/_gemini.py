"""Gemini CLI: ``settings.json`` in ``~/.gemini`` and the project's ``.gemini`` (``mcpServers``).

Gemini spells streamable HTTP ``httpUrl`` and SSE ``url``; both are mapped to ``type`` + ``url``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bridge_core.discovery._files import entries_of, load_json, table_at
from bridge_core.discovery._model import RawEntry, Source, Where

__all__ = ["KNOWN_FIELDS", "project_sources", "user_sources"]

KNOWN_FIELDS = frozenset(
    {
        "trust",
        "includeTools",
        "excludeTools",
        "oauth",
        "authProviderType",
        "targetAudience",
        "targetServiceAccount",
        "extensionName",
    }
)


def _normalise(entry: Mapping[str, object]) -> dict[str, object]:
    fields = dict(entry)
    if "type" in fields or "command" in fields:
        return fields
    if "httpUrl" in fields:
        fields["url"] = fields.pop("httpUrl")
        fields["type"] = "http"
    elif "url" in fields:
        fields["type"] = "sse"
    return fields


def _read(path: Path) -> list[RawEntry]:
    table = table_at(load_json(path, comments=True), "mcpServers")
    if table is None:
        return []
    return entries_of(table, "mcpServers", known_fields=KNOWN_FIELDS, normalise=_normalise)


def project_sources(where: Where) -> list[Source]:
    """The project's ``.gemini/settings.json``."""
    path = where.cwd / ".gemini" / "settings.json"
    return [Source("Gemini CLI (project)", path, _read, app="gemini", scope="project")]


def user_sources(where: Where) -> list[Source]:
    """``~/.gemini/settings.json``."""
    return [Source("Gemini CLI", where.home / ".gemini" / "settings.json", _read, app="gemini")]
