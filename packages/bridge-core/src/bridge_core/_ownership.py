"""Which bridge process owns something it left on this host, and whether that bridge still runs.

What a bridge leaves behind is named after its owner, ``<pid>:<start time>`` of the bridge
process: its containers (the owner label, :mod:`bridge_core.runtime._hardening`), its state
directories (``sandboxes/<owner>/``, spill directories) and the process groups of its upstream
servers (:mod:`bridge_core.proxy._leftovers`). The next bridge removes what belongs to owners
that are gone. The pid alone is not enough: pids are reused, so a new unrelated process could
make a dead bridge's leftovers look owned forever. The start time (field 22 of
``/proc/<pid>/stat``, in clock ticks since boot) changes when the pid is reused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Owner",
    "current_owner",
    "dead_owner_dirs",
    "owner_dir_name",
    "owner_is_alive",
    "parse_owner",
    "process_start_time",
]

# /proc/<pid>/stat: "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields
# are counted after the LAST ")". starttime is field 22 overall, i.e. index 19 after comm.
_STARTTIME_INDEX_AFTER_COMM = 19


@dataclass(frozen=True, slots=True)
class Owner:
    """A bridge process: its pid and its start time in clock ticks since boot."""

    pid: int
    start_time: int

    @property
    def label(self) -> str:
        """How it is written: ``<pid>:<start time>`` (the containers' ``OWNER_LABEL``)."""
        return f"{self.pid}:{self.start_time}"


def process_start_time(pid: int, *, proc: str = "/proc") -> int | None:
    """The start time of ``pid`` from ``/proc/<pid>/stat``, or None if there is no such process."""
    try:
        with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    _, _, after_comm = text.rpartition(")")
    fields = after_comm.split()
    try:
        return int(fields[_STARTTIME_INDEX_AFTER_COMM])
    except (IndexError, ValueError):
        return None


def current_owner() -> Owner:
    """The owner value for containers created by this process."""
    pid = os.getpid()
    start_time = process_start_time(pid)
    if start_time is None:  # no /proc (not Linux): the pid alone is the best we have
        start_time = 0
    return Owner(pid, start_time)


def parse_owner(value: str | None) -> Owner | None:
    """Parse an owner as :attr:`Owner.label` writes it; None when it is absent or malformed."""
    if not value:
        return None
    pid_text, sep, start_text = value.partition(":")
    if not sep or not pid_text.isdigit() or not start_text.isdigit():
        return None
    return Owner(int(pid_text), int(start_text))


def owner_is_alive(owner: Owner, *, proc: str = "/proc") -> bool:
    """True while the process that created the container still runs (same pid AND start time)."""
    if owner.start_time == 0 and not os.path.isdir(proc):
        # Written where there is no /proc (macOS): the pid alone is what can be matched. Without
        # this every bridge there would take another live bridge's sandboxes for leftovers.
        return _pid_exists(owner.pid)
    start_time = process_start_time(owner.pid, proc=proc)
    if start_time is None:
        return False
    # A label written without /proc (start time 0) can only be matched by pid.
    return owner.start_time in (0, start_time)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True


def owner_dir_name(owner: Owner) -> str:
    """The name of ``owner``'s own directory under a shared parent (``<pid>-<start time>``)."""
    return f"{owner.pid}-{owner.start_time}"


def dead_owner_dirs(
    parent: Path, *, is_alive: Callable[[Owner], bool] = owner_is_alive
) -> list[Path]:
    """Directories under ``parent`` named by :func:`owner_dir_name` whose owner is gone.

    Other names are never selected: what cannot be attributed may belong to a live bridge.
    """
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    dead = []
    for entry in entries:
        owner = parse_owner(entry.name.replace("-", ":", 1))
        if owner is not None and entry.is_dir() and not is_alive(owner):
            dead.append(entry)
    return dead
