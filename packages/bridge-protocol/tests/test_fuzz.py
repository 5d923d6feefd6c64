"""Arbitrary bytes never make the decoder raise anything but a ProtocolError.

The fast variants run by default; the ``slow`` ones repeat them with a large example count.
"""

from __future__ import annotations

import os
import struct

import cbor2
import pytest
from bridge_protocol import (
    Call,
    Display,
    ErrorInfo,
    Execute,
    Fault,
    FrameDecoder,
    Hello,
    Output,
    Progress,
    ProtocolError,
    Reply,
    Result,
    encode,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SEED_FRAMES = [
    encode(m)
    for m in (
        Hello(versions=(1, 2)),
        Execute(execution_id="e1", code="print(1)"),
        Output(execution_id="e1", stream="stderr", text="boom\n"),
        Display(execution_id="e1", mime="image/png", data=b"\x89PNG"),
        Progress(execution_id="e1", progress=0.5, total=1.0, message="half"),
        Result("e1", "error", None, ErrorInfo("ValueError", "bad", "Traceback ...")),
        Call(1, "e1", "fs", "read_file", {"path": "/x", "opts": [1, 2.5, None, True]}),
        Reply(2, None, Fault(202, "tool failed", {"detail": b"\x00"})),
    )
]

# Bodies built from CBOR values that are well-formed but arbitrary, wrapped in a correct prefix:
# random bytes alone rarely get past the first CBOR byte, these reach the validator.
cbor_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.sampled_from(["kind", "hello", "reply", "result", "call", "output", "execution_id"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            inner.filter(lambda v: isinstance(v, (str, bytes, int))), inner, max_size=4
        )
        | st.builds(cbor2.CBORTag, st.integers(min_value=0, max_value=2**64 - 1), inner)
    ),
    max_leaves=15,
)


def _mutate(frame: bytes, edits: list[tuple[int, int]]) -> bytes:
    data = bytearray(frame)
    for position, value in edits:
        data[position % len(data)] = value
    return bytes(data)


def _decode_all(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame_size=1 << 16)
    try:
        for start in range(0, len(data), chunk):
            decoder.feed(data[start : start + chunk])
            assert decoder.buffered <= (1 << 16) + 4
        decoder.end_of_stream()
    except ProtocolError:
        pass


def _random_bytes(data: bytes, chunk: int) -> None:
    _decode_all(data, chunk)


def _mutated_frames(seed: int, edits: list[tuple[int, int]], chunk: int) -> None:
    frame = SEED_FRAMES[seed % len(SEED_FRAMES)]
    _decode_all(_mutate(frame, edits), chunk)


def _arbitrary_cbor(value: object, chunk: int) -> None:
    try:
        body = cbor2.dumps(value)
    except Exception:  # a value cbor2 cannot encode says nothing about our decoder
        return
    _decode_all(struct.pack(">I", len(body)) + body, chunk)


random_bytes = given(data=st.binary(max_size=512), chunk=st.integers(1, 64))
mutated_frames = given(
    seed=st.integers(0),
    edits=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), min_size=1, max_size=6),
    chunk=st.integers(1, 64),
)
arbitrary_cbor = given(value=cbor_values, chunk=st.integers(1, 64))
FAST = settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
# BRIDGE_SLOW_EXAMPLES: .ci/run's short run of the slow tests; the full count stays on demand.
SLOW = settings(
    max_examples=int(os.environ.get("BRIDGE_SLOW_EXAMPLES", 20_000)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FAST
@random_bytes
def test_random_bytes_raise_only_protocol_errors(data: bytes, chunk: int) -> None:
    _random_bytes(data, chunk)


@FAST
@mutated_frames
def test_mutated_valid_frames_raise_only_protocol_errors(
    seed: int, edits: list[tuple[int, int]], chunk: int
) -> None:
    _mutated_frames(seed, edits, chunk)


@FAST
@arbitrary_cbor
def test_arbitrary_well_formed_cbor_raises_only_protocol_errors(value: object, chunk: int) -> None:
    _arbitrary_cbor(value, chunk)


@pytest.mark.slow
@SLOW
@random_bytes
def test_random_bytes_raise_only_protocol_errors_at_scale(data: bytes, chunk: int) -> None:
    _random_bytes(data, chunk)


@pytest.mark.slow
@SLOW
@mutated_frames
def test_mutated_valid_frames_raise_only_protocol_errors_at_scale(
    seed: int, edits: list[tuple[int, int]], chunk: int
) -> None:
    _mutated_frames(seed, edits, chunk)


@pytest.mark.slow
@SLOW
@arbitrary_cbor
def test_arbitrary_well_formed_cbor_raises_only_protocol_errors_at_scale(
    value: object, chunk: int
) -> None:
    _arbitrary_cbor(value, chunk)
