"""A bounded ring buffer of a server process's stderr, fed from a pipe without threads.

Everything it hands out is masked with the server's :class:`~bridge_core.redaction.Redactor`
*before* it is cut: a stderr tail is cut from the front of the server's output, so a secret could
straddle the cut and show its end, which no later replacement of the whole secret would find.
"""

from __future__ import annotations

import logging
import os
from typing import TextIO

import anyio

from bridge_core.redaction import Redactor

__all__ = ["StderrTail"]

logger = logging.getLogger("bridge_core.proxy.stderr")

_READ_CHUNK = 64 * 1024
_MAX_LOGGED_LINE = 4096
"""A longer stderr line is logged as its head (the ring buffer keeps its end for crash reports)."""


class StderrTail:
    """The write end goes to the child as its stderr (the SDK's ``stdio_client(errlog=)`` needs a
    real file); :meth:`pump` reads the other end until EOF, keeping the last ``limit`` bytes."""

    def __init__(self, server: str, limit: int, redactor: Redactor | None = None) -> None:
        self._server = server
        self._limit = limit
        self._redactor = redactor or Redactor()
        self._buffer = bytearray()
        self._dropped = False
        self._line = bytearray()
        """The line being written, logged once it ends (a chunk can end inside a secret)."""
        self._skipping = False
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._read_fd: int | None = read_fd
        self.writer: TextIO = os.fdopen(write_fd, "w")
        self.eof = anyio.Event()

    def close_writer(self) -> None:
        """Drop the parent's copy of the write end once the child holds it, so EOF can happen."""
        if not self.writer.closed:
            self.writer.close()

    async def pump(self) -> None:
        """Read until EOF (every holder of the write end has exited) or cancellation."""
        assert self._read_fd is not None
        fd = self._read_fd
        try:
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                self._append(chunk)
        finally:
            self.eof.set()
            self._read_fd = None
            os.close(fd)
            self.close_writer()

    def _append(self, chunk: bytes) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            self._log_lines(chunk)
        self._buffer += chunk
        if len(self._buffer) > self._limit:
            del self._buffer[: len(self._buffer) - self._limit]
            self._dropped = True

    def _log_lines(self, chunk: bytes) -> None:
        *ended, rest = chunk.split(b"\n")
        for part in ended:
            line, self._line = self._line + part, bytearray()
            if self._skipping:  # the end of a line whose head was logged already
                self._skipping = False
            else:
                self._log(line[:_MAX_LOGGED_LINE], cut=len(line) > _MAX_LOGGED_LINE)
        if self._skipping:
            return
        self._line += rest
        if len(self._line) > _MAX_LOGGED_LINE:
            self._log(self._line[:_MAX_LOGGED_LINE], cut=True)
            self._line = bytearray()
            self._skipping = True

    def _log(self, line: bytes | bytearray, *, cut: bool) -> None:
        text = self._redactor.text(line.decode(errors="replace").rstrip(), cut_back=cut)
        logger.debug("%s stderr: %s%s", self._server, text, " [line cut]" if cut else "")

    def tail(self, max_chars: int = 2000) -> str:
        """The last ``max_chars`` characters, masked, starting at a line boundary when possible."""
        text = self._redactor.text(self._buffer.decode(errors="replace"), cut_front=self._dropped)
        if len(text) > max_chars or self._dropped:
            text = text[-max_chars:]
            newline = text.find("\n")
            if 0 <= newline < len(text) - 1:
                text = text[newline + 1 :]
        return text.strip()

    def discard(self) -> None:
        """Close both ends when :meth:`pump` never ran (spawn failed)."""
        self.close_writer()
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None
