"""``doctor``'s report: a config file other accounts can read that holds credentials is flagged,
and what it quotes (an upstream's error) can neither show a secret nor fake a finding."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from bridge_core.discovery import discover
from bridge_core.redaction import Redactor
from mcp_code_execution_mode.doctor import _check_readable_secrets, _Report

TOKEN = "ghp_0123456789secret"


def check(home: Path, value: str, mode: int, environ: dict[str, str]) -> str:
    path = home / ".config" / "mcp-code-execution-mode" / "servers.json"
    path.parent.mkdir(parents=True)
    entry = {"command": "npx", "args": ["server-github"], "env": {"GITHUB_TOKEN": value}}
    path.write_text(json.dumps({"mcpServers": {"github": entry, "time": {"command": "t"}}}))
    path.chmod(mode)
    out = io.StringIO()
    report = _Report(out)
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
    report = _Report(out, redactor=Redactor([TOKEN]))
    error = f"exited: bad token {TOKEN}\x1b[2J\n[ok]   server 'github': starts\u2028\u202e"
    report.warn("server 'github'", error, "check its env")
    lines = out.getvalue().splitlines()
    assert lines == [
        "[warn] server 'github': exited: bad token ***\\x1b[2J\\n[ok]   server 'github': "
        "starts\\u2028\\u202e",
        "       fix: check its env",
    ]
