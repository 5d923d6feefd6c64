"""The clients ``setup`` knows: where each keeps its servers, and the shape of its entries.

File locations come from discovery (one place for them): ``setup`` edits the client's user-wide
file; project files are listed, never edited (they are often shared through version control).
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge_core.discovery import Source, Where, client_sources

__all__ = ["CLIENTS", "Client"]


@dataclass(frozen=True, slots=True)
class Client:
    """One MCP client application."""

    key: str
    """What the user types: ``setup claude-desktop``; also :attr:`Source.app` in discovery."""
    name: str
    table: str
    """The key of the servers table in its file."""
    toml: bool = False
    typed: bool = False
    """Its own tools write ``"type": "stdio"`` into stdio entries."""

    def user_source(self, where: Where) -> Source:
        """The user-wide file ``setup`` edits."""
        [source] = [s for s in client_sources(where) if s.app == self.key and s.scope == "user"]
        return source

    def project_sources(self, where: Where) -> list[Source]:
        """The current project's files of this client (listed, never edited)."""
        return [s for s in client_sources(where) if s.app == self.key and s.scope == "project"]


CLIENTS: dict[str, Client] = {
    c.key: c
    for c in (
        Client("claude-desktop", "Claude Desktop", "mcpServers"),
        Client("claude-code", "Claude Code", "mcpServers", typed=True),
        Client("cursor", "Cursor", "mcpServers"),
        Client("vscode", "VS Code", "servers", typed=True),
        Client("windsurf", "Windsurf", "mcpServers"),
        Client("gemini", "Gemini CLI", "mcpServers"),
        Client("codex", "Codex", "mcp_servers", toml=True),
    )
}
