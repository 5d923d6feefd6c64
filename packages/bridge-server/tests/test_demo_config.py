"""The demo's bundled server config: pinned installs first, npx/uvx fallback, missing named; a
server that fails to start is shown with its cause, and a skipped step says which of the two."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from mcp_code_execution_mode._demo_steps import DemoStep
from mcp_code_execution_mode.demo import _drop_failed, demo_servers, skip_note
from mcp_code_execution_mode.settings import Settings


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


async def test_a_server_that_fails_to_start_is_shown_with_the_cause_doctor_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    script = tmp_path / "servers" / "py" / "bin" / "mcp-server-time"
    _executable(script)
    script.write_text("#!/bin/sh\necho 'tzdata: no zone named UTC' >&2\nexit 3\n")
    servers, _ = demo_servers(tmp_path / "servers", tmp_path / "data", tmp_path)
    assert list(servers) == ["time"]
    failed = await _drop_failed(servers, Settings(), fetched=set())
    out = capsys.readouterr().out.splitlines()
    assert servers == {}
    assert failed == {"time": "failed to start"}
    assert out[0].startswith("failed to start: time: MCP server 'time' failed to start: it ")
    assert "    tzdata: no zone named UTC" in out  # the stderr tail doctor shows
    assert not any("npx" in line for line in out)  # installed, not fetched: no network hint


def test_a_skipped_step_says_whether_its_server_failed_or_is_not_installed() -> None:
    step = DemoStep("orchestrate", "pass", ("filesystem", "time", "memory"))
    unavailable = {"time": "failed to start", "memory": "not installed"}
    assert skip_note(step, {"filesystem"}, unavailable) == (
        "(skipped: needs time, which failed to start (see above); memory, which is not installed)"
    )
    assert skip_note(step, {"filesystem", "time", "memory"}, {}) is None
