"""The channel over a container's attached stdio: podman's attach API, hijacked HTTP.

podman-py 5.8 has no attach (``Container.attach()`` and ``attach_socket()`` raise
NotImplementedError: podman/domain/containers.py upstream, containers/podman-py), so this module
speaks the one request itself, on its own connection to the API socket (a local one, or the
local end of the ssh forward to a remote engine, :mod:`._ssh`):

``POST /v4.0.0/libpod/containers/{name}/attach?stdin=true&stdout=true&stderr=true&stream=true``
with ``Connection: Upgrade`` / ``Upgrade: tcp``; podman answers ``101 UPGRADED`` and the
connection becomes the container's stdio (podman's REST API, "Attach to a container"; measured
on 4.3.1). Bytes written go to the container's stdin, unframed. Bytes read arrive in Docker's
multiplexed form, since the container has no terminal: an 8-byte header (stream 1 = stdout,
2 = stderr; three zero bytes; payload length, big-endian) and the payload.

Attaching happens after the container is initialised and before it starts (what ``podman run
-i`` does): the sandbox client's first frame cannot be missed. When the connection closes (the
bridge closed it, died, or the ssh link dropped) conmon closes the container's stdin: the
sandbox client reads EOF and exits (measured for a half-close and a full close).

Every byte here is hostile (the container writes them; podman only frames them):

* nothing is buffered beyond one read: stdout payload is handed to the caller as it comes (the
  protocol decoder above caps frames), stderr payload only feeds a bounded tail kept for error
  messages (:data:`STDERR_TAIL_BYTES`);
* the response head is bounded (:data:`MAX_HEAD_BYTES`) and must be 101 (or 200: the same raw
  stream without the upgrade);
* an unknown stream number or a non-zero padding byte ends the stream: framing is lost;
* there is no peer check, and none is needed: this connection is not accepted from anyone, the
  bridge opened it to the engine, and the engine connects it to the container's own stdio.
  Only that container's processes hold those pipes (its fd 0 and 1, which the sandbox client
  moves away from user code at start).

End of stream (the container exited, or the connection to the engine is gone) is
:class:`anyio.EndOfStream`, which the channel turns into "the sandbox is gone".
"""

from __future__ import annotations

import urllib.parse

import anyio
from anyio.abc import ByteStream, SocketStream

__all__ = ["AttachError", "AttachedStream", "MAX_HEAD_BYTES", "STDERR_TAIL_BYTES", "attach"]

MAX_HEAD_BYTES = 16 * 1024
"""Largest HTTP response head accepted from the API before the stream starts."""
STDERR_TAIL_BYTES = 8 * 1024
"""The end of what the container wrote to stderr, kept for start-failure messages."""
_HEADER = 8
_STDOUT, _STDERR = 1, 2
_READ = 64 * 1024


class AttachError(Exception):
    """The engine refused to attach, or answered something that is not an attach stream."""


class AttachedStream(ByteStream):
    """The container's stdout as a byte stream (stderr set aside), its stdin as the send side."""

    def __init__(self, connection: SocketStream, early: bytes) -> None:
        self._connection = connection
        self._buffer = bytearray(early)
        self._stream = 0
        """The stream of the payload being read (0: a header comes next)."""
        self._left = 0
        """Payload bytes of the current frame not yet read."""
        self._stderr = bytearray()
        self._ended = False

    @property
    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL_BYTES` the container wrote to stderr."""
        return self._stderr.decode("utf-8", errors="replace")

    async def _fill(self) -> None:
        if self._ended:
            raise anyio.EndOfStream
        try:
            data = await self._connection.receive(_READ)
        except anyio.EndOfStream:
            self._ended = True
            raise
        self._buffer += data

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._left == 0:
                while len(self._buffer) < _HEADER:
                    await self._fill()
                header = bytes(self._buffer[:_HEADER])
                del self._buffer[:_HEADER]
                if header[0] not in (_STDOUT, _STDERR) or any(header[1:4]):
                    self._ended = True
                    raise anyio.BrokenResourceError(
                        f"the attach stream lost its framing (header {header.hex()})"
                    )
                self._stream = header[0]
                self._left = int.from_bytes(header[4:], "big")
                continue
            if not self._buffer:
                await self._fill()
            size = min(self._left, len(self._buffer), max_bytes)
            chunk = bytes(self._buffer[:size])
            del self._buffer[:size]
            self._left -= size
            if self._stream == _STDOUT:
                return chunk
            self._stderr += chunk
            del self._stderr[:-STDERR_TAIL_BYTES]

    async def wait_started(self) -> None:
        """Wait until the container wrote its first stdout byte (kept for :meth:`receive`).

        Raises :class:`anyio.EndOfStream` when the stream ends first (the container exited).
        """
        first = await self.receive()
        # Put it back in front, framed again so receive() finds it where it was.
        self._buffer[:0] = bytes([_STDOUT, 0, 0, 0]) + (len(first) + self._left).to_bytes(4, "big")
        self._buffer[_HEADER:_HEADER] = first
        self._left = 0

    async def send(self, item: bytes) -> None:
        await self._connection.send(item)

    async def send_eof(self) -> None:
        await self._connection.send_eof()

    async def aclose(self) -> None:
        await self._connection.aclose()


async def attach(connection: SocketStream, container: str) -> AttachedStream:
    """Attach ``connection`` (a fresh one to the API socket) to ``container``'s stdio.

    Raises :class:`AttachError` naming what the engine answered instead; the connection is
    closed then.
    """
    path = (
        f"/v4.0.0/libpod/containers/{urllib.parse.quote(container, safe='')}/attach"
        "?stdin=true&stdout=true&stderr=true&stream=true"
    )
    request = (
        f"POST {path} HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
        "Content-Length: 0\r\n\r\n"
    )
    try:
        await connection.send(request.encode("ascii"))
        head = bytearray()
        while b"\r\n\r\n" not in head:
            if len(head) > MAX_HEAD_BYTES:
                raise AttachError(f"the engine's answer to attach has no end ({len(head)} bytes)")
            try:
                head += await connection.receive(MAX_HEAD_BYTES)
            except anyio.EndOfStream:
                raise AttachError(
                    f"the engine closed the connection instead of attaching to {container}"
                ) from None
        head_bytes, _, early = bytes(head).partition(b"\r\n\r\n")
        status = head_bytes.split(b"\r\n", 1)[0].decode("latin-1")
        if status.split(" ")[1:2] not in (["101"], ["200"]):
            body = early[:500].decode("utf-8", errors="replace").strip()
            raise AttachError(f"the engine refused to attach to {container}: {status} {body}")
    except BaseException:
        await anyio.aclose_forcefully(connection)
        raise
    return AttachedStream(connection, early)
