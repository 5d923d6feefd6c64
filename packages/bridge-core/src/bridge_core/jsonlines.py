"""Newline-delimited JSON-RPC framing (MCP's stdio transport), sans-IO: bytes in, lines out.

Both stdio directions of the bridge split lines here: each upstream server's stdout
(:mod:`bridge_core.proxy._stdio`) and the bridge's own stdin, the MCP client's requests
(``mcp_code_execution_mode._stdio``). Their I/O is anyio's; this holds no I/O at all.

Why not the SDK's: its stdio transports re-split their whole text buffer on every chunk
(``(buffer + chunk).split("\\n")``), without a bound on a line (``docs/sdk-upstream.md``). Here
each byte is scanned once for the newline, and a line longer than the bound is reported as soon
as it passes it (:data:`OVERLONG`); its bytes are then dropped as they come, up to its newline,
so the splitter holds at most one bound's worth plus one chunk. What an over-long line means is
the caller's: the proxy cuts the server's connection, the server answers a parse error.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["OVERLONG", "LineSplitter", "Overlong"]


class Overlong(enum.Enum):
    """The type of :data:`OVERLONG`."""

    OVERLONG = "a line past the bound"


OVERLONG: Final = Overlong.OVERLONG
"""What :meth:`LineSplitter.next` returns (once) for a line past the bound."""


class LineSplitter:
    """Lines of a byte stream fed in chunks, each at most ``max_line`` bytes long."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._scanned = 0
        """Bytes of the buffer known to hold no newline: each byte is scanned once."""
        self._skipping = False
        """Inside a line already reported over-long: its bytes are dropped up to its newline."""

    @property
    def buffered(self) -> int:
        """Bytes held of a line not yet complete."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream (none of them are lost: :meth:`next` them all)."""
        if self._skipping:
            newline = data.find(b"\n")
            if newline < 0:
                return
            self._skipping = False
            data = data[newline + 1 :]
        self._buffer += data

    def next(self) -> bytearray | Overlong | None:
        """The next complete line without its newline, :data:`OVERLONG` once for a line past
        the bound, or None until more bytes come."""
        buffer = self._buffer
        newline = buffer.find(b"\n", self._scanned)
        if newline < 0:
            self._scanned = len(buffer)
            if len(buffer) > self.max_line:
                buffer.clear()
                self._scanned = 0
                self._skipping = True
                return OVERLONG
            return None
        self._scanned = 0
        if newline > self.max_line:  # the newline came in the chunk that passed the bound
            del buffer[: newline + 1]
            return OVERLONG
        if newline == len(buffer) - 1:  # the line is the whole buffer: handed over, no copy
            del buffer[newline:]
            self._buffer = bytearray()
            return buffer
        line = buffer[:newline]
        del buffer[: newline + 1]  # O(1) from the front of a bytearray
        return line

    def end(self) -> bytearray | None:
        """At the end of the stream: the last line when it lacks its newline (None when nothing
        is left, or the rest was an over-long line, already reported)."""
        rest, self._buffer, self._scanned = self._buffer, bytearray(), 0
        self._skipping = False
        return rest or None
