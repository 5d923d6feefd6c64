"""The attach stream's framing, against hostile bytes (podman frames, the container chooses)."""

from __future__ import annotations

import socket

import anyio
import pytest
from anyio.abc import SocketStream
from bridge_core.runtime._attach import (
    MAX_HEAD_BYTES,
    STDERR_TAIL_BYTES,
    AttachedStream,
    AttachError,
    attach,
)

pytestmark = pytest.mark.anyio

UPGRADED = b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n\r\n"


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


async def pair() -> tuple[SocketStream, socket.socket]:
    ours, engine = socket.socketpair()
    return await SocketStream.from_socket(ours), engine


async def read_all(stream: AttachedStream) -> bytes:
    data = b""
    with anyio.fail_after(5):
        while True:
            try:
                data += await stream.receive()
            except anyio.EndOfStream:
                return data


async def test_stdout_payload_passes_stderr_is_set_aside_and_eof_ends_it() -> None:
    connection, engine = await pair()
    engine.sendall(UPGRADED + frame(2, b"starting\n") + frame(1, b"\xd9\xf7ab"))
    stream = await attach(connection, "c")
    await stream.wait_started()
    engine.sendall(frame(1, b"cd") + frame(2, b"bye\n"))
    engine.shutdown(socket.SHUT_WR)  # EOF (a close with our request unread would be a reset)
    assert await read_all(stream) == b"\xd9\xf7abcd"
    assert stream.stderr_tail == "starting\nbye\n"
    await stream.aclose()


async def test_a_frame_split_across_reads_and_several_frames_in_one_read() -> None:
    connection, engine = await pair()
    data = UPGRADED + frame(1, b"x" * 100_000) + frame(1, b"yz")
    stream_task_data = b""
    async with anyio.create_task_group() as tg:
        stream = await attach_after(tg, connection, engine, data)
        stream_task_data = await read_all(stream)
    assert stream_task_data == b"x" * 100_000 + b"yz"


async def attach_after(
    tg: anyio.abc.TaskGroup, connection: SocketStream, engine: socket.socket, data: bytes
) -> AttachedStream:
    async def feed() -> None:
        for start in range(0, len(data), 7000):
            await anyio.to_thread.run_sync(engine.sendall, data[start : start + 7000])
        engine.shutdown(socket.SHUT_WR)  # EOF (a close with our request unread would be a reset)

    tg.start_soon(feed)
    return await attach(connection, "c")


async def test_stderr_kept_is_only_a_tail() -> None:
    connection, engine = await pair()
    big = b"e" * (STDERR_TAIL_BYTES * 3) + b"END"
    async with anyio.create_task_group() as tg:
        stream = await attach_after(tg, connection, engine, UPGRADED + frame(2, big))
        assert await read_all(stream) == b""
    assert len(stream.stderr_tail) == STDERR_TAIL_BYTES
    assert stream.stderr_tail.endswith("END")


@pytest.mark.parametrize(
    "header", [bytes([3, 0, 0, 0, 0, 0, 0, 1]), bytes([1, 0, 9, 0, 0, 0, 0, 1])]
)
async def test_a_broken_header_ends_the_stream(header: bytes) -> None:
    connection, engine = await pair()
    engine.sendall(UPGRADED + header + b"x")
    stream = await attach(connection, "c")
    with pytest.raises(anyio.BrokenResourceError, match="framing"):
        await stream.receive()
    engine.shutdown(socket.SHUT_WR)  # EOF (a close with our request unread would be a reset)


async def test_a_refusal_names_the_status_and_an_endless_head_is_cut() -> None:
    connection, engine = await pair()
    engine.sendall(b'HTTP/1.1 404 Not Found\r\nContent-Length: 20\r\n\r\n{"cause":"no such"}')
    with pytest.raises(AttachError, match="404"):
        await attach(connection, "c")
    connection, engine = await pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, engine.sendall, b"X" * (MAX_HEAD_BYTES * 2))  # type: ignore[arg-type]
        with pytest.raises(AttachError, match="no end"):
            await attach(connection, "c")
        engine.shutdown(socket.SHUT_WR)  # EOF (a close with our request unread would be a reset)
