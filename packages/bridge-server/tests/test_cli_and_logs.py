"""The command line's answers to mistakes, and the default log file (bounded, private)."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from mcp_code_execution_mode._logging import (
    LOG_FILE_BACKUPS,
    LOG_FILE_MAX_BYTES,
    configure_logging,
)
from mcp_code_execution_mode.cli import COMMANDS, main
from mcp_code_execution_mode.settings import load_settings


def test_an_unknown_command_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctr"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'doctr'" in err
    for command in COMMANDS:
        assert command in err


def test_setup_is_a_command_with_its_clients_in_the_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["setup", "--help"])
    out = capsys.readouterr().out
    for client in ("claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "gemini"):
        assert client in out
    assert "--dry-run" in out


def test_the_log_file_is_in_the_state_dir_by_default_and_off_disables_it(tmp_path: Path) -> None:
    settings = load_settings({}, {"MCP_BRIDGE_STATE_DIR": str(tmp_path)})
    assert settings.resolved_log_file == tmp_path / "logs" / "bridge.log"
    off = load_settings({}, {"MCP_BRIDGE_LOG_FILE": "off"})
    assert off.resolved_log_file is None
    chosen = load_settings({"log_file": str(tmp_path / "b.log")}, {})
    assert chosen.resolved_log_file == tmp_path / "b.log"


def test_the_log_file_is_private_and_rotation_bounds_it(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "bridge.log"
    configure_logging("info", log_file)
    try:
        record = "x" * 1000
        for _ in range(6 * LOG_FILE_MAX_BYTES // 1000):
            logging.getLogger("test").info(record)
    finally:
        configure_logging("warning", None)
    files = sorted(log_file.parent.iterdir())
    assert len(files) == 1 + LOG_FILE_BACKUPS
    for path in files:
        assert path.stat().st_size <= LOG_FILE_MAX_BYTES
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700


def test_an_unwritable_log_file_is_reported_and_logging_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    configure_logging("warning", blocker / "logs" / "bridge.log")
    try:
        logging.getLogger("test").warning("still logged")
    finally:
        configure_logging("warning", None)
    err = capsys.readouterr().err
    assert "cannot write the log file" in err
    assert "still logged" in err
