"""Codex CLI: ``[mcp_servers.NAME]`` tables of ``$CODEX_HOME/config.toml`` (``~/.codex``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bridge_core.discovery._files import entries_of, load_toml, table_at
from bridge_core.discovery._model import RawEntry, Source, Where

__all__ = ["KNOWN_FIELDS", "read_codex", "user_sources"]

KNOWN_FIELDS = frozenset(
    {
        "startup_timeout_sec",
        "startup_timeout_ms",
        "tool_timeout_sec",
        "enabled_tools",
        "disabled_tools",
        "required",
    }
)


def _normalise(entry: Mapping[str, object]) -> dict[str, object]:
    """Map Codex's header and pass-through settings onto ``env``/``headers`` with ``${VAR}``."""
    fields = dict(entry)
    env_vars = fields.pop("env_vars", None)
    if isinstance(env_vars, list):
        env = fields.get("env")
        merged = dict(env) if isinstance(env, dict) else {}
        for name in env_vars:
            if isinstance(name, str):
                merged.setdefault(name, f"${{{name}}}")
        fields["env"] = merged
    headers: dict[str, object] = {}
    for key in ("http_headers", "env_http_headers"):
        table = fields.pop(key, None)
        if isinstance(table, dict):
            for header, value in table.items():
                headers[header] = f"${{{value}}}" if key == "env_http_headers" else value
    token_var = fields.pop("bearer_token_env_var", None)
    if isinstance(token_var, str):
        headers["Authorization"] = f"Bearer ${{{token_var}}}"
    if headers:
        fields["headers"] = headers
    return fields


def read_codex(path: Path) -> list[RawEntry]:
    """The ``mcp_servers`` tables of a Codex ``config.toml``."""
    table = table_at(load_toml(path), "mcp_servers")
    if table is None:
        return []
    return entries_of(table, "mcp_servers", known_fields=KNOWN_FIELDS, normalise=_normalise)


def user_sources(where: Where) -> list[Source]:
    """``$CODEX_HOME/config.toml``, by default ``~/.codex/config.toml``."""
    codex_home = where.environ.get("CODEX_HOME")
    base = Path(codex_home) if codex_home else where.home / ".codex"
    return [Source("Codex", base / "config.toml", read_codex, app="codex")]
