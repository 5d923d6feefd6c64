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
(``checkpoint_if_cancelled``), and cannot starve the loop: the buffer it drains is refilled only
by the loop.

On trio (or any other backend) the anyio stream is kept as it is.
"""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
from anyio.abc import ByteStream, SocketAttribute, SocketStream

__all__ = ["BUFFER_LIMIT", "LoopSocketStream", "served_by_loop"]

BUFFER_LIMIT = 64 * 1024
"""The reader's limit: reading the socket pauses past twice this many unread bytes."""


class LoopSocketStream(ByteStream):
    """A connected socket read and written through an asyncio transport."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._closed:
            raise anyio.ClosedResourceError
        await anyio.lowlevel.checkpoint_if_cancelled()
        data = await self._reader.read(max_bytes)
        if not data:
            if self._closed:
                raise anyio.ClosedResourceError
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        await anyio.lowlevel.checkpoint_if_cancelled()
        writer = self._writer
        if writer.is_closing():
            raise anyio.BrokenResourceError
        writer.write(item)  # whole: a cancelled sender never leaves half a frame behind
        try:
            await writer.drain()  # returns at once unless the transport is over its mark
        except ConnectionError as exc:
            raise anyio.BrokenResourceError from exc

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
    own = stream.extra(SocketAttribute.raw_socket).dup()
    try:
        own.setblocking(False)
        reader = asyncio.StreamReader(limit=BUFFER_LIMIT, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, own)
    except BaseException:
        own.close()
        await anyio.aclose_forcefully(stream)
        raise
    await stream.aclose()
    return LoopSocketStream(reader, asyncio.StreamWriter(transport, protocol, reader, loop))
