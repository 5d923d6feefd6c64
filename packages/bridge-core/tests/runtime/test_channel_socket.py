"""The channel over its real unix socket (anyio's stream, on every backend): the bounds and the
end-of-connection behaviour sessions rely on."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import ByteStream
from bridge_core.channel import Channel
from bridge_protocol import Output, encode


@asynccontextmanager
async def connected(tmp_path: Path) -> AsyncIterator[tuple[ByteStream, socket.socket]]:
    """(the host's end, as :func:`~bridge_core.runtime._channel.accept_channel` returns it; the
    sandbox's end, a plain non-blocking socket)."""
    path = tmp_path / "channel.sock"
    async with await anyio.create_unix_listener(path) as listener:
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.setblocking(False)
        peer.connect(str(path))
        host = await listener.accept()
    try:
        yield host, peer
    finally:
        await host.aclose()
        peer.close()


async def test_bytes_go_both_ways_and_the_end_of_the_peer_is_the_end_of_the_stream(
    tmp_path: Path, anyio_backend: str
) -> None:
    async with connected(tmp_path) as (host, peer):
        peer.send(b"hello")
        with anyio.fail_after(10):
            assert await host.receive() == b"hello"
            await host.send(b"welcome")
            await anyio.wait_readable(peer)
        assert peer.recv(100) == b"welcome"
        peer.shutdown(socket.SHUT_WR)
        with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
            await host.receive()


async def test_a_flooding_peer_fills_only_the_kernels_buffers(
    tmp_path: Path, anyio_backend: str
) -> None:
    # The host reads only when the session asks for the next frame: nothing is read ahead.
    async with connected(tmp_path) as (_host, peer):
        sent = 0
        chunk = b"x" * 65536
        for _ in range(50):  # give the loop turns to read while the peer floods
            try:
                while sent < 64 * 1024 * 1024:
                    sent += peer.send(chunk)
            except BlockingIOError:
                pass
            await anyio.sleep(0.01)
        # What the two socket buffers hold: a host that read on would have taken all 64 MiB.
        kernel = peer.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) * 3
        assert sent <= kernel + 1024 * 1024, sent


async def rest_of(host: ByteStream) -> bytes:
    """What ``host`` receives until it ends (at its end, or broken: the peer is gone)."""
    received = bytearray()
    try:
        while True:
            received += await host.receive(65536)
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        return bytes(received)


async def test_bytes_read_before_the_peer_reset_the_connection_are_still_received(
    tmp_path: Path, anyio_backend: str
) -> None:
    # The sandbox sends its last output and exits with bytes of the host's unread: the kernel
    # resets the connection. The bytes read before the reset must not be dropped with it.
    async with connected(tmp_path) as (host, peer):
        with anyio.fail_after(10):
            await host.send(b"never read by the sandbox")
        last = b"o" * 100_000
        peer.setblocking(True)
        peer.sendall(last)
        await anyio.sleep(0.1)
        peer.close()  # unread bytes in its queue: ECONNRESET for the host
        received = bytearray()
        with anyio.fail_after(10):
            received += await host.receive(65536)
            await anyio.sleep(0.1)  # the reader was busy (streaming output) meanwhile
            received += await rest_of(host)
        assert bytes(received) == last


async def test_bytes_read_before_a_send_found_the_peer_gone_are_still_received(
    tmp_path: Path, anyio_backend: str
) -> None:
    async with connected(tmp_path) as (host, peer):
        last = b"r" * 100_000
        peer.setblocking(True)
        peer.sendall(last)
        peer.close()  # a clean exit: nothing of the host's unread
        await anyio.sleep(0.1)
        received = bytearray()
        with anyio.fail_after(10):
            received += await host.receive(65536)
            with pytest.raises(anyio.BrokenResourceError):
                await host.send(b"interrupt")  # EPIPE
            await anyio.sleep(0.1)
            received += await rest_of(host)
        assert bytes(received) == last


async def test_a_task_answering_buffered_messages_without_waiting_still_yields_the_loop(
    tmp_path: Path, anyio_backend: str
) -> None:
    # A sandbox flooding pings: each is answered with a small send (a system call), and both
    # the receive (bytes already buffered) and the send (the socket takes it) return at once.
    # Without a turn now and then the reader would hold the loop for the whole buffer (hundreds
    # of milliseconds per loop iteration for every other session on the bridge).
    async with connected(tmp_path) as (host, peer):
        sent = 0
        with contextlib.suppress(BlockingIOError):
            while sent < 128 * 1024:
                sent += peer.send(b"p" * 4096)
        await anyio.sleep(0.1)
        turns = 0

        async def other_session() -> None:
            nonlocal turns
            while True:
                await anyio.lowlevel.checkpoint()
                turns += 1
                with contextlib.suppress(BlockingIOError):
                    peer.recv(1 << 16)  # the pongs (a kernel buffer holds ~280 tiny sends)

        async with anyio.create_task_group() as tg:
            tg.start_soon(other_session)
            await anyio.lowlevel.checkpoint()
            before = turns
            with anyio.fail_after(10):
                for _ in range(2000):  # 24 KB of pings in, 2000 pongs out
                    assert await host.receive(12)
                    await host.send(b"pong")
            during = turns - before
            tg.cancel_scope.cancel()
        assert during >= 10, during


async def test_channel_frames_sent_to_a_slow_reader_arrive_whole_and_in_order(
    tmp_path: Path, anyio_backend: str
) -> None:
    async with connected(tmp_path) as (host, peer):
        channel = Channel(host)
        frames = [encode(Output("e", "stdout", str(n) * (n * 997 % 70_000))) for n in range(60)]
        cancelled = encode(Output("e", "stdout", "never"))
        received = bytearray()

        async def read_all() -> None:
            total = sum(map(len, frames))
            while len(received) < total:
                await anyio.wait_readable(peer)
                received.extend(peer.recv(1 << 20))
                await anyio.sleep(0.001)  # a slow reader: some sends must wait

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_all)
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await channel.send_frame(cancelled)  # cancelled first: nothing written
                for frame in frames:
                    await channel.send_frame(frame)
        assert bytes(received) == b"".join(frames)


@pytest.mark.parametrize("size", [10, 200_000])  # a frame the socket takes at once, and not
async def test_a_sender_whose_deadline_passed_writes_nothing_and_the_channel_stays_open(
    tmp_path: Path, anyio_backend: str, size: int
) -> None:
    # The deadline passes while the caller runs without a checkpoint: on asyncio its scope is
    # cancelled only when the loop runs the scope's timer, after a task that merely yielded.
    async with connected(tmp_path) as (host, peer):
        channel = Channel(host)
        frame = encode(Output("e", "stdout", "x" * size))

        async def late_send() -> None:
            with anyio.fail_after(0.01):
                time.sleep(0.05)  # noqa: ASYNC251 (busy past the deadline, on purpose)
                await channel.send_frame(frame)
                await anyio.lowlevel.checkpoint()

        with pytest.raises(TimeoutError):
            await late_send()
        await anyio.sleep(0.05)
        with pytest.raises(BlockingIOError):
            peer.recv(1 << 16)  # nothing of the frame was written
        assert not channel.closed
        with anyio.fail_after(10):
            await channel.send_frame(encode(Output("e", "stdout", "next")))
            await anyio.wait_readable(peer)
        assert peer.recv(1 << 16)
