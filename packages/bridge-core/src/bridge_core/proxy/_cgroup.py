"""A cgroup (v2) per stdio server, where the host lets the bridge make one.

A cgroup holds every process started inside it, whatever they do (``setsid``, double forks,
re-parenting to init), and ``cgroup.kill`` ends them all at once, atomically against forks. So a
server's cgroup is the one thing that still finds its descendants after the bridge *and* the
server's supervisor (``_supervisor.py``) were both SIGKILLed.

Where: a child of the bridge's own cgroup in the unified (v2) hierarchy, under
``mcp-bridge-upstream/<bridge pid>-<start time>.<n>``. That works for root (on cgroup v2 and on
the "hybrid" v1 hosts, whose ``/sys/fs/cgroup/unified`` is a v2 hierarchy without controllers)
and for a user whose own cgroup is delegated to them (systemd ``user@.service``). Elsewhere
(rootless without delegation, pure cgroup v1, no ``/proc``) :func:`make` returns None and the
supervisor alone contains the server. No controller is enabled: this is about finding
processes, not limiting them.

Functions here block (file I/O, short retries): async callers use ``anyio.to_thread``.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from pathlib import Path

__all__ = ["is_ours", "kill", "made_here", "make", "remove"]

logger = logging.getLogger("bridge_core.proxy")

PARENT = "mcp-bridge-upstream"
_LEAF = re.compile(r"\d+-\d+\.\d+")
_KILL_ROUNDS = 50
"""Without ``cgroup.kill`` (Linux < 5.14) processes are killed one by one; a fork racing the
kill adds a round, and a cgroup still populated after this many is left to the next start."""
REMOVE_TIMEOUT = 2.0
"""Seconds for killed processes to leave the cgroup before it can be removed."""
_RETRY_INTERVAL = 0.01


def _cgroup2_mounts() -> list[tuple[Path, str]]:
    """(mount point, mounted root) of every cgroup2 mount, from ``/proc/self/mountinfo``."""
    mounts = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                before, _, after = line.partition(" - ")
                fields = before.split()
                if after.split()[:1] == ["cgroup2"] and len(fields) >= 5:
                    mounts.append((Path(fields[4]), fields[3]))
    except OSError:
        return []
    return mounts


def _own_cgroup2() -> Path | None:
    """The bridge's cgroup directory in the unified hierarchy, if one is mounted."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as groups:
            paths = [line.strip()[3:] for line in groups if line.startswith("0::")]
    except OSError:
        return None
    if not paths:
        return None
    for mount, root in _cgroup2_mounts():
        own = paths[0]
        if root != "/" and own.startswith(root):
            own = own[len(root) :]
        candidate = mount / own.lstrip("/")
        if candidate.is_dir():
            return candidate
    return None


def make(owner: str, serial: int) -> Path | None:
    """A new empty cgroup for one server of bridge ``owner`` (``<pid>-<start time>``), or None
    where the bridge cannot make one here."""
    base = _own_cgroup2()
    if base is None:
        return None
    path = base / PARENT / f"{owner}.{serial}"
    try:
        path.mkdir(parents=True)
    except OSError as exc:  # no permission, read-only cgroupfs, ...: the supervisor alone
        logger.debug("no cgroup for upstream servers at %s: %s", path, exc)
        return None
    if not os.access(path / "cgroup.procs", os.W_OK):
        remove(path)
        return None
    return path


def made_here() -> list[Path]:
    """The server cgroups next to the ones this bridge makes (its own and other bridges')."""
    base = _own_cgroup2()
    if base is None:
        return []
    try:
        return [p for p in (base / PARENT).iterdir() if _LEAF.fullmatch(p.name) and p.is_dir()]
    except OSError:
        return []


def is_ours(path: Path) -> bool:
    """True for a path :func:`make` could have returned (a record from disk is checked before
    anything is written to it)."""
    if path.parent.name != PARENT or not _LEAF.fullmatch(path.name) or ".." in path.parts:
        return False
    return any(path.is_relative_to(mount) for mount, _ in _cgroup2_mounts())


def _pids(path: Path) -> list[int]:
    try:
        return [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def populated(path: Path) -> bool:
    """True while a process is in the cgroup (or below it)."""
    try:
        events = (path / "cgroup.events").read_text()
    except OSError:
        return False
    return "populated 1" in events


def kill(path: Path) -> None:
    """SIGKILL every process in the cgroup."""
    try:
        (path / "cgroup.kill").write_text("1")
        return
    except FileNotFoundError:
        pass  # Linux < 5.14: one by one
    except OSError as exc:
        logger.warning("cannot kill the processes of cgroup %s: %s", path, exc)
        return
    for _ in range(_KILL_ROUNDS):
        pids = _pids(path)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def remove(path: Path, timeout: float = REMOVE_TIMEOUT) -> bool:
    """Remove the (killed) cgroup once its processes are gone; False if it is still busy."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                logger.warning("cgroup %s still holds processes; left for the next start", path)
                return False
        time.sleep(_RETRY_INTERVAL)
