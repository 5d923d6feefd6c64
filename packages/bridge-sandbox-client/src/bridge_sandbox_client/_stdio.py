"""The channel over the process's own stdin and stdout, for engines with no shared filesystem.

A remote podman (or any engine that can stream a process's stdio: podman attach, a Kubernetes
exec or agent-sandbox's in-pod daemon) carries the same frames as the unix socket, on fds 0 and
1 of this process. They are moved to fds of their own at once: fd 0 then reads as empty and
fd 1 goes to the container log (fd 2) until output capture replaces it with a pipe, so nothing
user code prints or a library writes to stdout can ever reach the channel.

:class:`StdioPipes` offers the few socket methods :class:`~._channel.Channel` uses, over the
two pipe fds; only the handshake reads with a timeout (``poll``), like the socket's.
"""

from __future__ import annotations

import os
import select
import socket

__all__ = ["StdioPipes"]


class StdioPipes:
    """The host's end of the channel as the conmon-held pipes on fds 0 and 1."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._timeout: float | None = None

    @classmethod
    def take_stdio(cls) -> StdioPipes:
        """Move fds 0 and 1 to new fds (close-on-exec: no child inherits the channel) and leave
        0 reading /dev/null and 1 writing to stderr."""
        read_fd = os.dup(0)
        write_fd = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        return cls(read_fd, write_fd)

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def _wait_readable(self) -> None:
        if self._timeout is None:
            return
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        if not poller.poll(self._timeout * 1000):
            raise TimeoutError("the host did not answer on stdin in time")

    def recv(self, size: int) -> bytes:
        self._wait_readable()
        return os.read(self._read_fd, size)

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        self._wait_readable()
        return os.readv(self._read_fd, [buffer])

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._write_fd, view) :]

    def shutdown(self, how: int) -> None:
        # Closing our write end is the host's EOF; the read end goes with close().
        if how in (socket.SHUT_WR, socket.SHUT_RDWR):
            self._close_fd("_write_fd")

    def close(self) -> None:
        self._close_fd("_write_fd")
        self._close_fd("_read_fd")

    def _close_fd(self, attribute: str) -> None:
        fd = getattr(self, attribute)
        if fd >= 0:
            setattr(self, attribute, -1)
            try:
                os.close(fd)
            except OSError:
                pass
