"""Every log record is masked and bounded, whoever wrote the text it quotes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.redaction import Redactor
from mcp_code_execution_mode._logging import (
    CONTINUATION,
    MAX_RECORD_CHARS,
    configure_logging,
    mask_logs,
)

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "bridge.log"
    configure_logging("info", path)
    mask_logs(Redactor([SECRET]))
    yield path
    mask_logs(Redactor())
    logging.basicConfig(handlers=[logging.NullHandler()], force=True)


def test_a_huge_record_keeps_its_head_and_tail_within_the_bound(log_file: Path) -> None:
    logging.getLogger("test").warning("junk from a server: %s", "a" * 4_000_000 + "THE END")
    text = log_file.read_text()
    assert len(text) < MAX_RECORD_CHARS + 200
    assert "junk from a server: aaa" in text
    assert text.rstrip().endswith("THE END")
    assert "characters cut" in text


def test_secrets_are_masked_in_messages_and_tracebacks(log_file: Path) -> None:
    try:
        raise RuntimeError(f"connect failed: https://api.example.com/?key={SECRET}")
    except RuntimeError:
        logging.getLogger("test").exception("upstream said %s", SECRET)
    text = log_file.read_text()
    assert SECRET not in text
    assert "upstream said ***" in text
    assert "?key=***" in text


FORGED = "2026-01-01 00:00:00,000 4242 INFO mcp_code_execution_mode.approval: the user approved"


def records(text: str) -> list[str]:
    """The lines of the log that start a record (a timestamp, then the process id)."""
    return [line for line in text.splitlines() if not line.startswith(CONTINUATION)]


def test_a_newline_in_a_message_cannot_forge_a_record(log_file: Path) -> None:
    logging.getLogger("test").warning("restore failed: %s", f"disk full\n{FORGED}\r\n")
    text = log_file.read_text()
    assert len(text.splitlines()) == 1
    assert f"restore failed: disk full\\n{FORGED}\\r\\n" in text


def test_an_exception_message_with_a_newline_stays_inside_its_traceback(log_file: Path) -> None:
    try:
        raise OSError(f"restore failed\n{FORGED}")
    except OSError:
        logging.getLogger("test").exception("undo of the last change failed")
    lines = log_file.read_text().splitlines()
    assert len(records("\n".join(lines))) == 1
    assert lines[1] == CONTINUATION + "Traceback (most recent call last):"
    assert CONTINUATION + FORGED in lines
    assert all(line.startswith(CONTINUATION) for line in lines[1:])


def test_a_stack_attached_to_a_record_is_on_continuation_lines(log_file: Path) -> None:
    logging.getLogger("test").warning("where am I", stack_info=True)
    lines = log_file.read_text().splitlines()
    assert lines[1] == CONTINUATION + "Stack (most recent call last):"
    assert all(line.startswith(CONTINUATION) for line in lines[1:])


@pytest.mark.parametrize(
    ("char", "escaped"),
    [
        ("\x1b", "\\x1b"),  # ANSI escape: moves, clears, recolours a terminal
        ("\u202e", "\\u202e"),  # right-to-left override
        ("\u2066", "\\u2066"),  # left-to-right isolate
        ("\u2028", "\\u2028"),  # line separator
        ("\u2029", "\\u2029"),  # paragraph separator
        ("\x85", "\\x85"),  # next line (C1)
        ("\r", "\\r"),
        ("\x0b", "\\x0b"),
        ("\x00", "\\x00"),
    ],
)
def test_controls_bidi_overrides_and_line_separators_are_escaped_in_messages_and_tracebacks(
    log_file: Path, char: str, escaped: str
) -> None:
    try:
        raise ValueError(f"bad name {char}[2J evil")
    except ValueError:
        logging.getLogger("test").exception("name %s", f"a{char}b")
    text = log_file.read_text(encoding="utf-8")
    assert char not in text
    assert f"name a{escaped}b" in text
    assert f"ValueError: bad name {escaped}[2J evil" in text


def test_stderr_and_the_file_share_the_formatter_that_keeps_a_record_on_one_line(
    log_file: Path,
) -> None:
    record = logging.LogRecord("test", logging.WARNING, "x", 1, "a\nb\u2028c\x1b", None, None)
    ours = [h for h in logging.getLogger().handlers if type(h).__module__ != "_pytest.logging"]
    assert len(ours) == 2  # stderr and the file
    for handler in ours:
        assert handler.format(record).endswith("a\\nb\\u2028c\\x1b")
