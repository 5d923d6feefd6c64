"""Process groups (and cgroups) of stdio servers, recorded on disk so the next bridge can end
what a killed bridge left behind.

Why: a SIGKILLed bridge runs no cleanup. Each stdio server runs under a supervisor
(``_supervisor.py``) that leads the server's process group and, on Linux, ends every descendant
itself when the bridge dies. What can still be left is what that supervisor could not reach:
it was killed too (or the platform has none), leaving the server's group and any daemon the
server started in a session of its own. One record per server is written when it starts:
``<owner>.<pgid>`` in the records directory, holding the leader's start time and, where the
bridge could make one, the server's cgroup (``_cgroup.py``), which holds every descendant
whatever its session. On start a bridge kills the groups and cgroups whose owner is dead. The
start time guards against pid reuse: a pgid names a group only while some member lives (the
kernel keeps the number reserved until then), and a *new* process with that pid and another
start time means the old group is gone and the number was reused. A cgroup path read back is
checked to be one of ours before anything is written to it.

A record makes the next bridge SIGKILL a process group (and write to a cgroup), so the
directory is private (0700, the bridge's user only): nobody else can plant one.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from bridge_core._ownership import (
    current_owner,
    owner_is_alive,
    parse_owner,
    process_start_time,
)
from bridge_core.private_files import private_dir, write_private
from bridge_core.proxy import _cgroup

__all__ = ["forget_group", "kill_dead_owners_groups", "record_group"]

logger = logging.getLogger("bridge_core.proxy")


def record_group(
    directory: Path | None, pgid: int | None, cgroup: Path | None = None
) -> Path | None:
    """Write the record of process group ``pgid`` (a server just started) and its ``cgroup``;
    the record's path, or None."""
    if directory is None or pgid is None:
        return None
    start = process_start_time(pgid)
    owner = current_owner()
    path = directory / f"{owner.pid}-{owner.start_time}.{pgid}"
    lines = [str(start or 0), *([str(cgroup)] if cgroup is not None else [])]
    try:
        private_dir(directory)
        write_private(path, ("\n".join(lines) + "\n").encode())
    except OSError as exc:  # no record only weakens the next start's cleanup; say so
        logger.warning("could not record server process group %d in %s: %s", pgid, directory, exc)
        return None
    return path


def forget_group(record: Path | None) -> None:
    """Remove a record once its group was ended by this bridge."""
    if record is not None:
        record.unlink(missing_ok=True)


def kill_dead_owners_groups(directory: Path | None) -> list[int]:
    """SIGKILL the recorded groups and cgroups of bridges that are no longer running, and any
    server cgroup of theirs next to ours (a bridge on another state dir); the pgids whose group
    or cgroup was killed (blocking: run it in a thread)."""
    killed = _kill_recorded(directory) if directory is not None and directory.is_dir() else []
    for cgroup in _cgroup.made_here():
        owner = parse_owner(cgroup.name.partition(".")[0].replace("-", ":", 1))
        if owner is not None and not owner_is_alive(owner):
            _cgroup.kill(cgroup)
            _cgroup.remove(cgroup)
    return killed


def _kill_recorded(directory: Path) -> list[int]:
    killed = []
    for record in directory.iterdir():
        owner_text, _, pgid_text = record.name.partition(".")
        owner = parse_owner(owner_text.replace("-", ":", 1))
        if owner is None or not pgid_text.isdigit():
            continue
        if owner_is_alive(owner):
            continue  # another bridge sharing the state dir: its servers are its own
        pgid = int(pgid_text)
        recorded_start, cgroup = _read_record(record)
        if cgroup is not None:
            _cgroup.kill(cgroup)  # everything the server started, whatever its group
            _cgroup.remove(cgroup)
            killed.append(pgid)
        leader_start = process_start_time(pgid)
        reused = leader_start is not None and recorded_start not in (0, leader_start)
        if not reused:
            try:
                os.killpg(pgid, signal.SIGKILL)
                if pgid not in killed:
                    killed.append(pgid)
            except (ProcessLookupError, PermissionError):
                pass
        record.unlink(missing_ok=True)
    if killed:
        logger.info("ended process groups left by stopped bridges: %s", killed)
    return killed


def _read_record(record: Path) -> tuple[int, Path | None]:
    """The leader's start time (0: unknown) and the cgroup (None: none, or not one of ours)."""
    try:
        lines = record.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 0, None
    start = int(lines[0]) if lines and lines[0].isdigit() else 0
    cgroup = Path(lines[1]) if len(lines) > 1 and lines[1].startswith("/") else None
    if cgroup is not None and not _cgroup.is_ours(cgroup):
        logger.warning("ignoring cgroup %s in %s: not one the bridge makes", cgroup, record)
        cgroup = None
    return start, cgroup
