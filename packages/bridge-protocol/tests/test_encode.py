"""The encoder refuses, at the sender, every message the peer's decoder would refuse."""

from __future__ import annotations

import datetime
import decimal
from collections import OrderedDict
from typing import Any

import pytest
from bridge_protocol import (
    DEFAULT_MAX_DEPTH,
    Call,
    ErrorCode,
    ErrorInfo,
    FrameDecoder,
    FrameTooLarge,
    Hello,
    InvalidMessage,
    Output,
    Progress,
    ProtocolError,
    Refusal,
    Reply,
    Result,
    encode,
)


def call_with(arguments: Any) -> Call:
    return Call(call_id=1, execution_id="e1", server="fs", tool="read", arguments=arguments)


def nested_lists(levels: int) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"when": datetime.datetime(2024, 1, 1)}, id="datetime"),
        pytest.param({"amount": decimal.Decimal("1.5")}, id="decimal"),
        pytest.param({"tags": {1, 2}}, id="set"),
        pytest.param({"big": 2**64}, id="int-above-64-bits"),
        pytest.param({"small": -(2**64) - 1}, id="int-below-64-bits"),
        pytest.param({"nested": {1: "x"}}, id="non-text-key"),
        pytest.param({"obj": object()}, id="arbitrary-object"),
        pytest.param({"text": "a\udcff"}, id="lone-surrogate"),
        pytest.param({"buffer": bytearray(b"x")}, id="bytearray"),
        pytest.param([1, 2], id="arguments-not-a-map"),
    ],
)
def test_values_the_wire_cannot_carry_are_refused_before_encoding(arguments: Any) -> None:
    with pytest.raises(InvalidMessage):
        encode(call_with(arguments))


def test_invalid_message_is_a_protocol_error_and_a_value_error() -> None:
    with pytest.raises(ProtocolError):
        encode(call_with({"tags": {1}}))
    with pytest.raises(ValueError, match="set"):
        encode(call_with({"tags": {1}}))


def test_nesting_deeper_than_the_peer_accepts_is_refused_at_the_sender() -> None:
    # The message map is level 1, the arguments map level 2: 30 lists reach exactly 32.
    at_limit = call_with({"v": nested_lists(DEFAULT_MAX_DEPTH - 2)})
    assert FrameDecoder().feed(encode(at_limit)) == [at_limit]
    with pytest.raises(InvalidMessage, match="deeper"):
        encode(call_with({"v": nested_lists(DEFAULT_MAX_DEPTH - 1)}))


def test_a_self_containing_argument_is_refused_not_a_recursion_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidMessage):
        encode(call_with({"loop": loop}))


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(Output("e1", "stdin", "x"), id="bad-literal"),  # type: ignore[arg-type]
        pytest.param(Output("e1", "stdout", b"x"), id="bytes-for-text"),  # type: ignore[arg-type]
        pytest.param(Progress("e1", float("nan")), id="nan-progress"),
        pytest.param(Hello(versions=(1, -1)), id="negative-version"),
        pytest.param(Hello(versions="1"), id="text-for-array"),  # type: ignore[arg-type]
        pytest.param(Result("e1", "error", None, "boom"), id="text-for-record"),  # type: ignore[arg-type]
        pytest.param(Reply(1, None, ErrorInfo("E", "m")), id="wrong-record-type"),  # type: ignore[arg-type]
    ],
)
def test_wrong_field_types_are_refused_before_encoding(message: Any) -> None:
    with pytest.raises(InvalidMessage):
        encode(message)


def test_objects_that_are_not_protocol_messages_are_refused() -> None:
    with pytest.raises(InvalidMessage):
        encode(ErrorInfo("E", "m"))  # type: ignore[arg-type]


def test_a_frame_above_the_maximum_is_refused_at_the_sender() -> None:
    message = Output("e1", "stdout", "x" * 2000)
    with pytest.raises(FrameTooLarge):
        encode(message, max_frame_size=1000)
    assert FrameDecoder().feed(encode(message)) == [message]


def test_more_items_than_the_peer_accepts_are_refused_at_the_sender() -> None:
    with pytest.raises(InvalidMessage, match="CBOR items"):
        encode(Reply(call_id=1, value=[0] * 2000), max_items=1000)
    assert FrameDecoder().feed(encode(Reply(call_id=1, value=[0] * 2000))) == [
        Reply(call_id=1, value=[0] * 2000)
    ]


def test_error_code_enums_go_out_as_plain_integers() -> None:
    frame = encode(Refusal(ErrorCode.UNSUPPORTED_VERSION, "no", (1,)))
    (decoded,) = FrameDecoder().feed(frame)
    assert isinstance(decoded, Refusal)
    assert type(decoded.code) is int
    assert decoded.code == 103


def test_tuples_and_mappings_in_arguments_go_out_as_arrays_and_maps() -> None:
    sent = call_with(OrderedDict(pair=(1, "a"), inner=OrderedDict(k=[True, None])))
    (decoded,) = FrameDecoder().feed(encode(sent))
    assert isinstance(decoded, Call)
    assert decoded.arguments == {"pair": [1, "a"], "inner": {"k": [True, None]}}


def test_a_frame_is_a_big_endian_length_then_the_cbor_map() -> None:
    frame = encode(Output("e1", "stdout", "hi"))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert frame[4] >> 5 == 5  # CBOR major type 5: a map
