"""What the chaos run observes from outside the bridge: its processes, containers and memory.

Everything here reads ``/proc`` or asks the podman CLI; nothing talks to the bridge itself, so a
wedged bridge cannot hide its leftovers from the report.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bridge_core.runtime.base import OWNER_LABEL

__all__ = [
    "bridge_pid",
    "kill_container",
    "marked_processes",
    "owned_containers",
    "peak_rss_kib",
    "rss_kib",
]

PODMAN_TIMEOUT = 60
"""podman CLI calls are bounded: a stuck API must fail the run, not hang it."""


def bridge_pid(state_dir: Path) -> int | None:
    """The pid of the bridge started with ``--state-dir state_dir`` (None when it is gone)."""
    needle = str(state_dir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp_code_execution_mode" in argv and needle in argv:
            return int(entry.name)
    return None


def marked_processes(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (the upstream servers we
    started carry it; anything still running with it after the bridge exited is an orphan)."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in environ and state != "Z":
            found.append(int(entry.name))
    return found


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_kib(pid: int) -> int:
    """The kernel's high-water mark of the process's resident memory (VmHWM), in KiB."""
    return _status_kib(pid, "VmHWM")


def rss_kib(pid: int) -> int:
    """The process's resident memory now (VmRSS), in KiB."""
    return _status_kib(pid, "VmRSS")


def owned_containers(pid: int) -> dict[str, str]:
    """Containers created by the bridge process ``pid``, running or not: name -> state."""
    listed = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label={OWNER_LABEL}", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=PODMAN_TIMEOUT,
    )
    return {
        c["Names"][0]: str(c.get("State", ""))
        for c in json.loads(listed.stdout or "[]")
        if str((c.get("Labels") or {}).get(OWNER_LABEL, "")).startswith(f"{pid}:")
    }


def kill_container(name: str) -> bool:
    """``podman kill`` from outside the bridge; False when the container was already gone."""
    done = subprocess.run(
        ["podman", "kill", name], capture_output=True, text=True, timeout=PODMAN_TIMEOUT
    )
    return done.returncode == 0
