"""Was a dead sandbox killed for exceeding its memory limit?

podman 4.3 with conmon 2.1 never reports ``OOMKilled`` (measured: conmon writes its ``oom``
marker into its own working directory, where podman does not look). So, where the bridge can
read the host's cgroups (rootful podman, cgroupfs manager, local socket), each sandbox gets its
own cgroup parent ``/mcp-bridge/<name>``; it survives the container's own cgroup, so after
the container died we can still read what happened:

* cgroup v2: the parent's ``memory.events`` counts ``oom_kill`` of every descendant;
* cgroup v1: events are not propagated to parents, but usage is: a container that died of
  SIGKILL (exit 137) while the parent's peak usage reached the limit was OOM-killed. The
  parent also holds conmon (~1-2 MiB), so a sandbox killed by another SIGKILL within that
  margin of its limit would be misreported; the bridge itself never SIGKILLs without knowing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = [
    "CGROUP_ROOT",
    "SIGKILL_EXIT",
    "cgroup_parent",
    "oom_killed",
    "remove_cgroup_parent",
    "remove_empty_parents",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
SIGKILL_EXIT = 128 + 9
_PARENT_ROOT = "mcp-bridge"
CONMON_EXIT_TIMEOUT = 2.0
"""Seconds to wait for conmon to leave a removed sandbox's cgroup parent."""
_RETRY_INTERVAL = 0.02


def cgroup_parent(name: str) -> str:
    """The cgroup parent of sandbox ``name``."""
    return f"/{_PARENT_ROOT}/{name}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def oom_killed(
    name: str, *, memory_limit: int, exit_code: int | None, root: Path = CGROUP_ROOT
) -> bool:
    """True when the cgroup parent of ``name`` shows that the memory limit killed it."""
    relative = cgroup_parent(name).lstrip("/")
    events = _read(root / relative / "memory.events")
    if events is not None:  # cgroup v2
        counts = dict(line.split() for line in events.splitlines() if line.count(" ") == 1)
        return int(counts.get("oom_kill", "0")) > 0
    peak = _read(root / "memory" / relative / "memory.max_usage_in_bytes")
    if peak is not None and peak.strip().isdigit():  # cgroup v1
        return exit_code == SIGKILL_EXIT and int(peak) >= memory_limit
    return False


def _rmdir_tree(top: Path) -> None:
    # Innermost first; rmdir(2) on a cgroup fails while it holds a process, which is the point.
    for directory, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
        try:
            os.rmdir(directory)
        except OSError:
            pass


def _hierarchies(root: Path) -> list[Path]:
    try:
        return [root, *(p for p in root.iterdir() if p.is_dir())]
    except OSError:
        return []


def remove_cgroup_parent(name: str, *, root: Path = CGROUP_ROOT) -> None:
    """Remove the sandbox's cgroup parent in every hierarchy (blocking; run it in a thread).

    conmon sits in the parent until a moment after its container is removed, so this retries
    for up to :data:`CONMON_EXIT_TIMEOUT`; a parent still busy after that is left to
    :func:`remove_empty_parents`.
    """
    relative = cgroup_parent(name).lstrip("/")
    deadline = time.monotonic() + CONMON_EXIT_TIMEOUT
    while True:
        left = False
        for hierarchy in _hierarchies(root):
            if (hierarchy / relative).is_dir():
                _rmdir_tree(hierarchy / relative)
                left = left or (hierarchy / relative).is_dir()
        if not left or time.monotonic() > deadline:
            return
        time.sleep(_RETRY_INTERVAL)


def remove_empty_parents(*, root: Path = CGROUP_ROOT) -> None:
    """Remove every sandbox cgroup parent that no longer holds anything (any bridge's: a live
    sandbox's parent holds its container's cgroup, so removing it fails harmlessly)."""
    for hierarchy in _hierarchies(root):
        top = hierarchy / _PARENT_ROOT
        if top.is_dir():
            for child in top.iterdir():
                _rmdir_tree(child)
