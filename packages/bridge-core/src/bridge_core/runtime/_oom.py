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

The files are the engine's machine's: read here for a local engine, and over the bridge's ssh
link (:mod:`._ssh`) for a podman engine on another machine (:class:`EngineCgroups`). Docker
20.10 reports no ``OOMKilled`` and no ``oom`` event here either (measured, cgroup v1, with and
without ``--init``), and podman's events have no OOM entry: an exit code of 137 alone cannot
tell a memory kill from ``os.killpg(0, 9)``, so the cgroup is the only witness. An engine's
``OOMKilled``, where it is reported, is believed first (the backends' ``status``).
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from bridge_core.errors import RuntimeUnavailable

if TYPE_CHECKING:
    from bridge_core.runtime._ssh import SshLink

__all__ = [
    "CGROUP_ROOT",
    "EngineCgroups",
    "SIGKILL_EXIT",
    "cgroup_parent",
    "oom_killed",
    "remove_cgroup_parent",
    "remove_empty_parents",
    "verdict",
]

logger = logging.getLogger("bridge_core.runtime")

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


def _evidence_paths(name: str, root: Path = CGROUP_ROOT) -> tuple[Path, Path]:
    """The cgroup v2 ``memory.events`` and the cgroup v1 peak usage of ``name``'s parent."""
    relative = cgroup_parent(name).lstrip("/")
    return (
        root / relative / "memory.events",
        root / "memory" / relative / "memory.max_usage_in_bytes",
    )


def verdict(
    events: str | None, peak: str | None, *, memory_limit: int, exit_code: int | None
) -> bool:
    """What the parent's files (None: absent) say: was the memory limit the killer?"""
    if events is not None:  # cgroup v2
        counts = dict(line.split() for line in events.splitlines() if line.count(" ") == 1)
        found = counts.get("oom_kill", "0")
        return found.isdigit() and int(found) > 0
    if peak is not None and peak.strip().isdigit():  # cgroup v1
        return exit_code == SIGKILL_EXIT and int(peak) >= memory_limit
    return False


def oom_killed(
    name: str, *, memory_limit: int, exit_code: int | None, root: Path = CGROUP_ROOT
) -> bool:
    """True when the cgroup parent of ``name`` shows that the memory limit killed it."""
    events, peak = _evidence_paths(name, root)
    return verdict(_read(events), _read(peak), memory_limit=memory_limit, exit_code=exit_code)


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


_OWNER_PID = re.compile(r"mcp-sandbox-(\d+)-")
"""The owner bridge's pid in a sandbox's name (``sessions._fleet`` names them so)."""


def _owner_running(name: str, proc: str) -> bool:
    """Whether the bridge that named sandbox ``name`` may still run (its pid exists: a reused
    pid only keeps a parent longer)."""
    found = _OWNER_PID.search(name)
    return found is not None and os.path.exists(f"{proc}/{found.group(1)}")


def remove_empty_parents(*, root: Path = CGROUP_ROOT, proc: str = "/proc") -> None:
    """Remove the sandbox cgroup parents that no longer hold anything, of bridges that are gone
    (a live sandbox's parent holds its container's cgroup, so removing it fails harmlessly).

    A running bridge's are left to it: the parent of its sandbox that just died holds the
    evidence of an OOM kill until that bridge has read it, and a sweep by another bridge
    starting on the same host at that moment took it (the crash was then reported without its
    cause)."""
    for hierarchy in _hierarchies(root):
        top = hierarchy / _PARENT_ROOT
        if top.is_dir():
            for child in top.iterdir():
                if not _owner_running(child.name, proc):
                    _rmdir_tree(child)


_EVIDENCE_BYTES = 4096
"""Most bytes read back per file from the engine's machine (``memory.events`` is ~100)."""
# Each file's text ("-" when absent), then a NUL: $1 = v2 events, $2 = v1 peak.
_READ_SCRIPT = (
    f'for f in "$1" "$2"; do head -c {_EVIDENCE_BYTES} "$f" 2>/dev/null || printf "-"; '
    'printf "\\0"; done'
)
# Every hierarchy's parent of $1, innermost first; retried while conmon still sits in it.
_REMOVE_SCRIPT = (
    "for i in $(seq 1 100); do left=; for h in /sys/fs/cgroup /sys/fs/cgroup/*; do "
    'd="$h/mcp-bridge/$1"; [ -d "$d" ] || continue; '
    'find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; [ -d "$d" ] && left=1; done; '
    '[ -z "$left" ] && exit 0; sleep 0.02; done; exit 0'
)
# $1: the cgroup root, $2: /proc. As :func:`remove_empty_parents`: a parent whose owner pid
# exists there is left to its bridge (a bridge on the engine's machine still to read its
# evidence; a bridge elsewhere whose pid happens to exist only keeps its parent longer).
_REMOVE_EMPTY_SCRIPT = (
    'for h in "$1" "$1"/*; do for d in "$h"/mcp-bridge/*/; do [ -d "$d" ] || continue; '
    "pid=$(basename \"$d\" | sed -n 's/.*mcp-sandbox-\\([0-9][0-9]*\\)-.*/\\1/p'); "
    '[ -n "$pid" ] && [ -d "$2/$pid" ] && continue; '
    'find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done; done; exit 0'
)


class EngineCgroups:
    """The sandboxes' cgroup parents on the engine's machine: this one's files (``link`` None,
    read in a worker thread) or another machine's, read through the bridge's ssh link."""

    def __init__(self, link: SshLink | None = None) -> None:
        self._link = link

    async def oom_killed(self, name: str, *, memory_limit: int, exit_code: int | None) -> bool:
        """:func:`verdict` on the files of ``name``'s parent; False when they cannot be read."""
        if self._link is None:
            return await anyio.to_thread.run_sync(
                lambda: oom_killed(name, memory_limit=memory_limit, exit_code=exit_code)
            )
        events_path, peak_path = _evidence_paths(name)
        try:
            said = await self._link.run(_READ_SCRIPT, str(events_path), str(peak_path))
        except RuntimeUnavailable:
            return False  # the link is down: no verdict, the exit code is still reported
        parts = said.split(b"\0")
        texts = [
            None if part == b"-" else part[:_EVIDENCE_BYTES].decode("ascii", "replace")
            for part in parts[:2]
        ]
        if len(texts) < 2:
            return False
        return verdict(texts[0], texts[1], memory_limit=memory_limit, exit_code=exit_code)

    async def remove_parent(self, name: str) -> None:
        """:func:`remove_cgroup_parent`, on the engine's machine."""
        if self._link is None:
            await anyio.to_thread.run_sync(remove_cgroup_parent, name)
            return
        await self._run_quietly(_REMOVE_SCRIPT, name)

    async def remove_empty(self) -> None:
        """:func:`remove_empty_parents`, on the engine's machine."""
        if self._link is None:
            await anyio.to_thread.run_sync(remove_empty_parents)
            return
        await self._run_quietly(_REMOVE_EMPTY_SCRIPT, str(CGROUP_ROOT), "/proc")

    async def _run_quietly(self, script: str, *args: str) -> None:
        assert self._link is not None
        try:
            await self._link.run(script, *args)
        except RuntimeUnavailable as exc:
            # Empty parents left now are removed by the next start's sweep.
            logger.debug("could not remove cgroup parents on the engine's machine: %s", exc)
