"""A large frame's body received in place (``body_target`` / ``body_received``): the same
messages as ``feed``, every bound kept, and a hostile body still refused."""

from __future__ import annotations

import struct

import cbor2
import pytest
from bridge_protocol import (
    HOST_TO_SANDBOX,
    FrameDecoder,
    FrameTooLarge,
    MalformedFrame,
    Message,
    Ping,
    ProtocolError,
    Restore,
    encode,
)

STATE = bytes(range(256)) * 4096  # 1 MiB


def _receive(decoder: FrameDecoder, data: bytes, piece: int) -> list[object]:
    """What a reader does: feed until a large body is due, then receive it in place."""
    messages: list[object] = []
    pos = 0
    while pos < len(data):
        target = decoder.body_target(64 * 1024)
        if target is None:
            messages += decoder.feed(data[pos : pos + piece])
            pos += piece
            continue
        size = min(len(target), piece, len(data) - pos)
        target[:size] = data[pos : pos + size]
        pos += size
        messages += [message for message, _ in decoder.body_received(size)]
    return messages


@pytest.mark.parametrize("piece", [1000, 65_536, 300_001, 5_000_000])
def test_restore_frames_received_in_place_decode_as_when_fed(piece: int) -> None:
    frames: list[Message] = [
        Restore("r", data=STATE),
        Ping(1),
        Restore("r", data=STATE[:10]),
        Restore("r", last=True),
    ]
    data = b"".join(encode(message) for message in frames)
    decoder = FrameDecoder(accept=HOST_TO_SANDBOX)
    assert _receive(decoder, data, piece) == frames
    assert decoder.buffered == 0
    decoder.end_of_stream()


def test_no_buffer_is_made_for_a_body_not_due_or_too_short() -> None:
    decoder = FrameDecoder()
    assert decoder.body_target(1) is None  # no frame begun
    decoder.feed(struct.pack(">I", 1000))
    assert decoder.body_target(1001) is None  # less than asked for is due
    target = decoder.body_target(1000)
    assert target is not None
    assert len(target) == 1000


def test_a_declared_length_past_the_limit_is_refused_before_any_buffer() -> None:
    decoder = FrameDecoder(max_frame_size=1 << 20)
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">I", (1 << 20) + 1))
    assert decoder.body_target(1) is None
    assert decoder.buffered == 0


def test_a_hostile_body_received_in_place_is_refused_and_the_decoder_stays_failed() -> None:
    for body in (
        cbor2.dumps({"kind": "restore", "restore_id": "r", "data": STATE, "extra": 1}),
        cbor2.dumps({"kind": "restore", "restore_id": "r", "data": STATE}) + b"\x00",
        cbor2.dumps({"kind": "snapshot", "snapshot_id": "s", "data": STATE}),  # wrong direction
        cbor2.dumps(cbor2.CBORTag(24, {"kind": "restore", "restore_id": "r", "data": STATE})),
        b"\x9f" + b"\x80" * len(STATE) + b"\xff",  # indefinite array of empty arrays
    ):
        decoder = FrameDecoder(accept=HOST_TO_SANDBOX)
        decoder.feed(struct.pack(">I", len(body)) + body[:100])
        target = decoder.body_target(1024)
        assert target is not None
        assert len(target) == len(body) - 100
        target[:] = body[100:]
        with pytest.raises(ProtocolError):
            decoder.body_received(len(target))
        assert decoder.failed
        with pytest.raises(MalformedFrame):
            decoder.feed(encode(Ping(1)))


def test_a_stream_ending_inside_a_body_received_in_place_is_malformed() -> None:
    decoder = FrameDecoder(accept=HOST_TO_SANDBOX)
    frame = encode(Restore("r", data=STATE))
    decoder.feed(frame[:10])
    target = decoder.body_target(1024)
    assert target is not None
    target[:500] = frame[10:510]
    assert decoder.body_received(500) == []
    assert decoder.buffered == 506  # the body bytes so far (the prefix is read)
    with pytest.raises(MalformedFrame, match="stream ended inside a frame"):
        decoder.end_of_stream()


def test_more_bytes_than_the_target_holds_are_refused() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", 100))
    target = decoder.body_target(1)
    assert target is not None
    with pytest.raises(ValueError, match="body_target"):
        decoder.body_received(101)
