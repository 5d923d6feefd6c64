"""Process-group records: a starting bridge ends the groups of dead bridges, and only those."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.proxy._leftovers import forget_group, kill_dead_owners_groups, record_group
from bridge_core.runtime._ownership import current_owner, process_start_time

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def leader() -> Iterator[subprocess.Popen[bytes]]:
    """A process leading its own group, like a stdio server the SDK started."""
    process = subprocess.Popen(SLEEPER, start_new_session=True)
    yield process
    process.kill()
    process.wait(timeout=10)


def _record(directory: Path, owner: str, pgid: int, start: int | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{owner}.{pgid}"
    path.write_text(str(start or 0), encoding="ascii")
    return path


def test_group_of_a_dead_bridge_is_killed_and_its_record_removed(
    tmp_path: Path, leader: subprocess.Popen[bytes]
) -> None:
    me = current_owner()
    dead_owner = f"{me.pid}-{me.start_time + 1}"  # same pid, other start time: not running
    record = _record(tmp_path, dead_owner, leader.pid, process_start_time(leader.pid))
    assert kill_dead_owners_groups(tmp_path) == [leader.pid]
    assert leader.wait(timeout=10) == -9
    assert not record.exists()


def test_group_whose_pid_was_reused_by_another_process_is_left_alone(
    tmp_path: Path, leader: subprocess.Popen[bytes]
) -> None:
    me = current_owner()
    start = process_start_time(leader.pid)
    assert start is not None
    record = _record(tmp_path, f"{me.pid}-{me.start_time + 1}", leader.pid, start + 1)
    assert kill_dead_owners_groups(tmp_path) == []
    assert leader.poll() is None
    assert not record.exists()


def test_groups_of_a_running_bridge_are_left_alone_and_forgotten_by_it(
    tmp_path: Path, leader: subprocess.Popen[bytes]
) -> None:
    record = record_group(tmp_path, leader.pid)
    assert record is not None
    assert kill_dead_owners_groups(tmp_path) == []
    assert leader.poll() is None
    forget_group(record)
    assert list(tmp_path.iterdir()) == []
