"""The host channel adapter: handshake, framing over a byte stream, untrusted bytes."""

from __future__ import annotations

import anyio
import bridge_protocol
import pytest
from bridge_core.channel import Channel, ChannelClosed, UnexpectedMessage
from bridge_protocol import (
    HOST_TO_SANDBOX,
    ErrorCode,
    FrameDecoder,
    FrameTooLarge,
    Hello,
    Output,
    ProtocolError,
    Refusal,
    UnsupportedVersion,
    Welcome,
    encode,
)

from .conftest import byte_stream_pair


async def test_handshake_answers_hello_with_the_highest_common_version() -> None:
    host, sandbox = byte_stream_pair()
    channel = Channel(host)
    await sandbox.send(encode(Hello(versions=(1, 7), client_version="x")))
    assert await channel.handshake("s1") == 1
    (welcome,) = FrameDecoder(accept=HOST_TO_SANDBOX).feed(await sandbox.receive())
    assert welcome == Welcome(version=1, session="s1")


async def test_handshake_without_a_common_version_refuses_and_closes() -> None:
    host, sandbox = byte_stream_pair()
    channel = Channel(host)
    await sandbox.send(encode(Hello(versions=(99,), client_version="9.0")))
    with pytest.raises(UnsupportedVersion, match=r"'9.0' speaks protocol \[99\].*NEWER"):
        await channel.handshake()
    (refusal,) = FrameDecoder(accept=HOST_TO_SANDBOX).feed(await sandbox.receive())
    assert isinstance(refusal, Refusal)
    assert refusal.code == ErrorCode.UNSUPPORTED_VERSION
    assert channel.closed


async def test_an_older_sandbox_client_is_named_older() -> None:
    host, sandbox = byte_stream_pair()
    await sandbox.send(encode(Hello(versions=(0,), client_version="0.0.1")))
    with pytest.raises(UnsupportedVersion, match=r"speaks protocol \[0\].*OLDER than this"):
        await Channel(host).handshake()


async def test_handshake_requires_hello_first() -> None:
    host, sandbox = byte_stream_pair()
    await sandbox.send(encode(Output("x", "stdout", "early")))
    with pytest.raises(UnexpectedMessage) as raised:
        await Channel(host).handshake()
    assert raised.value.code == ErrorCode.UNEXPECTED_MESSAGE


def test_unexpected_message_is_the_protocols_class() -> None:
    """One definition: a handler catching the protocol's class catches the channel's raise."""
    assert UnexpectedMessage is bridge_protocol.UnexpectedMessage


async def test_frames_split_across_reads_and_packed_together_are_decoded() -> None:
    host, sandbox = byte_stream_pair()
    channel = Channel(host)
    frames = b"".join(encode(Output("e", "stdout", str(i))) for i in range(3))
    for i in range(0, len(frames), 5):
        await sandbox.send(frames[i : i + 5])
    received = [await channel.receive() for _ in range(3)]
    assert [m.text for m in received if isinstance(m, Output)] == ["0", "1", "2"]


async def test_host_to_sandbox_kinds_from_the_sandbox_are_rejected() -> None:
    host, sandbox = byte_stream_pair()
    await sandbox.send(encode(Welcome(version=1)))
    with pytest.raises(ProtocolError):
        await Channel(host).receive()


async def test_an_oversized_frame_is_rejected_before_it_is_buffered() -> None:
    host, sandbox = byte_stream_pair()
    await sandbox.send((2**31).to_bytes(4, "big"))
    with pytest.raises(FrameTooLarge):
        await Channel(host).receive()


async def test_end_of_stream_is_channel_closed() -> None:
    host, sandbox = byte_stream_pair()
    await sandbox.aclose()
    with pytest.raises(ChannelClosed):
        await Channel(host).receive()
    with pytest.raises(ChannelClosed):
        await Channel(host).send(Welcome(version=1))


async def test_a_send_never_read_ends_as_channel_closed_after_the_send_timeout() -> None:
    host, _sandbox = byte_stream_pair()
    # Filled beneath the channel, so the short send timeout bounds only the send that waits for
    # a reader: each filling send bounded by 50 ms too would fail on a busy machine.
    for _ in range(64):
        await host.send(encode(Welcome(version=1)))
    channel = Channel(host, send_timeout=0.05)
    with anyio.fail_after(5), pytest.raises(ChannelClosed, match="did not read its channel"):
        await channel.send(Welcome(version=1))
    assert channel.closed


async def test_a_send_cancelled_from_outside_still_delivers_its_whole_frame() -> None:
    host, sandbox = byte_stream_pair()
    channel = Channel(host)
    for _ in range(64):
        await channel.send(Welcome(version=1))
    frames: list[bytes] = []

    async def cancel_then_read(scope: anyio.CancelScope) -> None:
        await anyio.wait_all_tasks_blocked()
        scope.cancel()  # the send is shielded: it waits on, then completes once read
        await anyio.wait_all_tasks_blocked()
        for _ in range(65):
            frames.append(await sandbox.receive())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            with anyio.CancelScope() as outer:
                tasks.start_soon(cancel_then_read, outer)
                await channel.send(Welcome(version=2))
    messages = FrameDecoder(accept=HOST_TO_SANDBOX).feed(b"".join(frames))
    assert len(messages) == 65
    assert messages[-1] == Welcome(version=2)
