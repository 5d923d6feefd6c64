"""Bytes from the sandbox are untrusted: every bad frame is a ProtocolError, with bounded memory."""

from __future__ import annotations

import struct
from typing import Any

import cbor2
import pytest
from bridge_protocol import (
    HOST_TO_SANDBOX,
    SANDBOX_TO_HOST,
    ErrorCode,
    FrameDecoder,
    FrameTooLarge,
    MalformedFrame,
    Output,
    Ping,
    ProtocolError,
    UnknownMessageKind,
    encode,
)


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def cbor_frame(value: object) -> bytes:
    return frame(cbor2.dumps(value))


OUTPUT = {"kind": "output", "execution_id": "e1", "stream": "stdout", "text": "hi"}


def test_a_valid_hand_built_frame_decodes() -> None:
    # Guards the helpers above: the hostile variants below differ from this in one way each.
    assert FrameDecoder().feed(cbor_frame(OUTPUT)) == [Output("e1", "stdout", "hi")]


# --- framing ----------------------------------------------------------------------------------


def test_oversized_length_prefix_is_rejected_from_the_header_alone() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(struct.pack(">I", 1025))
    assert caught.value.code == ErrorCode.FRAME_TOO_LARGE
    assert decoder.buffered == 0


def test_maximum_size_frame_is_accepted_and_one_more_byte_is_not() -> None:
    body = cbor2.dumps({**OUTPUT, "text": "x" * 100})
    assert FrameDecoder(max_frame_size=len(body)).feed(frame(body)) == [
        Output("e1", "stdout", "x" * 100)
    ]
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_size=len(body) - 1).feed(frame(body))


def test_a_4_gib_length_prefix_with_the_default_limit_buffers_nothing() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\xff\xff\xff\xff" + b"\x00" * 1000)
    assert decoder.buffered == 0


def test_buffering_never_exceeds_the_declared_frame_plus_its_prefix() -> None:
    body = cbor2.dumps({**OUTPUT, "text": "y" * 50_000})
    data = frame(body) * 3
    decoder = FrameDecoder()
    decoded = []
    for start in range(0, len(data), 7_777):
        decoded += decoder.feed(data[start : start + 7_777])
        assert decoder.buffered <= len(body) + 4
    assert len(decoded) == 3


def test_zero_length_frame_is_malformed() -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(b"\x00\x00\x00\x00")


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 20])
def test_a_stream_ending_inside_a_frame_is_reported_at_end_of_stream(cut: int) -> None:
    data = cbor_frame(OUTPUT)
    decoder = FrameDecoder()
    assert decoder.feed(data[:cut]) == []
    with pytest.raises(MalformedFrame):
        decoder.end_of_stream()


def test_end_of_stream_between_frames_is_clean() -> None:
    decoder = FrameDecoder()
    decoder.feed(cbor_frame(OUTPUT))
    decoder.end_of_stream()


def test_truncated_body_inside_a_complete_frame_is_malformed() -> None:
    body = cbor2.dumps(OUTPUT)
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body[:-3]))


def test_trailing_bytes_after_the_map_inside_a_frame_are_malformed() -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(cbor2.dumps(OUTPUT) + b"\x01"))


def test_two_cbor_items_in_one_frame_are_malformed() -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(cbor2.dumps(OUTPUT) * 2))


def test_a_failed_decoder_refuses_further_input_even_if_valid() -> None:
    decoder = FrameDecoder()
    with pytest.raises(MalformedFrame):
        decoder.feed(b"\x00\x00\x00\x01\xff")
    assert decoder.failed
    with pytest.raises(MalformedFrame):
        decoder.feed(cbor_frame(OUTPUT))


def _reply_holding(items: bytes, count: int) -> bytes:
    # {"kind": "reply", "call_id": 1, "value": [<count items>]}: 7 items before the array's own.
    return frame(b"\xa3dkindereplygcall_id\x01evalue\x9a" + count.to_bytes(4, "big") + items)


def test_a_frame_of_more_items_than_the_limit_is_refused_before_decoding() -> None:
    with pytest.raises(MalformedFrame, match="more than 1000 CBOR items"):
        FrameDecoder(max_items=1000).feed(_reply_holding(b"\x80" * 2000, 2000))


def test_a_frame_of_exactly_the_item_limit_decodes() -> None:
    count = 1000 - 7  # the map, its 3 keys, 2 scalar values and the array: 7, then the elements
    (reply,) = FrameDecoder(max_items=1000).feed(_reply_holding(b"\xa0" * count, count))
    assert reply.value == [{}] * count  # type: ignore[union-attr]
    with pytest.raises(MalformedFrame):
        FrameDecoder(max_items=999).feed(_reply_holding(b"\xa0" * count, count))


def test_two_million_empty_arrays_in_one_frame_are_refused_with_default_limits() -> None:
    # Decoded, this would be about 150 MB of Python lists for a 2 MiB frame.
    count = 2 * 1024 * 1024
    with pytest.raises(MalformedFrame, match="CBOR items"):
        FrameDecoder().feed(_reply_holding(b"\x80" * count, count))


def test_a_big_byte_string_is_one_item_however_long() -> None:
    data = b"\x00" * 3_000_000
    body = cbor2.dumps({"kind": "display", "execution_id": "e", "mime": "image/png", "data": data})
    (display,) = FrameDecoder(max_items=100).feed(frame(body))
    assert display.data == data  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "declared",
    [
        pytest.param(b"\x5b\xff\xff\xff\xff\xff\xff\xff\xff", id="bytes-2**64"),
        pytest.param(b"\x7a\xff\xff\xff\xf0", id="text-4-gib"),
        pytest.param(b"\x9b\x00\x00\x00\xff\xff\xff\xff\xff", id="array-2**40"),
        pytest.param(b"\xbb\x00\x00\x00\xff\xff\xff\xff\xff", id="map-2**40"),
    ],
)
def test_absurd_declared_lengths_inside_a_small_frame_are_malformed(declared: bytes) -> None:
    body = b"\xa3dkindereplygcall_id\x01evalue" + declared + b"\x00" * 16
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


# --- CBOR features the protocol forbids -------------------------------------------------------


def test_nesting_beyond_max_depth_is_malformed() -> None:
    value: object = 1
    for _ in range(40):
        value = [value]
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(cbor_frame({"kind": "reply", "call_id": 1, "value": value}))


def test_nesting_exactly_at_max_depth_is_accepted() -> None:
    value: object = 1
    for _ in range(4):  # map (1) + 4 arrays = depth 5
        value = [value]
    decoded = FrameDecoder(max_depth=5).feed(
        cbor_frame({"kind": "reply", "call_id": 1, "value": value})
    )
    assert decoded[0].value == [[[[1]]]]  # type: ignore[union-attr]
    with pytest.raises(MalformedFrame):
        FrameDecoder(max_depth=4).feed(cbor_frame({"kind": "reply", "call_id": 1, "value": value}))


def test_a_hundred_thousand_nested_arrays_is_malformed_not_a_crash() -> None:
    body = b"\xa2dkindereplygcall_id\x01" + b"\x81" * 100_000 + b"\x01"
    with pytest.raises(MalformedFrame):
        FrameDecoder(max_depth=10**6).feed(frame(body))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\xbf" + cbor2.dumps("kind")[0:] + b"\x64ping\xff", id="indefinite-map"),
        pytest.param(
            b"\xa3"
            + cbor2.dumps("kind")
            + cbor2.dumps("shutdown")
            + cbor2.dumps("reason")
            + b"\x7f\x61a\x61b\xff",
            id="indefinite-text",
        ),
        pytest.param(b"\xa3dkindereplygcall_id\x01evalue\x9f\x01\x02\xff", id="indefinite-array"),
    ],
)
def test_indefinite_length_items_are_malformed(body: bytes) -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


def test_duplicate_keys_are_malformed() -> None:
    body = b"\xa3dkinddpingenonce\x01enonce\x02"
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


def test_duplicate_keys_inside_json_values_are_malformed() -> None:
    body = b"\xa3dkindereplygcall_id\x01evalue\xa2aa\x01aa\x02"
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


# Tags that cbor2 would otherwise turn into objects: datetimes (0, 1), bignum (2), decimal (4),
# shared references that can build cycles (28/29), regex (35), set (258), the self-describe marker
# that cbor2 silently strips (55799), and tags nobody registered.
TAGGED = {
    "0-datetime": cbor2.CBORTag(0, "2024-01-01T00:00:00Z"),
    "1-epoch": cbor2.CBORTag(1, 1700000000),
    "2-bignum": cbor2.CBORTag(2, b"\x01\x00"),
    "3-negative-bignum": cbor2.CBORTag(3, b"\x01\x00"),
    "4-decimal": cbor2.CBORTag(4, [-2, 12345]),
    "35-regex": cbor2.CBORTag(35, "a+"),
    "36-mime": cbor2.CBORTag(36, "Content-Type: text/plain\n\nhi"),
    "37-uuid": cbor2.CBORTag(37, b"\x00" * 16),
    "258-set": cbor2.CBORTag(258, [1, 2]),
    "256-stringref-namespace": cbor2.CBORTag(256, "x"),
    "55799-self-describe": cbor2.CBORTag(55799, "x"),
    "unknown-4242": cbor2.CBORTag(4242, "x"),
    "unknown-64-bit": cbor2.CBORTag(2**63, "x"),
}


@pytest.mark.parametrize("tagged", TAGGED.values(), ids=TAGGED.keys())
@pytest.mark.parametrize("where", ["json-value", "message-field", "whole-frame"])
def test_every_cbor_tag_is_malformed(tagged: cbor2.CBORTag, where: str) -> None:
    if where == "json-value":
        data = cbor_frame({"kind": "reply", "call_id": 1, "value": [tagged]})
    elif where == "message-field":
        data = cbor_frame({**OUTPUT, "text": tagged})
    else:
        data = cbor_frame(cbor2.CBORTag(tagged.tag, OUTPUT))
    with pytest.raises(MalformedFrame, match=f"tag {tagged.tag}"):
        FrameDecoder().feed(data)


def test_shared_reference_cycle_is_malformed() -> None:
    # 28(array[29(0)]): an array that contains itself.
    body = b"\xa3dkindereplygcall_id\x01evalue" + b"\xd8\x1c\x81\xd8\x1d\x00"
    with pytest.raises(MalformedFrame, match=r"tag 2[89]"):
        FrameDecoder().feed(frame(body))


def test_no_tag_number_in_the_first_65536_or_the_registered_high_ones_is_accepted() -> None:
    # A sweep, so a cbor2 upgrade that adds a built-in decoder for some tag cannot slip through.
    for tag in [*range(65536), 55799, 55800, 1_000_000, 2**32, 2**64 - 1]:
        head = cbor2.dumps(cbor2.CBORTag(tag, None))[:-1]
        body = b"\xa2dkinddpingenonce" + head + b"\x01"
        with pytest.raises(MalformedFrame):
            FrameDecoder().feed(frame(body))


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({1: "x"}, id="int-key"),
        pytest.param({b"kind": "x"}, id="bytes-key"),
        pytest.param({1.5: "x"}, id="float-key"),
        pytest.param({None: "x"}, id="null-key"),
    ],
)
@pytest.mark.parametrize("where", ["top-level", "json-value"])
def test_non_text_map_keys_are_malformed(value: dict[object, str], where: str) -> None:
    if where == "top-level":
        data = cbor_frame({"kind": "ping", "nonce": 1, **value})
    else:
        data = cbor_frame({"kind": "reply", "call_id": 1, "value": {"ok": [value]}})
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(data)


def test_array_map_key_is_malformed() -> None:
    body = b"\xa3dkinddpingenonce\x01\x81\x01\x01"  # {..., [1]: 1}
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


@pytest.mark.parametrize(
    "simple", [b"\xf7", b"\xe0", b"\xf8\x20"], ids=["undefined", "simple-0", "simple-32"]
)
def test_cbor_simple_values_other_than_null_and_booleans_are_malformed(simple: bytes) -> None:
    body = b"\xa3dkindereplygcall_id\x01evalue" + simple
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


def test_invalid_utf8_text_is_malformed() -> None:
    body = b"\xa2dkindhshutdownfreasonb\xc3\x28"
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(frame(body))


# --- shape of the map ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([1, 2], id="array"),
        pytest.param("text", id="text"),
        pytest.param(None, id="null"),
        pytest.param({"nonce": 1}, id="no-kind"),
        pytest.param({"kind": 7, "nonce": 1}, id="kind-not-text"),
        pytest.param({"kind": "ping"}, id="missing-field"),
        pytest.param({"kind": "ping", "nonce": 1, "extra": 2}, id="unknown-field"),
        pytest.param({"kind": "ping", "nonce": "1"}, id="text-for-int"),
        pytest.param({"kind": "ping", "nonce": True}, id="bool-for-int"),
        pytest.param({"kind": "ping", "nonce": 1.0}, id="float-for-int"),
        pytest.param({"kind": "ping", "nonce": -1}, id="negative-id"),
        pytest.param({**OUTPUT, "stream": "stdin"}, id="bad-literal"),
        pytest.param({**OUTPUT, "text": b"hi"}, id="bytes-for-text"),
        pytest.param({**OUTPUT, "execution_id": None}, id="null-for-required-text"),
        pytest.param(
            {"kind": "display", "execution_id": "e", "mime": "m", "data": "x"}, id="text-for-bytes"
        ),
        pytest.param({"kind": "hello", "versions": 1}, id="int-for-array"),
        pytest.param({"kind": "hello", "versions": ["1"]}, id="text-in-int-array"),
        pytest.param(
            {"kind": "progress", "execution_id": "e", "progress": "half"}, id="text-for-number"
        ),
        pytest.param(
            {"kind": "progress", "execution_id": "e", "progress": float("nan")}, id="nan-progress"
        ),
        pytest.param(
            {"kind": "progress", "execution_id": "e", "progress": float("inf")}, id="inf-progress"
        ),
        pytest.param(
            {
                "kind": "call",
                "call_id": 1,
                "execution_id": "e",
                "server": "s",
                "tool": "t",
                "arguments": [1],
            },
            id="array-for-arguments",
        ),
        pytest.param(
            {"kind": "result", "execution_id": "e", "status": "ok", "error": "boom"},
            id="text-for-record",
        ),
        pytest.param(
            {"kind": "result", "execution_id": "e", "status": "ok", "error": {"type": "E"}},
            id="record-missing-field",
        ),
        pytest.param(
            {
                "kind": "result",
                "execution_id": "e",
                "status": "ok",
                "error": {"type": "E", "message": "m", "x": 1},
            },
            id="record-unknown-field",
        ),
        pytest.param(
            {"kind": "reply", "call_id": 1, "fault": {"code": 1, "message": "m", "": 0}},
            id="record-empty-key",
        ),
    ],
)
def test_wrong_shapes_and_field_types_are_malformed(value: object) -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder().feed(cbor_frame(value))


def test_unknown_message_kind_is_its_own_error() -> None:
    with pytest.raises(UnknownMessageKind) as caught:
        FrameDecoder().feed(cbor_frame({"kind": "teleport"}))
    assert caught.value.code == ErrorCode.UNKNOWN_MESSAGE_KIND


def test_host_side_decoder_refuses_host_to_sandbox_kinds() -> None:
    decoder = FrameDecoder(accept=SANDBOX_TO_HOST)
    assert decoder.feed(encode(Ping(1))) == [Ping(1)]
    with pytest.raises(UnknownMessageKind):
        decoder.feed(cbor_frame({"kind": "execute", "execution_id": "e", "code": "1"}))


def test_sandbox_side_decoder_refuses_sandbox_to_host_kinds() -> None:
    with pytest.raises(UnknownMessageKind):
        FrameDecoder(accept=HOST_TO_SANDBOX).feed(cbor_frame(OUTPUT))


def test_every_error_is_a_protocol_error_with_a_wire_code() -> None:
    for exc_type in (MalformedFrame, FrameTooLarge, UnknownMessageKind):
        assert issubclass(exc_type, ProtocolError)
        assert isinstance(exc_type.code, ErrorCode)


@pytest.mark.parametrize(
    "limits",
    [{"max_frame_size": 0}, {"max_frame_size": 2**32}, {"max_depth": 0}, {"max_items": 0}],
)
def test_decoder_limits_outside_their_range_are_refused(limits: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(limits))):
        FrameDecoder(**limits)
