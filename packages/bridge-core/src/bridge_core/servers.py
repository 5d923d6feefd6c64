"""A proxied MCP server's definition, as discovery produces it and the proxy consumes it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ServerSpec"]


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One upstream MCP server. ``env``/``headers`` are already ``${VAR}``-expanded host values:
    they go to that server's process (or HTTP requests) only, never to a sandbox."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    source: str = ""
    """Where it was found, e.g. ``~/.cursor/mcp.json#mcpServers.github`` (for ``doctor``)."""

    def cache_key(self) -> str:
        """A digest of everything that changes what the server offers (for the tool-list cache)."""
        payload = json.dumps(
            {
                "transport": self.transport,
                "command": self.command,
                "args": list(self.args),
                "env": dict(sorted(self.env.items())),
                "cwd": self.cwd,
                "url": self.url,
                "headers": dict(sorted(self.headers.items())),
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:32]
