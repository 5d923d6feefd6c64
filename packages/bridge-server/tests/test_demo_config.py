"""The demo's bundled server config: pinned installs first, npx/uvx fallback, missing named."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from mcp_code_execution_mode.demo import demo_servers


def _executable(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_prepared_servers_are_used_with_their_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    servers_dir = tmp_path / "servers"
    for name in ("filesystem", "memory", "everything"):
        _executable(servers_dir / "npm" / "node_modules" / ".bin" / f"mcp-server-{name}")
    _executable(servers_dir / "py" / "bin" / "mcp-server-time")
    servers, missing = demo_servers(servers_dir, tmp_path / "data", tmp_path)
    assert missing == []
    assert servers["filesystem"]["args"] == [str(tmp_path / "data")]
    assert servers["time"]["args"] == ["--local-timezone", "UTC"]
    assert servers["memory"]["env"] == {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    assert servers["everything"]["command"].endswith("mcp-server-everything")


def test_without_installs_npx_and_uvx_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    _executable(bin_dir / "npx")
    _executable(bin_dir / "uvx")
    monkeypatch.setenv("PATH", str(bin_dir))
    servers, missing = demo_servers(tmp_path / "none", tmp_path / "data", tmp_path)
    assert missing == []
    assert servers["filesystem"]["args"][:2] == ["-y", "@modelcontextprotocol/server-filesystem"]
    assert servers["time"]["args"][0] == "mcp-server-time"


def test_missing_servers_are_named_with_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    servers, missing = demo_servers(tmp_path / "none", tmp_path / "data", tmp_path)
    assert servers == {}
    assert len(missing) == 4
    assert all("scripts/prepare-servers" in note for note in missing)
    assert os.environ["PATH"] == str(tmp_path / "empty-bin")
