"""``setup``'s writes: ``--dry-run`` writes nothing whatever comes with it, every file written is
private, a forced undo keeps what it discards, and what it prints is masked."""

from __future__ import annotations

import ast
import io
import json
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from bridge_core.discovery import where
from mcp_code_execution_mode import setup as setup_package
from mcp_code_execution_mode.setup import run_setup

TOKEN = "ghp_0123456789secret"
ARG_KEY = "sk-live-4f9a8b7c6d5e"
URL_KEY = "c2VjcmV0LXRva2VuLTEyMw"
URL_PASSWORD = "hunter2hunter2"
CURSOR = {
    "mcpServers": {
        "github": {"command": "npx", "args": ["server-github"], "env": {"GITHUB_TOKEN": TOKEN}},
        "search": {"command": "search-mcp", "args": ["--api-key", ARG_KEY, "--verbose"]},
        "remote": {"url": f"https://me:{URL_PASSWORD}@mcp.example.com/mcp?key={URL_KEY}"},
        "time": {"command": "mcp-server-time"},
    }
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    client = home / ".cursor" / "mcp.json"
    client.parent.mkdir()
    client.write_text(json.dumps(CURSOR, indent=2))
    client.chmod(0o644)
    return home


def servers_file(home: Path) -> Path:
    return home / ".config" / "mcp-code-execution-mode" / "servers.json"


def setup(home: Path, **kwargs: object) -> tuple[int, str]:
    out = io.StringIO()
    status = run_setup(
        "cursor",
        where=where(home=home, cwd=home / "project", environ={}, platform="linux"),
        state_dir=home / "state",
        flags={},
        out=out,
        **kwargs,  # type: ignore[arg-type]
    )
    return status, out.getvalue()


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every path under ``root``: mode, modification time, content."""
    return {
        str(p.relative_to(root)): (
            p.lstat().st_mode,
            p.lstat().st_mtime_ns,
            p.read_bytes() if p.is_file() else None,
        )
        for p in root.rglob("*")
    }


def hand_edit_servers_file(home: Path) -> None:
    data = json.loads(servers_file(home).read_text())
    data["mcpServers"]["time"]["args"] = ["--local-timezone", "Europe/Paris"]
    servers_file(home).write_text(json.dumps(data))


def set_up(home: Path) -> None:
    assert setup(home)[0] == 0


def set_up_and_edit(home: Path) -> None:
    set_up(home)
    hand_edit_servers_file(home)


STATES: dict[str, Callable[[Path], None]] = {
    "never set up": lambda home: None,
    "set up": set_up,
    "set up, servers file edited by hand": set_up_and_edit,
}
VERBS: dict[str, dict[str, object]] = {
    "apply": {},
    "apply --keep": {"keep": ["time"]},
    "apply --force": {"force": True},
    "apply --config": {"servers_file": Path("elsewhere.json")},
    "apply --tools": {"tools": "direct"},
    "undo": {"undo_last": True},
    "undo --force": {"undo_last": True, "force": True},
    "undo --force --keep": {"undo_last": True, "force": True, "keep": ["time"]},
}


@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_dry_run_writes_nothing_for_every_verb_and_flag_in_every_state(
    home: Path, state: str, verb: str
) -> None:
    STATES[state](home)
    kwargs = dict(VERBS[verb])
    if "servers_file" in kwargs:
        kwargs["servers_file"] = home / "elsewhere.json"
    before = snapshot(home)
    status, out = setup(home, dry_run=True, **kwargs)
    assert snapshot(home) == before, out
    if status == 0 and "nothing to change" not in out:
        assert out.rstrip().endswith("dry run: nothing was written")


def test_undo_dry_run_lists_what_the_undo_would_do_and_the_undo_then_does_it(home: Path) -> None:
    assert setup(home)[0] == 0
    hand_edit_servers_file(home)
    status, shown = setup(home, undo_last=True, force=True, dry_run=True)
    assert status == 0, shown
    assert "  would remove ~/.config/mcp-code-execution-mode/servers.json" in shown
    assert "  would back up" in shown
    status, done = setup(home, undo_last=True, force=True)
    assert status == 0, done

    def steps(lines: list[str]) -> list[str]:
        return [re.sub(r"undo-[\d-]+", "undo-STAMP", line.strip()) for line in lines]

    assert steps([line.removeprefix("  would ") for line in shown.splitlines()[1:-1]]) == steps(
        done.splitlines()[1:-1]
    )


def test_a_forced_undo_keeps_the_hand_edit_it_discards_in_a_backup(home: Path) -> None:
    assert setup(home)[0] == 0
    hand_edit_servers_file(home)
    edited = servers_file(home).read_bytes()
    status, out = setup(home, undo_last=True, force=True)
    assert status == 0, out
    [kept] = servers_file(home).parent.glob("servers.json.mcp-bridge-backup-undo-*")
    assert kept.read_bytes() == edited
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert kept.name in out


def test_a_hand_made_servers_file_readable_by_others_is_written_private_and_setup_says_so(
    home: Path,
) -> None:
    path = servers_file(home)
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {"notes": {"command": "notes-mcp"}}}')
    path.chmod(0o644)  # made by hand as the docs describe, under the usual umask
    status, out = setup(home)
    assert status == 0, out
    assert "servers.json can be read by other accounts (mode 644); setup writes it 0600" in out
    assert TOKEN in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    client = home / ".cursor" / "mcp.json"
    assert stat.S_IMODE(client.stat().st_mode) == 0o600
    status, out = setup(home, undo_last=True)
    assert status == 0, out
    assert stat.S_IMODE(client.stat().st_mode) == 0o600  # its credentials are back in it


def test_a_servers_file_in_a_folder_others_can_write_is_refused_with_the_reason(
    home: Path,
) -> None:
    folder = servers_file(home).parent
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    before = snapshot(home)
    status, out = setup(home)
    assert status == 1
    assert "can be written by other accounts (mode 777)" in out
    assert snapshot(home) == before


@pytest.mark.parametrize("verb", ["dry run", "apply"])
def test_what_setup_prints_masks_secrets_in_args_urls_and_env(home: Path, verb: str) -> None:
    status, out = setup(home, dry_run=verb == "dry run")
    assert status == 0, out
    for secret in (TOKEN, ARG_KEY, URL_KEY, URL_PASSWORD):
        assert secret not in out
    assert '"--api-key",' in out  # the option stays readable, its value is masked
    assert '"***"' in out
    assert "mcp.example.com" in out


_PATH_WRITES = {"write_bytes", "write_text", "unlink", "mkdir", "touch", "chmod", "rmdir",
                "rename", "symlink_to", "open"}  # fmt: skip
_WRITING_MODULES = {"shutil", "tempfile", "io"}


def test_no_setup_module_but_the_disk_can_write() -> None:
    # Structural: every write goes through _files.Disk, which run_setup builds once (a DryRun
    # for --dry-run). A write call elsewhere would bypass that decision.
    folder = Path(setup_package.__file__).parent
    checked = 0
    for module in folder.glob("*.py"):
        if module.name == "_files.py":
            continue
        checked += 1
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                assert not (isinstance(func, ast.Name) and func.id == "open"), module.name
                if isinstance(func, ast.Attribute):
                    assert func.attr not in _PATH_WRITES, (module.name, func.attr)
                    owner = func.value
                    # os.path.* reads; any other os function may write
                    assert not (isinstance(owner, ast.Name) and owner.id == "os"), module.name
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = {a.name for a in node.names} | {getattr(node, "module", None)}
                assert not names & _WRITING_MODULES, module.name
    assert checked >= 6


def test_the_setup_command_with_dry_run_creates_no_log_file_nor_state_dir(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_code_execution_mode.cli import main

    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("MCP_BRIDGE_LOG_FILE", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("MCP_BRIDGE_STATE_DIR", str(home / "state"))
    monkeypatch.chdir(home / "project")
    before = snapshot(home)
    assert main(["setup", "cursor", "--dry-run"]) == 0
    assert snapshot(home) == before


def test_a_server_name_holding_control_or_bidi_characters_is_shown_escaped(home: Path) -> None:
    client = home / ".cursor" / "mcp.json"
    client.write_text(json.dumps({"mcpServers": {"a\x1b[2J\u202eb": {"command": "x"}}}))
    status, out = setup(home, dry_run=True)
    assert status == 0, out
    assert "\x1b" not in out
    assert "\u202e" not in out
    assert "a\\x1b[2J\\u202eb" in out
