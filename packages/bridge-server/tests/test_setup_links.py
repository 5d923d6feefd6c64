"""``setup`` and a servers file that is a symlink: it follows a link to a private regular file
(dotfile managers link configs), but refuses a link sitting in a folder others can write (they
could point it at a file of theirs, and the bridge would run the servers it lists), and a link to
a FIFO or a device (reading one hangs or never ends)."""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path

import pytest
from bridge_core.discovery import where
from mcp_code_execution_mode.setup import run_setup

CURSOR = {"mcpServers": {"time": {"command": "mcp-server-time"}}}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    client = home / ".cursor" / "mcp.json"
    client.parent.mkdir()
    client.write_text(json.dumps(CURSOR))
    return home


def setup(home: Path, servers: Path) -> tuple[int, str]:
    out = io.StringIO()
    result: list[int] = []

    def run() -> None:
        result.append(
            run_setup(
                "cursor",
                where=where(home=home, cwd=home / "project", environ={}, platform="linux"),
                state_dir=home / "state",
                flags={},
                out=out,
                servers_file=servers,
            )
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(15)
    assert not thread.is_alive(), "setup did not return"
    return result[0], out.getvalue()


def test_a_link_to_a_private_servers_file_is_followed_and_stays_a_link(home: Path) -> None:
    target = home / "dotfiles" / "servers.json"
    target.parent.mkdir(mode=0o700)
    link = home / "config" / "servers.json"
    link.parent.mkdir(mode=0o700)
    link.symlink_to(target)
    status, out = setup(home, link)
    assert status == 0, out
    assert link.is_symlink()
    assert "time" in json.loads(target.read_text())["mcpServers"]


def test_a_link_in_a_folder_others_can_write_is_refused_though_its_target_is_private(
    home: Path,
) -> None:
    target = home / "dotfiles" / "servers.json"
    target.parent.mkdir(mode=0o700)
    target.write_text('{"mcpServers": {}}')
    shared = home / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone may replace the link, pointing it at servers of their own
    link = shared / "servers.json"
    link.symlink_to(target)
    before = target.read_bytes()
    status, out = setup(home, link)
    assert status == 1, out
    assert f"its folder {shared} can be written by other accounts" in out
    assert target.read_bytes() == before


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_servers_file_that_is_a_fifo_or_a_device_is_refused_without_reading_it(
    home: Path, kind: str
) -> None:
    folder = home / "config"
    folder.mkdir(mode=0o700)
    servers = folder / "servers.json"
    if kind == "fifo":
        os.mkfifo(servers)
    else:
        servers.symlink_to("/dev/zero")
    status, out = setup(home, servers)
    assert status == 1, out
    assert "not a regular file" in out
