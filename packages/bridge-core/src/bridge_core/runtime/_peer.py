"""Who connected to a channel socket: the sandbox, or someone else.

The socket sits in a directory tree only the bridge's user can enter (see :mod:`._channel`), so
normally nothing but the sandbox can reach it. This is the second line: before the bridge reads
one byte of a connection, the kernel's record of the process that called ``connect(2)``
(``SO_PEERCRED``: pid, effective uid and gid at connect time, which the peer cannot forge) must
match the sandbox it expects. A container's process must run as the uid of the container's first
process and live in the container's pid namespace; a local sandbox must be the very process the
bridge spawned.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from anyio.abc import SocketAttribute, SocketStream

__all__ = ["PeerCredentials", "container_peer_problem", "peer_credentials", "process_peer_problem"]

PROC = Path("/proc")
_UCRED = struct.Struct("3i")  # struct ucred: pid_t pid; uid_t uid; gid_t gid


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """The connecting process as the kernel recorded it (in the bridge's pid/user namespace)."""

    pid: int
    uid: int
    gid: int

    def __str__(self) -> str:
        return f"pid {self.pid} (uid {self.uid}, gid {self.gid})"


def peer_credentials(stream: SocketStream) -> PeerCredentials:
    """``SO_PEERCRED`` of a connected unix socket stream."""
    sock: socket.socket = stream.extra(SocketAttribute.raw_socket)
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return PeerCredentials(*_UCRED.unpack(raw))


def _effective_uid(proc: Path, pid: int) -> int | None:
    try:
        status = (proc / str(pid) / "status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()  # Uid: real effective saved filesystem
            return int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None
    return None


def _pid_namespace(proc: Path, pid: int) -> str:
    """``pid:[inode]``; raises PermissionError (no ptrace-read right) or FileNotFoundError."""
    return os.readlink(proc / str(pid) / "ns" / "pid")


def container_peer_problem(
    peer: PeerCredentials, container_pid: int, *, proc: Path = PROC
) -> str | None:
    """None when ``peer`` is a process of the container whose first process has host pid
    ``container_pid`` (from the runtime's inspect); otherwise why not, in a few words.

    The uid must be the container's (65534 rootful, its mapped subordinate uid rootless), and the
    pid namespace the container's. A bridge allowed to read neither namespace (not root, and not
    the owner of the container's user namespace: rootful podman reached through a shared socket)
    checks the uid alone.
    """
    if peer.pid <= 0:
        return "the kernel gives no pid for it (a process the bridge cannot see)"
    if container_pid <= 0:
        return "the runtime reports no process for the container"
    expected_uid = _effective_uid(proc, container_pid)
    if expected_uid is None:
        return f"the container's first process {container_pid} is not visible in {proc}"
    if peer.uid != expected_uid:
        return f"it runs as uid {peer.uid}, the sandbox as uid {expected_uid}"
    try:
        expected_ns = _pid_namespace(proc, container_pid)
    except PermissionError:
        return None  # the uid matched; the namespaces are not ours to read
    except FileNotFoundError:
        return "the container's first process exited"
    try:
        namespace = _pid_namespace(proc, peer.pid)
    except PermissionError:
        return "its pid namespace cannot be read, so it cannot be shown to be the sandbox"
    except FileNotFoundError:
        return "it exited before it could be checked"
    if namespace != expected_ns:
        return "it is not a process of the sandbox's container (another pid namespace)"
    return None


def process_peer_problem(peer: PeerCredentials, pid: int) -> str | None:
    """None when ``peer`` is process ``pid`` of this user (the local backend's sandbox)."""
    if peer.uid != os.geteuid():
        return f"it runs as uid {peer.uid}, the sandbox as uid {os.geteuid()}"
    if peer.pid != pid:
        return f"it is not the sandbox process {pid}"
    return None
