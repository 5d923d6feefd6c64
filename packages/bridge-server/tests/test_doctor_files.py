"""``doctor``'s report: a config file other accounts can read that holds credentials is flagged,
what it quotes (an upstream's error) can neither show a secret nor fake a finding, the bridge's
own entry is expected, and each finding is said once, as doctor's line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from bridge_core.discovery import discover
from bridge_core.redaction import Redactor
from mcp_code_execution_mode import doctor
from mcp_code_execution_mode._doctor_report import Report
from mcp_code_execution_mode._logging import configure_logging
from mcp_code_execution_mode.cli import main
from mcp_code_execution_mode.doctor import _check_files, _check_readable_secrets
from mcp_code_execution_mode.settings import Settings

TOKEN = "ghp_0123456789secret"


def check(home: Path, value: str, mode: int, environ: dict[str, str]) -> str:
    path = home / ".config" / "mcp-code-execution-mode" / "servers.json"
    path.parent.mkdir(parents=True)
    entry = {"command": "npx", "args": ["server-github"], "env": {"GITHUB_TOKEN": value}}
    path.write_text(json.dumps({"mcpServers": {"github": entry, "time": {"command": "t"}}}))
    path.chmod(mode)
    out = io.StringIO()
    report = Report(out)
    discovery = discover(home=home, cwd=home, environ=environ, platform="linux")
    _check_readable_secrets(discovery, home, report)
    assert TOKEN not in out.getvalue()
    return out.getvalue()


def test_a_servers_file_readable_by_others_that_holds_a_token_is_flagged(tmp_path: Path) -> None:
    out = check(tmp_path, TOKEN, 0o644, {})
    assert (
        "[warn] config file: ~/.config/mcp-code-execution-mode/servers.json can be read by " in out
    )
    assert "(mode 644) and holds credentials (servers 'github')" in out
    assert "fix: chmod 600 " in out


@pytest.mark.parametrize(
    ("value", "mode"),
    [(TOKEN, 0o600), ("${GITHUB_TOKEN}", 0o644)],
    ids=["private file", "token taken from the environment"],
)
def test_a_private_file_or_one_that_only_names_a_variable_is_not_flagged(
    tmp_path: Path, value: str, mode: int
) -> None:
    assert check(tmp_path, value, mode, {"GITHUB_TOKEN": TOKEN}) == ""


def test_a_quoted_error_is_masked_and_cannot_fake_a_finding_or_drive_the_terminal() -> None:
    out = io.StringIO()
    report = Report(out, redactor=Redactor([TOKEN]))
    error = f"exited: bad token {TOKEN}\x1b[2J\n[ok]   server 'github': starts\u2028\u202e"
    report.warn("server 'github'", error, "check its env")
    lines = out.getvalue().splitlines()
    assert lines == [
        "[warn] server 'github': exited: bad token ***\\x1b[2J\\n[ok]   server 'github': "
        "starts\\u2028\\u202e",
        "       fix: check its env",
    ]


def test_the_entry_setup_writes_is_an_ok_line_not_a_warning(tmp_path: Path) -> None:
    path = tmp_path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    bridge = {"command": "/venv/bin/python", "args": ["-m", "mcp_code_execution_mode"]}
    path.write_text(json.dumps({"mcpServers": {"code-execution": bridge}}))
    out = io.StringIO()
    discovery = discover(home=tmp_path, cwd=tmp_path / "elsewhere", environ={}, platform="linux")
    _check_files(Settings(), discovery, Report(out))
    assert "[warn]" not in out.getvalue()
    assert (
        "[ok]   discovery: ~/.cursor/mcp.json: server 'code-execution': the entry of the "
        "code-execution bridge itself"
    ) in out.getvalue()


def test_doctor_prints_a_discovery_warning_once_as_its_own_line_and_logs_it_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    typo = {"command": "mcp-server-time", "cmmand": "x"}
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"time": typo}}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)

    async def no_state_dir(settings: Settings, report: Report) -> bool:
        return False  # no runtime, image or sandbox: not what this test is about

    async def nothing_started(*args: object) -> dict[str, object]:
        return {}

    monkeypatch.setattr(doctor, "_check_state_dir", no_state_dir)
    monkeypatch.setattr(doctor, "probe_servers", nothing_started)
    log_file = tmp_path / "bridge.log"
    try:
        main(["doctor", "--log-file", str(log_file), "--state-dir", str(tmp_path / "state")])
    finally:
        configure_logging("warning", None)
    captured = capsys.readouterr()
    assert "unknown field 'cmmand'" not in captured.err
    assert captured.out.count("unknown field 'cmmand'") == 1
    assert "[warn] discovery: warning: ~/.cursor/mcp.json: server 'time': unknown field" in (
        captured.out
    )
    assert "unknown field 'cmmand'" in log_file.read_text()
