"""Every message kind survives encode → decode, however the byte stream is cut into chunks."""

from __future__ import annotations

import itertools
from typing import Any

from bridge_protocol import (
    HOST_TO_SANDBOX,
    MESSAGE_TYPES,
    SANDBOX_TO_HOST,
    Call,
    CancelCall,
    Display,
    ErrorInfo,
    Execute,
    Fault,
    FrameDecoder,
    Hello,
    Interrupt,
    Message,
    Output,
    Ping,
    Pong,
    Progress,
    Refusal,
    Reply,
    Request,
    Resave,
    Restore,
    Restored,
    Result,
    Shutdown,
    Snapshot,
    SnapshotCopy,
    Welcome,
    encode,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

uints = st.integers(min_value=0, max_value=2**64 - 1)
finite = st.floats(allow_nan=False, allow_infinity=False)
ids = st.text(min_size=1, max_size=40)

# NaN is excluded only because NaN != NaN would make equality checks meaningless.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)
json_maps = st.dictionaries(st.text(), json_values, max_size=6)

error_infos = st.builds(ErrorInfo, type=st.text(), message=st.text(), traceback=st.text())
faults = st.builds(Fault, code=uints, message=st.text(), data=json_values)

MESSAGE_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "hello": st.builds(
        Hello, versions=st.lists(uints, max_size=5).map(tuple), client_version=st.text()
    ),
    "welcome": st.builds(Welcome, version=uints, session=st.text()),
    "refusal": st.builds(
        Refusal, code=uints, message=st.text(), supported=st.lists(uints, max_size=5).map(tuple)
    ),
    "execute": st.builds(Execute, execution_id=ids, code=st.text(), repr_limit=uints),
    "output": st.builds(
        Output, execution_id=ids, stream=st.sampled_from(["stdout", "stderr"]), text=st.text()
    ),
    "display": st.builds(Display, execution_id=ids, mime=st.text(), data=st.binary()),
    "progress": st.builds(
        Progress,
        execution_id=ids,
        progress=finite,
        total=st.none() | finite,
        message=st.none() | st.text(),
    ),
    "result": st.builds(
        Result,
        execution_id=ids,
        status=st.sampled_from(["ok", "error", "interrupted", "timeout"]),
        value=st.none() | st.text(),
        error=st.none() | error_infos,
    ),
    "interrupt": st.builds(Interrupt, execution_id=ids),
    "call": st.builds(
        Call, call_id=uints, execution_id=ids, server=st.text(), tool=st.text(), arguments=json_maps
    ),
    "request": st.builds(
        Request, call_id=uints, execution_id=ids, method=st.text(), params=json_maps
    ),
    "cancel": st.builds(CancelCall, call_id=uints),
    "reply": st.builds(Reply, call_id=uints, value=json_values, fault=st.none() | faults),
    "ping": st.builds(Ping, nonce=uints),
    "pong": st.builds(Pong, nonce=uints),
    "shutdown": st.builds(Shutdown, reason=st.text()),
    "snapshot": st.builds(
        Snapshot,
        snapshot_id=ids,
        data=st.binary(),
        last=st.booleans(),
        unsaved=st.lists(st.text(), max_size=3).map(tuple),
        error=st.text(),
    ),
    "snapshot_copy": st.builds(SnapshotCopy, snapshot_id=ids, base=ids, offset=uints, length=uints),
    "restore": st.builds(Restore, restore_id=ids, data=st.binary(), last=st.booleans()),
    "restored": st.builds(Restored, restore_id=ids, error=st.text()),
    "resave": st.builds(Resave, reason=st.text()),
}

any_message: st.SearchStrategy[Message] = st.one_of(*MESSAGE_STRATEGIES.values())


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def test_every_message_kind_has_a_strategy() -> None:
    assert set(MESSAGE_STRATEGIES) == set(MESSAGE_TYPES)


def test_directions_cover_every_kind_and_share_only_liveness() -> None:
    assert set(MESSAGE_TYPES) == SANDBOX_TO_HOST | HOST_TO_SANDBOX
    assert {"ping", "pong"} == SANDBOX_TO_HOST & HOST_TO_SANDBOX


@given(message=any_message)
def test_each_message_round_trips_in_one_chunk(message: Message) -> None:
    assert FrameDecoder().feed(encode(message)) == [message]


@given(message=any_message)
@settings(max_examples=50)
def test_each_message_round_trips_one_byte_at_a_time(message: Message) -> None:
    frame = encode(message)
    decoder = FrameDecoder()
    decoded: list[Message] = []
    for i in range(len(frame)):
        decoded += decoder.feed(frame[i : i + 1])
        if i < len(frame) - 1:
            assert decoded == []
    assert decoded == [message]
    assert decoder.buffered == 0


@given(messages=st.lists(any_message, min_size=1, max_size=8), cuts=st.lists(st.integers(0)))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_a_stream_of_messages_round_trips_under_random_splits(
    messages: list[Message], cuts: list[int]
) -> None:
    stream = b"".join(encode(m) for m in messages)
    decoder = FrameDecoder()
    decoded: list[Message] = []
    for chunk in _chunks(stream, cuts):
        decoded += decoder.feed(chunk)
    assert decoded == messages
    decoder.end_of_stream()


@given(messages=st.lists(any_message, min_size=2, max_size=20))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_many_frames_in_one_chunk_all_come_out_in_order(messages: list[Message]) -> None:
    stream = b"".join(encode(m) for m in messages)
    assert FrameDecoder().feed(stream) == messages


@given(message=any_message, split=st.integers(min_value=0))
def test_feeding_a_memoryview_or_bytearray_works_like_bytes(message: Message, split: int) -> None:
    frame = encode(message)
    cut = split % (len(frame) + 1)
    decoder = FrameDecoder()
    decoded = decoder.feed(bytearray(frame[:cut])) + decoder.feed(memoryview(frame)[cut:])
    assert decoded == [message]


@given(message=MESSAGE_STRATEGIES["result"] | MESSAGE_STRATEGIES["reply"])
def test_nested_records_come_back_as_their_classes(message: Result | Reply) -> None:
    (decoded,) = FrameDecoder().feed(encode(message))
    assert isinstance(decoded, Result | Reply)
    nested = decoded.error if isinstance(decoded, Result) else decoded.fault
    expected = ErrorInfo if isinstance(decoded, Result) else Fault
    assert nested is None or type(nested) is expected


def test_a_large_display_frame_round_trips_when_fed_in_socket_sized_chunks() -> None:
    image = bytes(range(256)) * (4 * 1024 * 1024 // 256)
    frame = encode(Display(execution_id="e1", mime="image/png", data=image))
    decoder = FrameDecoder()
    decoded: list[Message] = []
    for start in range(0, len(frame), 65536):
        decoded += decoder.feed(frame[start : start + 65536])
        assert decoder.buffered <= len(frame)
    assert decoded == [Display(execution_id="e1", mime="image/png", data=image)]
