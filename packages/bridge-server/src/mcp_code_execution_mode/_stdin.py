"""The client's stdin as async lines that a shutdown can interrupt.

Why not the SDK's default: ``stdio_server`` reads stdin with a blocking ``readline`` in a worker
thread that cancellation cannot stop, so a SIGTERM while the client still holds the pipe open
(a supervisor stopping the bridge) cleaned up and then hung forever waiting for one more line.
Reading the pipe non-blocking on the event loop lets cancellation end the read at once.

The client's bytes are untrusted in shape: each byte is scanned once for the newline, and a line
longer than :data:`MAX_LINE` is skipped (its bytes dropped as they come) and stands as a short
line that is not JSON, which the server answers with a JSON-RPC parse error.
"""

from __future__ import annotations

import codecs
import fcntl
import logging
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

__all__ = ["MAX_LINE", "SKIPPED", "interruptible_stdin"]

logger = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
MAX_LINE = 32 * 1024 * 1024
"""Longest request line read from the client: no request larger than the sandbox's 16 MiB frame
can be run, and this leaves room for JSON escaping."""
SKIPPED = f"<a request line longer than {MAX_LINE // (1024 * 1024)} MiB was skipped>\n"


class _Lines:
    """Async iteration over the lines of a non-blocking fd (the shape ``stdio_server`` reads)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        scanned = 0  # bytes of the buffer known to hold no newline
        skipping = False  # inside a line past MAX_LINE: its bytes are dropped
        while True:
            newline = self._buffer.find(b"\n", scanned)
            if newline >= 0:
                if skipping:
                    line, skipping = SKIPPED, False
                else:  # decoded straight from the buffer: no copy of the bytes first
                    with memoryview(self._buffer) as view:
                        line = codecs.decode(view[: newline + 1], "utf-8", "replace")
                del self._buffer[: newline + 1]
                scanned = 0
                yield line
                continue
            if len(self._buffer) > MAX_LINE:
                if not skipping:
                    logger.warning("skipping a request line longer than %d bytes", MAX_LINE)
                skipping = True
                self._buffer.clear()
            scanned = len(self._buffer)
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _READ_CHUNK)
            except BlockingIOError:
                continue
            if not chunk:  # the client closed its end
                if skipping:
                    yield SKIPPED
                elif self._buffer:
                    yield self._buffer.decode("utf-8", errors="replace")
                return
            self._buffer += chunk


@asynccontextmanager
async def interruptible_stdin() -> AsyncIterator[_Lines | None]:
    """Claim fd 0 (it points at the null device meanwhile, as the SDK does, so children and
    handlers read EOF) and yield its lines; ``None`` when stdin cannot be polled (a regular
    file, ``/dev/null``), where the SDK's own reader is the right one: it never blocks there."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        yield None
        return
    # epoll refuses regular files and most character devices (/dev/null): EPERM.
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(0)):
        yield None
        return
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    was_blocking = os.get_blocking(private)
    os.set_blocking(private, False)
    try:
        yield _Lines(private)
    finally:
        # The flag lives on the shared open file: give the restored fd 0 its old mode back.
        os.set_blocking(private, was_blocking)
        os.dup2(private, 0)
        os.close(private)
