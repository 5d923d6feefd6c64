"""Every log record is masked and bounded, whoever wrote the text it quotes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.redaction import Redactor
from mcp_code_execution_mode._logging import MAX_RECORD_CHARS, configure_logging, mask_logs

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
