"""A sandbox's init process held as a pidfd, so shutdown can kill every sandbox at once.

Killing through the podman API costs two OCI-runtime executions per container (state, kill):
measured on a 2-core VM, 128 kills took 4.8-7.5 s, more than MCP clients give a server to exit.
SIGKILL to the container's init from the host kills its whole pid namespace; podman then sees the
exit and its auto-removal deletes the container. A pidfd (Linux >= 5.3) names the process itself,
not a number that could be reused. The process is only trusted to be the container's init when
its cgroup path names the container's id, which also rules out a runtime in another pid
namespace (a VM, a remote host): there the pid means nothing here and the API is used instead.

The same descriptor tells a start that waits for the sandbox's connection when the sandbox died
first (it turns readable when the process exits: no polling of the API while the sandbox's
Python starts), and keeps the init's pid trustworthy for the peer check of that connection.
"""

from __future__ import annotations

import os
import select
import signal
from dataclasses import dataclass
from pathlib import Path

import anyio

__all__ = ["HeldInit", "open_init", "send_kill"]


@dataclass(frozen=True, slots=True)
class HeldInit:
    """A container's init process: its pidfd and the pid it was opened for."""

    fd: int
    pid: int

    def alive(self) -> bool:
        """Whether the process has not exited (a pidfd turns readable when it does)."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return not poller.poll(0)

    async def exited(self) -> None:
        """Return once the process has exited (cancellable; the fd must stay open meanwhile)."""
        await anyio.wait_readable(self.fd)


def open_init(pid: int, container_id: str, *, proc: Path = Path("/proc")) -> int | None:
    """A pidfd for ``pid`` if it is a process of container ``container_id``, else None."""
    if pid <= 0 or not container_id or not hasattr(os, "pidfd_open"):
        return None
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already, or no pidfd support
        return None
    # Checked after opening: if the pid was reused before pidfd_open, the cgroup says so; after
    # it, the fd keeps naming the process we checked.
    try:
        cgroups = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        cgroups = ""
    if container_id not in cgroups:
        os.close(fd)
        return None
    return fd


def send_kill(fd: int) -> bool:
    """SIGKILL the process; True when it is dead or dying (False: not permitted)."""
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return True
