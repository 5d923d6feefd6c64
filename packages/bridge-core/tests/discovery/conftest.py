"""A fake home and project directory holding one real-shaped config file per client."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# Where each client keeps its file, relative to the fake home ("~") or project ("."), on Linux.
LOCATIONS = {
    "claude_desktop_config.json": "~/.config/Claude/claude_desktop_config.json",
    "claude.json": "~/.claude.json",
    "mcp.json": "./.mcp.json",
    "cursor_mcp.json": "~/.cursor/mcp.json",
    "vscode_mcp.json": "./.vscode/mcp.json",
    "windsurf_mcp_config.json": "~/.codeium/windsurf/mcp_config.json",
    "gemini_settings.json": "~/.gemini/settings.json",
    "codex_config.toml": "~/.codex/config.toml",
    "config_dir/everything.json": "~/.config/mcp/servers/everything.json",
    "config_dir/bundle.json": "~/.config/mcp/servers/bundle.json",
}


@dataclass
class Machine:
    home: Path
    cwd: Path

    def path(self, location: str) -> Path:
        base = self.home if location.startswith("~") else self.cwd
        return base / location[2:]

    def write(self, location: str, text: str) -> Path:
        target = self.path(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def install(self, *fixtures: str) -> None:
        for name in fixtures or tuple(LOCATIONS):
            text = (FIXTURES / name).read_text(encoding="utf-8")
            self.write(LOCATIONS[name], text.replace("__CWD__", str(self.cwd)))


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    home, cwd = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    cwd.mkdir()
    return Machine(home, cwd)
