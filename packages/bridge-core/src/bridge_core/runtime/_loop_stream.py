"""A sandbox's channel socket served by an asyncio transport, read as it comes.

anyio's socket stream (``anyio/_backends/_asyncio.py``, ``UNIXSocketStream`` in anyio 4.16)
yields to the event loop before every ``send`` and every ``receive`` (``checkpoint()``: a whole
loop iteration even when the bytes are already there), and each wait for readable bytes
registers the socket with epoll and removes it again; asyncio formats the socket's repr for the
``KeyError`` of that lookup, two more system calls (``getsockname``, ``getpeername``). A warm
call reads and writes the channel a few times: measured with strace, that was 4 of its 11 loop
iterations and 8 of its system calls on the host.

Here, on asyncio, the socket is handed to the loop once (``connect_accepted_socket``): the
transport reads whatever arrives into a :class:`asyncio.StreamReader`, ``receive`` returns
buffered bytes without a loop iteration, ``send`` gives a whole frame to the transport, which
writes it at once when the socket takes it. Bounds stay: the reader stops reading the socket past
:data:`BUFFER_LIMIT` buffered bytes (asyncio pauses at twice the limit), so a flooding sandbox
makes the host hold no more than that; a send waits while the transport holds more than its
high-water mark, so a sandbox that stops reading still blocks its sender (whose deadline the
channel bounds). A receive that finds bytes waiting still honours cancellation
(``checkpoint_if_cancelled``). Skipping the loop turn must not let one sandbox starve the loop: a
task that goes on receiving buffered bytes and sending replies (a sandbox flooding pings answers
itself one pong each, a system call apiece, all from one buffer) gives the loop a turn once it
has moved :data:`TURN_BUDGET` bytes without waiting (each send counts :data:`SEND_COST` more).

A connection lost to an error (the sandbox exited with bytes of ours unread, so the kernel resets
it; or a write found it closed) still lets the bytes read before it be received: only then does
the stream end, as a socket's own reads would (an asyncio reader would raise the error at once
and drop them: the sandbox's last output and result).

On trio (or any other backend) the anyio stream is kept as it is.
"""

from __future__ import annotations

import asyncio
import socket

import anyio
import anyio.lowlevel
from anyio.abc import ByteStream, SocketAttribute, SocketStream

__all__ = ["BUFFER_LIMIT", "SEND_COST", "TURN_BUDGET", "LoopSocketStream", "served_by_loop"]

BUFFER_LIMIT = 64 * 1024
"""The reader's limit: reading the socket pauses past twice this many unread bytes."""
TURN_BUDGET = 64 * 1024
"""Bytes received and sent without waiting after which a receive or send yields a loop turn (as
anyio's stream did before each read of up to 64 KiB)."""
SEND_COST = 1024
"""What a send counts beyond its bytes: its system call (a flood of tiny replies must yield too)."""


class _Protocol(asyncio.StreamReaderProtocol):
    """A stream reader protocol whose lost connection ends the reader only after its bytes."""

    lost: Exception | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        # asyncio's sets the error on the reader, which then raises it before its buffered bytes
        self.lost = exc
        super().connection_lost(None)


class LoopSocketStream(ByteStream):
    """A connected socket read and written through an asyncio transport."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, protocol: _Protocol
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._protocol = protocol
        self._closed = False
        self._budget = TURN_BUDGET

    async def _checkpoint(self, cost: int) -> None:
        """Cancellation honoured; a loop turn once the budget is spent (see the module doc)."""
        self._budget -= cost
        if self._budget < 0:
            self._budget = TURN_BUDGET
            await anyio.lowlevel.checkpoint()
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._closed:
            raise anyio.ClosedResourceError
        await self._checkpoint(0)
        data = await self._reader.read(max_bytes)
        if not data:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._protocol.lost is not None:
                raise anyio.BrokenResourceError from self._protocol.lost
            raise anyio.EndOfStream
        self._budget -= len(data)
        return data

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        await self._checkpoint(len(item) + SEND_COST)
        if self._closed:  # closed by another task during the turn
            raise anyio.ClosedResourceError
        writer = self._writer
        if writer.is_closing():
            raise anyio.BrokenResourceError
        writer.write(item)  # whole: a cancelled sender never leaves half a frame behind
        try:
            await writer.drain()  # returns at once unless the transport is over its mark
        except ConnectionError as exc:
            raise anyio.BrokenResourceError from exc

    def send_at_once(self, item: bytes) -> bool:
        """Give ``item`` whole to the transport now, if that needs no wait: True; False (nothing
        written) when :meth:`send` must do it (the stream is closed or closing, the transport
        still holds bytes, ``item`` is past its high-water mark, or the turn budget is spent).

        No checkpoint: the caller honours cancellation first (a frame is sent whole or not at
        all either way)."""
        writer = self._writer
        transport = writer.transport
        cost = len(item) + SEND_COST
        if (
            self._closed
            or writer.is_closing()
            or transport.get_write_buffer_size()
            or len(item) > transport.get_write_buffer_limits()[1]
            or self._budget < cost
        ):
            return False
        self._budget -= cost
        writer.write(item)  # at most the mark stays queued: send() would not wait for it either
        return True

    async def send_eof(self) -> None:
        self._writer.write_eof()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        transport = self._writer.transport
        if transport.get_write_buffer_size():
            # A graceful close would keep the socket open until a peer that does not read took
            # it all; anyio's stream never holds written bytes, so nothing it promised is lost.
            transport.abort()
        else:
            transport.close()  # the socket closes on the loop's next iteration
        self._reader.feed_eof()  # a receive waiting now returns (and raises Closed)


async def served_by_loop(stream: SocketStream) -> ByteStream:
    """``stream`` on an asyncio transport when the loop is asyncio's; else ``stream`` itself.

    The anyio stream is closed (also when this fails or is cancelled); a duplicate of its socket
    goes to the transport.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio's loop (trio)
        return stream
    own: socket.socket | None = None
    try:
        own = stream.extra(SocketAttribute.raw_socket).dup()  # EMFILE: the stream still closes
        own.setblocking(False)
        reader = asyncio.StreamReader(limit=BUFFER_LIMIT, loop=loop)
        protocol = _Protocol(reader, loop=loop)
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, own)
    except BaseException:
        if own is not None:
            own.close()
        await anyio.aclose_forcefully(stream)
        raise
    await stream.aclose()
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return LoopSocketStream(reader, writer, protocol)
