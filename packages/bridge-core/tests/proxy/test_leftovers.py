"""Process-group records: a starting bridge ends the groups (and cgroups) of dead bridges, and
only those."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core._ownership import current_owner, process_start_time
from bridge_core.proxy import _cgroup
from bridge_core.proxy._leftovers import forget_group, kill_dead_owners_groups, record_group

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


def _cgroups_writable() -> bool:
    probe = _cgroup.make("0-0", os.getpid())
    if probe is None:
        return False
    _cgroup.remove(probe)
    return True


needs_cgroups = pytest.mark.skipif(
    not _cgroups_writable(), reason="no writable cgroup2 here (rootless without delegation)"
)

DAEMON = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"


@needs_cgroups
def test_the_cgroup_of_a_dead_bridge_is_killed_with_what_left_its_group(
    tmp_path: Path, leader: subprocess.Popen[bytes]
) -> None:
    me = current_owner()
    dead_owner = f"{me.pid}-{me.start_time + 1}"
    cgroup = _cgroup.make(dead_owner, 1)
    assert cgroup is not None
    # A daemon in a session of its own: no process group names it, only the cgroup holds it.
    join = f"open({str(cgroup / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
    subprocess.run([sys.executable, "-c", "import os\n" + join + DAEMON], check=True)
    (daemon,) = (int(pid) for pid in (cgroup / "cgroup.procs").read_text().split())
    record = _record(tmp_path, dead_owner, leader.pid, process_start_time(leader.pid))
    record.write_text(f"{process_start_time(leader.pid)}\n{cgroup}\n")
    assert kill_dead_owners_groups(tmp_path) == [leader.pid]
    assert leader.wait(timeout=10) == -9
    assert process_start_time(daemon) is None or _zombie(daemon)
    assert not cgroup.exists()
    assert not record.exists()


def _zombie(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "Z"


def test_a_recorded_path_that_is_not_one_of_our_cgroups_is_never_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    me = current_owner()
    target = tmp_path / "victim"
    target.mkdir()
    (target / "cgroup.kill").write_text("untouched")
    record = _record(tmp_path / "records", f"{me.pid}-{me.start_time + 1}", 2**22 + 7, None)
    record.write_text(f"0\n{target}\n")
    kill_dead_owners_groups(tmp_path / "records")
    assert (target / "cgroup.kill").read_text() == "untouched"
    assert "not one the bridge makes" in caplog.text


@needs_cgroups
def test_a_server_cgroup_of_a_dead_bridge_without_a_record_here_is_killed_too(
    tmp_path: Path,
) -> None:
    # A bridge that ran on another state dir: its records are elsewhere, its cgroup is next to ours.
    me = current_owner()
    dead = _cgroup.make(f"{me.pid}-{me.start_time + 1}", 2)
    mine = _cgroup.make(f"{me.pid}-{me.start_time}", 3)
    assert dead is not None
    assert mine is not None
    join = f"open({str(dead / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
    subprocess.run([sys.executable, "-c", "import os\n" + join + DAEMON], check=True)
    (daemon,) = (int(pid) for pid in (dead / "cgroup.procs").read_text().split())
    try:
        kill_dead_owners_groups(None)
        assert process_start_time(daemon) is None or _zombie(daemon)
        assert not dead.exists()
        assert mine.exists()  # a live bridge's cgroup is its own
    finally:
        _cgroup.remove(mine)
