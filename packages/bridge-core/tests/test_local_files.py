"""Reading a file a user or a client wrote: regular files only, bounded, checked as opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bridge_core.discovery import _files as discovery_files
from bridge_core.discovery._model import SourceUnreadable
from bridge_core.local_files import NotARegularFile, TooLarge, read_regular


def test_a_regular_file_is_read_whole_and_a_missing_one_is_none(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"mcpServers": {}}')
    assert read_regular(path, 1024) == b'{"mcpServers": {}}'
    assert read_regular(tmp_path / "absent.json", 1024) is None


def test_a_fifo_is_refused_without_blocking_and_a_device_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    with pytest.raises(NotARegularFile):
        read_regular(fifo, 1024)
    with pytest.raises(NotARegularFile):
        read_regular(Path("/dev/zero"), 1024)


def test_a_file_past_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"x" * 1025)
    with pytest.raises(TooLarge):
        read_regular(path, 1024)
    assert read_regular(path, 1025) == b"x" * 1025


def test_discovery_reports_a_client_file_swapped_for_a_fifo_as_unreadable(tmp_path: Path) -> None:
    # Discovery checked the size with stat() and then read: a FIFO put in its place between the
    # two hung the bridge's start. The type is now read from the open descriptor.
    fifo = tmp_path / "mcp.json"
    os.mkfifo(fifo)
    with pytest.raises(SourceUnreadable, match="not a regular file"):
        discovery_files._read_text(fifo)
