"""Process groups of stdio servers, recorded on disk so the next bridge can end what a killed
bridge left behind.

Why: a SIGKILLed bridge runs no cleanup. Its stdio servers read EOF and usually exit, but their
children (an ``npx`` grandchild, a detached helper) live on in the server's process group. Each
server is started as a group leader, so one record per server is enough: ``<owner>.<pgid>`` in
the records directory, holding the leader's start time. On start a bridge SIGKILLs the groups
whose owner is dead. The start time guards against pid reuse: a pgid names a group only while
some member lives (the kernel keeps the number reserved until then), and a *new* process with
that pid and another start time means the old group is gone and the number was reused.

A record makes the next bridge SIGKILL a process group, so the directory is private (0700, the
bridge's user only): nobody else can plant one.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from bridge_core.private_files import private_dir, write_private
from bridge_core.runtime._ownership import (
    current_owner,
    owner_is_alive,
    parse_owner,
    process_start_time,
)

__all__ = ["forget_group", "kill_dead_owners_groups", "record_group"]

logger = logging.getLogger("bridge_core.proxy")


def record_group(directory: Path | None, pgid: int | None) -> Path | None:
    """Write the record of process group ``pgid`` (a server just started); its path, or None."""
    if directory is None or pgid is None:
        return None
    start = process_start_time(pgid)
    owner = current_owner()
    path = directory / f"{owner.pid}-{owner.start_time}.{pgid}"
    try:
        private_dir(directory)
        write_private(path, str(start or 0).encode("ascii"))
    except OSError as exc:  # no record only weakens the next start's cleanup; say so
        logger.warning("could not record server process group %d in %s: %s", pgid, directory, exc)
        return None
    return path


def forget_group(record: Path | None) -> None:
    """Remove a record once its group was ended by this bridge."""
    if record is not None:
        record.unlink(missing_ok=True)


def kill_dead_owners_groups(directory: Path | None) -> list[int]:
    """SIGKILL the recorded groups of bridges that are no longer running; the pgids killed."""
    if directory is None or not directory.is_dir():
        return []
    killed = []
    for record in directory.iterdir():
        owner_text, _, pgid_text = record.name.partition(".")
        owner = parse_owner(owner_text.replace("-", ":", 1))
        if owner is None or not pgid_text.isdigit():
            continue
        if owner_is_alive(owner):
            continue  # another bridge sharing the state dir: its servers are its own
        pgid = int(pgid_text)
        try:
            recorded_start = int(record.read_text(encoding="ascii") or 0)
        except (OSError, ValueError):
            recorded_start = 0
        leader_start = process_start_time(pgid)
        reused = leader_start is not None and recorded_start not in (0, leader_start)
        if not reused:
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
            except (ProcessLookupError, PermissionError):
                pass
        record.unlink(missing_ok=True)
    if killed:
        logger.info("ended process groups left by stopped bridges: %s", killed)
    return killed
