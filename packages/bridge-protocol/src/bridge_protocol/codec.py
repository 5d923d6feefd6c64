"""Sans-IO framing: messages → bytes, bytes (in any chunking) → messages.

A frame is a 4-byte big-endian length followed by exactly one CBOR map of that many bytes. No
sockets, threads or asyncio here: adapters for anyio (host) and blocking sockets (sandbox) live in
the other packages.
"""

from __future__ import annotations

import struct
from collections.abc import Collection

from bridge_protocol._cbor import check_item_count, dumps, loads_untrusted
from bridge_protocol._validate import message_from_untrusted, message_to_wire
from bridge_protocol.errors import FrameTooLarge, InvalidMessage, MalformedFrame, ProtocolError
from bridge_protocol.messages import Message

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_ITEMS",
    "HEADER_SIZE",
    "FrameDecoder",
    "encode",
]

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
"""Largest frame body accepted by default (16 MiB): room for a 4 MB plot or a big tool result."""
DEFAULT_MAX_DEPTH = 32
"""Deepest container nesting accepted by default; the message map itself is level 1."""
DEFAULT_MAX_ITEMS = 1 << 20
"""Most CBOR data items (map keys included) one frame may hold by default: bounds the memory a
frame can decode into (about 80 MB of Python objects at worst) whatever its byte size."""
HEADER_SIZE = 4
"""Bytes of the big-endian unsigned length prefix in front of every frame body."""
_HEADER = struct.Struct(">I")
_LARGEST_LENGTH = 2**32 - 1


def encode(
    message: Message,
    *,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> bytes:
    """Encode one message as a complete frame (length prefix + CBOR map).

    The message is checked against the same rules the peer's decoder applies, so an impossible
    value fails here, at the sender: :class:`~bridge_protocol.errors.InvalidMessage` for a value
    the wire cannot carry, nesting beyond ``max_depth`` or more than ``max_items`` CBOR items, and
    :class:`~bridge_protocol.errors.FrameTooLarge` for a body above ``max_frame_size``.
    """
    body = dumps(message_to_wire(message, max_depth=max_depth))
    if len(body) > min(max_frame_size, _LARGEST_LENGTH):
        raise FrameTooLarge(
            f"{type(message).KIND} frame of {len(body)} bytes exceeds the maximum of "
            f"{max_frame_size}"
        )
    try:
        check_item_count(body, max_items)
    except MalformedFrame as exc:
        raise InvalidMessage(f"{type(message).KIND}: {exc}") from None
    return _HEADER.pack(len(body)) + body


class FrameDecoder:
    """Incremental decoder: :meth:`feed` bytes as they arrive, get complete messages back.

    ``accept`` restricts which message kinds are valid (e.g. ``SANDBOX_TO_HOST`` on the host);
    others raise :class:`~bridge_protocol.errors.UnknownMessageKind`. Only
    :class:`~bridge_protocol.errors.ProtocolError` subclasses are ever raised for bad input.
    After one, the decoder is unusable (the stream is out of sync) and the peer must be dropped.

    Memory: it holds at most one partial frame, never more than ``HEADER_SIZE`` plus the frame's
    declared length, and a declared length above ``max_frame_size`` is refused from the 4-byte
    prefix alone, before any body byte is kept. A frame holding more than ``max_items`` CBOR items
    is refused before it is decoded (decoding tiny items amplifies memory about 70 times).
    """

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_items: int = DEFAULT_MAX_ITEMS,
        accept: Collection[str] | None = None,
    ) -> None:
        if not 1 <= max_frame_size <= _LARGEST_LENGTH:
            raise ValueError(f"max_frame_size must be in 1..2**32-1, got {max_frame_size}")
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth}")
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, got {max_items}")
        self.max_frame_size = max_frame_size
        self.max_depth = max_depth
        self.max_items = max_items
        self.accept = frozenset(accept) if accept is not None else None
        self._header = bytearray()
        self._body = bytearray()
        self._expected: int | None = None
        self._direct: bytearray | None = None
        """The body being received in place (see :meth:`body_target`), ``_filled`` bytes of it."""
        self._filled = 0
        self._failed = False

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame (prefix bytes included)."""
        return len(self._header) + len(self._body) + self._filled

    def body_target(self, at_least: int) -> memoryview | None:
        """Where the rest of the current frame's body goes, when at least ``at_least`` bytes of
        it are still to come (else None): a reader receives into it directly (``recv_into``)
        and reports with :meth:`body_received`, instead of staging the bytes and feeding them.

        The buffer is the declared length of a frame whose prefix was already checked against
        ``max_frame_size``: what it holds is bounded as with :meth:`feed`. It is not allocated
        before at least ``at_least`` body bytes are due.
        """
        if self._failed or self._expected is None:
            return None
        expected = self._expected
        if self._direct is None:
            if expected - len(self._body) < at_least:
                return None
            direct = bytearray(expected)
            self._filled = len(self._body)
            direct[: self._filled] = self._body
            self._direct, self._body = direct, bytearray()
        return memoryview(self._direct)[self._filled :]

    def body_received(self, size: int) -> list[tuple[Message, int]]:
        """``size`` more bytes were written into the last :meth:`body_target`: the message
        they complete, with its frame size (or none yet). Raises like :meth:`feed_frames`."""
        if self._failed:
            raise MalformedFrame("decoder already failed; the stream is out of sync")
        if self._direct is None or not 0 <= size <= len(self._direct) - self._filled:
            raise ValueError("body_received() without a body_target() of that size")
        try:
            return self._advance(size)
        except ProtocolError:
            self._failed = True
            raise

    @property
    def failed(self) -> bool:
        """True once a :class:`~bridge_protocol.errors.ProtocolError` was raised."""
        return self._failed

    def feed(self, data: bytes | bytearray | memoryview) -> list[Message]:
        """Add bytes; return every message completed by them, in order (possibly none).

        If ``data`` completes some frames and then holds an invalid one, the error is raised and
        the messages before it are not returned: the peer is being dropped anyway.
        """
        return [message for message, _ in self.feed_frames(data)]

    def feed_frames(self, data: bytes | bytearray | memoryview) -> list[tuple[Message, int]]:
        """Like :meth:`feed`, with each message's frame size in bytes (prefix included): what
        a receiver holding the message for a while accounts for."""
        if self._failed:
            raise MalformedFrame("decoder already failed; the stream is out of sync")
        try:
            return self._feed(memoryview(data).cast("B"))
        except ProtocolError:
            self._failed = True
            raise

    def end_of_stream(self) -> None:
        """Call when the peer closed the stream: ``MalformedFrame`` if a frame was cut off."""
        if self._header or self._expected is not None:
            self._failed = True
            if self._expected is None:
                got = f"{len(self._header)} of the {HEADER_SIZE} length-prefix bytes"
            else:
                got = f"{len(self._body) + self._filled} of {self._expected} body bytes"
            raise MalformedFrame(f"stream ended inside a frame: got {got}")

    def _feed(self, view: memoryview) -> list[tuple[Message, int]]:
        messages: list[tuple[Message, int]] = []
        pos, end = 0, len(view)
        if (direct := self._direct) is not None and end:  # a body being received in place
            take = min(len(direct) - self._filled, end)
            direct[self._filled : self._filled + take] = view[:take]
            pos = take
            messages.extend(self._advance(take))
        while pos < end:
            if self._expected is None:
                take = min(HEADER_SIZE - len(self._header), end - pos)
                self._header += view[pos : pos + take]
                pos += take
                if len(self._header) < HEADER_SIZE:
                    break
                (length,) = _HEADER.unpack(self._header)
                self._header.clear()
                self._expected = self._check_length(length)
            expected = self._expected
            if not self._body and end - pos >= expected:
                # The whole body is in this chunk: decode it in place, without buffering.
                body: bytearray | memoryview = view[pos : pos + expected]
                pos += expected
            else:
                take = min(expected - len(self._body), end - pos)
                self._body += view[pos : pos + take]
                pos += take
                if len(self._body) < expected:
                    break
                body, self._body = self._body, bytearray()
            messages.append(self._complete(body))
        return messages

    def _advance(self, size: int) -> list[tuple[Message, int]]:
        assert self._direct is not None
        self._filled += size
        if self._filled < len(self._direct):
            return []
        body, self._direct, self._filled = self._direct, None, 0
        return [self._complete(body)]

    def _complete(self, body: bytearray | memoryview) -> tuple[Message, int]:
        """Decode a whole body (its frame's prefix was read): the message and its frame size."""
        self._expected = None
        check_item_count(body, self.max_items)
        untrusted = loads_untrusted(body, max_depth=self.max_depth)
        message = message_from_untrusted(untrusted, accept=self.accept)
        return message, HEADER_SIZE + len(body)

    def _check_length(self, length: int) -> int:
        if length > self.max_frame_size:
            raise FrameTooLarge(
                f"frame of {length} bytes exceeds the maximum of {self.max_frame_size}"
            )
        if length == 0:
            raise MalformedFrame("empty frame: a frame holds one CBOR map")
        return length
