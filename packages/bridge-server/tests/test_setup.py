"""``setup CLIENT`` on real files in a fake home: dry run, apply, idempotence, undo, refusals."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
import tomllib
from pathlib import Path
from unittest.mock import ANY

import pytest
from bridge_core.discovery import discover, where
from mcp_code_execution_mode.setup import CLIENTS, run_setup

SECRET = "ghp_0123456789secret"

# Each client's user-wide file (relative to the fake home, Linux locations), holding two servers
# in that client's own dialect plus keys of the client's own that must survive.
FILES = {
    "claude-desktop": (
        ".config/Claude/claude_desktop_config.json",
        '{\n  "globalShortcut": "Ctrl+Space",\n  "mcpServers": {\n'
        '    "github": {"command": "npx", "args": ["-y", "server-github"],'
        f' "env": {{"GITHUB_TOKEN": "{SECRET}"}}}},\n'
        '    "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}\n'
        "  }\n}\n",
    ),
    "claude-code": (
        ".claude.json",
        json.dumps(
            {
                "numStartups": 12,
                "mcpServers": {
                    "github": {
                        "type": "stdio",
                        "command": "npx",
                        "args": ["server-github"],
                        "env": {"GITHUB_TOKEN": SECRET},
                    },
                    "time": {"type": "stdio", "command": "mcp-server-time", "args": [], "env": {}},
                },
                "projects": {"/somewhere": {"mcpServers": {}, "history": []}},
            },
            indent=2,
        ),
    ),
    "cursor": (
        ".cursor/mcp.json",
        '{\n    "mcpServers": {\n        "github": {"command": "npx", "args": ["server-github"], '
        f'"env": {{"GITHUB_TOKEN": "{SECRET}"}}}},\n'
        '        "time": {"command": "mcp-server-time"}\n    }\n}\n',
    ),
    "vscode": (
        ".config/Code/User/mcp.json",
        '{\n\t// my servers\n\t"inputs": [],\n\t"servers": {\n'
        '\t\t"github": {"type": "stdio", "command": "npx", "args": ["server-github"], '
        f'"env": {{"GITHUB_TOKEN": "{SECRET}"}}}},\n'
        '\t\t"time": {"type": "stdio", "command": "mcp-server-time"}\n\t}\n}\n',
    ),
    "windsurf": (
        ".codeium/windsurf/mcp_config.json",
        '{"mcpServers": {"github": {"command": "npx", "args": ["server-github"], '
        f'"env": {{"GITHUB_TOKEN": "{SECRET}"}}}}, '
        '"time": {"serverUrl": "https://time.example/mcp"}}}',
    ),
    "gemini": (
        ".gemini/settings.json",
        '{\n  "theme": "GitHub",\n  "mcpServers": {\n'
        '    "github": {"command": "npx", "args": ["server-github"], '
        f'"env": {{"GITHUB_TOKEN": "{SECRET}"}}, "trust": true}},\n'
        '    "time": {"httpUrl": "https://time.example/mcp"}\n  }\n}\n',
    ),
    "codex": (
        ".codex/config.toml",
        '# my Codex settings\nmodel = "o3"\n\n'
        '[mcp_servers.github]\ncommand = "npx"  # the GitHub server\nargs = ["server-github"]\n'
        f'env = {{ GITHUB_TOKEN = "{SECRET}" }}\n\n'
        '[mcp_servers.time]\ncommand = "mcp-server-time"\nenv_vars = ["TZ"]\n\n'
        '[profiles.fast]\nmodel = "o4-mini"\n',
    ),
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    return home


def machine(home: Path) -> object:
    return where(home=home, cwd=home / "project", environ={}, platform="linux")


def install(home: Path, client: str) -> Path:
    relative, text = FILES[client]
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def setup(home: Path, client: str, **kwargs: object) -> tuple[int, str]:
    out = io.StringIO()
    status = run_setup(
        client,
        where=machine(home),  # type: ignore[arg-type]
        state_dir=home / "state",
        flags=kwargs.pop("flags", {"MCP_BRIDGE_IMAGE": "localhost/some-image:1"}),  # type: ignore[arg-type]
        out=out,
        **kwargs,  # type: ignore[arg-type]
    )
    return status, out.getvalue()


def servers_file(home: Path) -> Path:
    return home / ".config" / "mcp-code-execution-mode" / "servers.json"


def client_table(client: str, path: Path) -> dict[str, object]:
    text = path.read_text()
    if client == "codex":
        return tomllib.loads(text)["mcp_servers"]
    from bridge_core.discovery import strip_jsonc

    data = json.loads(strip_jsonc(text))
    return data[CLIENTS[client].table]


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_every_client_that_discovery_knows_can_be_set_up() -> None:
    apps = {
        s.app
        for s in __import__("bridge_core.discovery").discovery.client_sources(
            machine(Path("/nonexistent"))
        )
    }
    assert apps == set(CLIENTS) == set(FILES)


@pytest.mark.parametrize("client", sorted(FILES))
def test_dry_run_shows_the_change_with_secrets_masked_and_writes_nothing(
    home: Path, client: str
) -> None:
    install(home, client)
    before = files_under(home)
    status, out = setup(home, client, dry_run=True)
    assert status == 0, out
    assert files_under(home) == before
    assert "moves 2 server(s)" in out
    assert "github, time" in out
    assert sys.executable in out
    assert SECRET not in out
    assert '"GITHUB_TOKEN": "***"' in out


@pytest.mark.parametrize("client", sorted(FILES))
def test_setup_leaves_only_the_bridge_in_the_client_and_the_bridge_still_sees_every_server(
    home: Path, client: str
) -> None:
    path = install(home, client)
    original = path.read_bytes()
    status, out = setup(home, client)
    assert status == 0, out

    table = client_table(client, path)
    assert list(table) == ["code-execution"]
    entry = table["code-execution"]
    assert isinstance(entry, dict)
    assert entry["command"] == os.path.abspath(sys.executable)
    assert Path(entry["command"]).is_absolute()
    assert entry["args"] == ["-m", "mcp_code_execution_mode"]
    assert entry["env"] == {"MCP_BRIDGE_IMAGE": "localhost/some-image:1"}

    report = discover(home=home, cwd=home / "project", environ={"TZ": "UTC"}, platform="linux")
    assert set(report.servers) == {"github", "time"}
    assert report.servers["github"].env == {"GITHUB_TOKEN": SECRET}
    assert all("mcp-code-execution-mode/servers.json" in s.source for s in report.servers.values())
    assert report.errors == []
    assert [p for p in report.problems if p.severity == "warning"] == []

    backups = list(path.parent.glob(path.name + ".mcp-bridge-backup-*"))
    assert [b.read_bytes() for b in backups] == [original]
    for private in (*backups, servers_file(home)):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600


@pytest.mark.parametrize("client", sorted(FILES))
def test_setup_twice_changes_nothing_and_undo_restores_every_byte(home: Path, client: str) -> None:
    path = install(home, client)
    original = path.read_bytes()
    assert setup(home, client)[0] == 0
    after_first = files_under(home)
    status, out = setup(home, client)
    assert status == 0
    assert "nothing to change" in out
    assert files_under(home) == after_first

    status, out = setup(home, client, undo_last=True)
    assert status == 0, out
    assert path.read_bytes() == original
    assert not servers_file(home).exists()
    assert list(path.parent.glob("*.mcp-bridge-backup-*")) == []
    assert setup(home, client, undo_last=True)[0] == 1  # nothing left to undo


def test_moved_entries_keep_their_meaning_in_the_bridge_file(home: Path) -> None:
    install(home, "gemini")
    assert setup(home, "gemini")[0] == 0
    moved = json.loads(servers_file(home).read_text())["mcpServers"]
    # Gemini's httpUrl is streamable HTTP: an explicit type keeps it so in a generic file.
    assert moved["time"] == {"url": "https://time.example/mcp", "type": "http"}
    assert moved["github"]["trust"] is True
    report = discover(home=home, cwd=home / "project", environ={}, platform="linux")
    assert report.servers["time"].transport == "http"


def test_codex_pass_through_variables_stay_references_to_the_bridge_environment(
    home: Path,
) -> None:
    install(home, "codex")
    assert setup(home, "codex")[0] == 0
    moved = json.loads(servers_file(home).read_text())["mcpServers"]
    assert moved["time"] == {"command": "mcp-server-time", "env": {"TZ": "${TZ}"}}


def test_a_name_already_in_the_servers_file_with_other_settings_is_refused(home: Path) -> None:
    install(home, "cursor")
    install(home, "claude-desktop")
    assert setup(home, "cursor")[0] == 0
    desktop = home / FILES["claude-desktop"][0]
    before = files_under(home)
    status, out = setup(home, "claude-desktop")
    assert status == 1
    assert "'github', 'time' already in ~/.config/mcp-code-execution-mode/servers.json" in out
    assert "--keep github time" in out
    assert files_under(home) == before
    status, out = setup(home, "claude-desktop", keep=["github", "time"])
    assert status == 0, out
    assert set(client_table("claude-desktop", desktop)) == {"github", "time", "code-execution"}


def test_keep_leaves_named_servers_and_refuses_unknown_names(home: Path) -> None:
    path = install(home, "cursor")
    status, out = setup(home, "cursor", keep=["tme"])
    assert status == 1
    assert "--keep tme: no such server in ~/.cursor/mcp.json (its servers: github, time)" in out
    assert setup(home, "cursor", keep=["time"])[0] == 0
    assert list(client_table("cursor", path)) == ["time", "code-execution"]


def test_an_existing_bridge_entry_is_updated_in_place_under_its_own_name(home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    old = {"command": "/old/venv/bin/python", "args": ["-m", "mcp_code_execution_mode"],
           "env": {"MCP_BRIDGE_OUTPUT_MODE": "toon"}}  # fmt: skip
    path.write_text(json.dumps({"mcpServers": {"bridge": old, "t": {"command": "t"}}}))
    assert setup(home, "cursor")[0] == 0
    table = client_table("cursor", path)
    assert list(table) == ["bridge"]
    assert table["bridge"] == {
        "command": os.path.abspath(sys.executable),
        "args": ["-m", "mcp_code_execution_mode"],
        "env": {"MCP_BRIDGE_OUTPUT_MODE": "toon", "MCP_BRIDGE_IMAGE": "localhost/some-image:1"},
    }


def test_undo_keeps_what_the_client_wrote_since_and_puts_the_servers_back(home: Path) -> None:
    path = install(home, "claude-code")
    original = json.loads(path.read_text())
    assert setup(home, "claude-code")[0] == 0
    data = json.loads(path.read_text())
    data["numStartups"] = 13  # Claude Code rewrites its file all the time
    path.write_text(json.dumps(data, indent=2))
    status, out = setup(home, "claude-code", undo_last=True)
    assert status == 0, out
    restored = json.loads(path.read_text())
    assert restored["mcpServers"] == original["mcpServers"]
    assert restored["numStartups"] == 13


def test_undo_refuses_when_the_servers_changed_since_unless_forced(home: Path) -> None:
    path = install(home, "cursor")
    original = path.read_bytes()
    assert setup(home, "cursor")[0] == 0
    moved = json.loads(servers_file(home).read_text())
    moved["mcpServers"]["time"]["args"] = ["--local-timezone", "Europe/Paris"]
    servers_file(home).write_text(json.dumps(moved))
    status, out = setup(home, "cursor", undo_last=True)
    assert status == 1
    assert "time changed since setup" in out
    assert "--force" in out
    status, out = setup(home, "cursor", undo_last=True, force=True)
    assert status == 0, out
    assert path.read_bytes() == original


def test_comments_and_layout_outside_the_servers_table_are_kept(home: Path) -> None:
    vscode = install(home, "vscode")
    codex = install(home, "codex")
    assert setup(home, "vscode")[0] == 0
    # github is the same server in both (VS Code only spells out "type": "stdio"): no clash.
    assert setup(home, "codex", keep=["time"])[0] == 0
    kept = '{\n\t// my servers\n\t"inputs": [],\n\t"servers": {\n\t\t'
    assert vscode.read_text().startswith(kept)
    text = codex.read_text()
    assert text.startswith('# my Codex settings\nmodel = "o3"\n')
    assert '[profiles.fast]\nmodel = "o4-mini"' in text


def test_setup_of_a_freshly_installed_client_writes_a_servers_file_the_bridge_can_read(
    home: Path,
) -> None:
    # A new Claude Desktop: its folder, no config file, no servers to move.
    (home / ".config" / "Claude").mkdir(parents=True)
    status, out = setup(home, "claude-desktop")
    assert status == 0, out
    assert json.loads(servers_file(home).read_text()) == {"mcpServers": {}}
    report = discover(home=home, cwd=home / "project", environ={}, platform="linux")
    assert report.errors == []
    assert report.servers == {}


def test_a_client_that_is_not_installed_is_refused_with_the_reason(home: Path) -> None:
    status, out = setup(home, "windsurf")
    assert status == 1
    assert "is Windsurf installed?" in out
    assert not (home / ".codeium").exists()


def test_a_client_file_that_does_not_parse_is_refused_untouched(home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {')
    status, out = setup(home, "cursor")
    assert status == 1
    assert "~/.cursor/mcp.json: invalid JSON at line 1" in out
    assert path.read_text() == '{"mcpServers": {'


def test_project_files_are_listed_and_never_edited(home: Path) -> None:
    install(home, "cursor")
    project = home / "project" / ".cursor" / "mcp.json"
    project.parent.mkdir()
    project.write_text('{"mcpServers": {"db": {"command": "db-mcp"}}}')
    status, out = setup(home, "cursor")
    assert status == 0
    assert "left in place: ~/project/.cursor/mcp.json (project file, never edited): db" in out
    assert project.read_text() == '{"mcpServers": {"db": {"command": "db-mcp"}}}'


def test_the_servers_file_is_named_in_the_entry_when_the_bridge_may_not_find_it_alone(
    home: Path, tmp_path: Path
) -> None:
    path = install(home, "cursor")
    elsewhere = tmp_path / "mine.json"
    status, out = setup(home, "cursor", servers_file=elsewhere)
    assert status == 0, out
    entry = client_table("cursor", path)["code-execution"]
    assert isinstance(entry, dict)
    assert entry["env"]["MCP_BRIDGE_CONFIG"] == str(elsewhere)
    assert set(json.loads(elsewhere.read_text())["mcpServers"]) == {"github", "time"}


def test_in_the_home_directory_the_user_file_is_moved_and_not_called_a_project_file(
    home: Path,
) -> None:
    path = install(home, "cursor")
    out = io.StringIO()
    status = run_setup(
        "cursor",
        where=where(home=home, cwd=home, environ={}, platform="linux"),
        state_dir=home / "state",
        flags={},
        out=out,
    )
    assert status == 0, out.getvalue()
    assert "moves 2 server(s)" in out.getvalue()
    assert "left in place" not in out.getvalue()
    assert list(client_table("cursor", path)) == ["code-execution"]


def test_a_vscode_server_asking_for_an_input_stays_in_vscode_and_setup_says_why(
    home: Path,
) -> None:
    path = home / ".config/Code/User/mcp.json"
    path.parent.mkdir(parents=True)
    asks = {
        "type": "http",
        "url": "https://api.example/mcp",
        "headers": {"Authorization": "Bearer ${input:api-token}"},
    }
    servers = {"remote": asks, "time": {"type": "stdio", "command": "mcp-server-time"}}
    path.write_text(json.dumps({"inputs": [{"id": "api-token"}], "servers": servers}))
    status, out = setup(home, "vscode")
    assert status == 0, out
    assert "moves 1 server(s) to ~/.config/mcp-code-execution-mode/servers.json: time" in out
    assert "keeps in VS Code: remote (input api-token): VS Code asks the user for each" in out
    assert client_table("vscode", path) == {"remote": asks, "code-execution": ANY}
    assert set(json.loads(servers_file(home).read_text())["mcpServers"]) == {"time"}
    report = discover(home=home, cwd=home / "project", environ={}, platform="linux")
    assert set(report.servers) == {"time"}  # the bridge would send the literal text: not proxied
    [problem] = [p for p in report.problems if p.entry == "remote"]
    assert problem.severity == "info"
    assert "${input:api-token}" in problem.message


def test_the_readme_entry_is_what_setup_writes_without_flags(home: Path) -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- client-config -->\s*```json\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    shown = json.loads(block.group(1))["mcpServers"]
    path = install(home, "claude-desktop")
    assert setup(home, "claude-desktop", flags={})[0] == 0
    written = client_table("claude-desktop", path)
    # The Python differs: the README's is a placeholder for the reader's installation.
    assert shown["code-execution"].pop("command").endswith("/bin/python")
    assert isinstance(written["code-execution"], dict)
    written["code-execution"].pop("command")
    assert written == shown


@pytest.mark.parametrize("client", ["claude-code", "codex"])
@pytest.mark.parametrize("mode", ["code", "direct", "both"])
def test_tools_makes_the_entry_serve_that_mode_and_undo_restores_every_byte(
    home: Path, client: str, mode: str
) -> None:
    from mcp_code_execution_mode.cli import _normalise, build_parser

    path = install(home, client)
    original = path.read_bytes()
    before = files_under(home)
    status, out = setup(home, client, tools=mode, dry_run=True)
    assert status == 0, out
    assert f"-m mcp_code_execution_mode serve --tools {mode}" in out
    assert files_under(home) == before

    status, out = setup(home, client, tools=mode)
    assert status == 0, out
    entry = client_table(client, path)["code-execution"]
    assert isinstance(entry, dict)
    assert entry["args"] == ["-m", "mcp_code_execution_mode", "serve", "--tools", mode]
    # What the client runs is what `python -m mcp_code_execution_mode` parses as that mode.
    parsed = build_parser().parse_args(_normalise(entry["args"][2:]))
    assert (parsed.command, parsed.tools) == ("serve", mode)
    assert set(json.loads(servers_file(home).read_text())["mcpServers"]) == {"github", "time"}

    assert setup(home, client, undo_last=True)[0] == 0
    assert path.read_bytes() == original
    assert not servers_file(home).exists()
    assert list(path.parent.glob("*.mcp-bridge-backup-*")) == []


def test_setup_again_keeps_the_entry_mode_unless_tools_names_another(home: Path) -> None:
    path = install(home, "cursor")
    assert setup(home, "cursor", tools="direct")[0] == 0
    status, out = setup(home, "cursor")
    assert status == 0
    assert "nothing to change" in out
    assert "serve --tools direct" in out
    status, out = setup(home, "cursor", tools="code")
    assert status == 0, out
    entry = client_table("cursor", path)["code-execution"]
    assert isinstance(entry, dict)
    assert entry["args"] == ["-m", "mcp_code_execution_mode", "serve", "--tools", "code"]


def test_an_entry_written_by_hand_with_tools_keeps_its_mode(home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    bridge = {
        "command": "/old/bin/python",
        "args": ["-m", "mcp_code_execution_mode", "--tools=both"],
    }
    path.write_text(json.dumps({"mcpServers": {"bridge": bridge}}))
    assert setup(home, "cursor", flags={})[0] == 0
    entry = client_table("cursor", path)["bridge"]
    assert isinstance(entry, dict)
    assert entry["args"] == ["-m", "mcp_code_execution_mode", "serve", "--tools", "both"]


def test_the_setup_command_passes_tools_to_the_entry(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_code_execution_mode.cli import main

    path = install(home, "cursor")
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "MCP_BRIDGE_CONFIG", "MCP_BRIDGE_LOG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MCP_BRIDGE_STATE_DIR", str(home / "state"))
    monkeypatch.chdir(home / "project")
    assert main(["setup", "cursor", "--tools", "direct"]) == 0, capsys.readouterr().out
    assert "each proxied tool as server__tool" in capsys.readouterr().out
    entry = client_table("cursor", path)["code-execution"]
    assert isinstance(entry, dict)
    assert entry["args"][-3:] == ["serve", "--tools", "direct"]
