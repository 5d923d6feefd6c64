"""Sans-IO framing: messages → bytes, bytes (in any chunking) → messages.

A frame is a 4-byte big-endian length followed by one CBOR map. No sockets, threads or asyncio
here: adapters for anyio (host) and blocking sockets (sandbox) live in the other packages.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterator

import cbor2

from bridge_protocol._validate import message_from_untrusted, message_to_wire
from bridge_protocol.errors import FrameTooLarge, MalformedFrame
from bridge_protocol.messages import Message

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "DEFAULT_MAX_DEPTH", "FrameDecoder", "encode"]

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
DEFAULT_MAX_DEPTH = 32
_HEADER = struct.Struct(">I")


def encode(message: Message) -> bytes:
    """Encode one message as a complete frame (length prefix + CBOR map)."""
    body = cbor2.dumps(message_to_wire(message))
    return _HEADER.pack(len(body)) + body


class FrameDecoder:
    """Incremental decoder: :meth:`feed` bytes as they arrive, get complete messages back.

    ``accept`` restricts which message kinds are valid (e.g. ``SANDBOX_TO_HOST`` on the host).
    After a :class:`~bridge_protocol.errors.ProtocolError` the decoder is unusable: the stream is
    out of sync and the peer must be dropped.
    """

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        accept: Collection[str] | None = None,
    ) -> None:
        self.max_frame_size = max_frame_size
        self.max_depth = max_depth
        self.accept = frozenset(accept) if accept is not None else None
        self._buffer = bytearray()
        self._expected: int | None = None
        self._failed = False

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Message]:
        """Add bytes; return every message completed by them (possibly none)."""
        return list(self._iter_feed(data))

    def _iter_feed(self, data: bytes) -> Iterator[Message]:
        if self._failed:
            raise MalformedFrame("decoder already failed; the stream is out of sync")
        self._buffer += data
        try:
            while True:
                if self._expected is None:
                    if len(self._buffer) < _HEADER.size:
                        return
                    (length,) = _HEADER.unpack_from(self._buffer)
                    if length > self.max_frame_size:
                        raise FrameTooLarge(
                            f"frame of {length} bytes exceeds the maximum of {self.max_frame_size}"
                        )
                    if length == 0:
                        raise MalformedFrame("empty frame")
                    del self._buffer[: _HEADER.size]
                    self._expected = length
                if len(self._buffer) < self._expected:
                    return
                body = bytes(self._buffer[: self._expected])
                del self._buffer[: self._expected]
                self._expected = None
                yield self._decode_body(body)
        except Exception:
            self._failed = True
            raise

    def _decode_body(self, body: bytes) -> Message:
        try:
            untrusted = cbor2.loads(
                body,
                max_depth=self.max_depth,
                allow_indefinite=False,
                allow_duplicate_keys=False,
            )
        except (cbor2.CBORDecodeError, ValueError, RecursionError, OverflowError) as exc:
            raise MalformedFrame(f"invalid CBOR: {exc}") from None
        return message_from_untrusted(untrusted, accept=self.accept)
