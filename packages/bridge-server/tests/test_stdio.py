"""The server's stdio transport: lines from a pipe, a read that cancellation ends, the SDK's
transport kept where stdin cannot be polled, and answers written whole and in order."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_code_execution_mode._stdio import MAX_LINE, SKIPPED, _Answers, _Lines


async def test_lines_from_a_pipe_arrive_whole_and_the_end_is_kept() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.write(write_fd, b'{"a": 1}\n{"b":')
    os.write(write_fd, b" 2}\nno newline at the end")
    os.close(write_fd)
    try:
        with anyio.fail_after(5):
            lines = [line async for line in _Lines(read_fd)]
    finally:
        os.close(read_fd)
    assert lines == ['{"a": 1}', '{"b": 2}', "no newline at the end"]


async def test_a_read_waiting_on_an_open_pipe_ends_when_cancelled() -> None:
    # The SDK's thread-based reader cannot be cancelled: a SIGTERM with the client attached hung.
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    lines = _Lines(read_fd)
    try:
        with anyio.move_on_after(0.2) as scope:
            async for _line in lines:
                pass
        assert scope.cancelled_caught
        # Nothing is lost to the cancelled read: the next one gets the next line.
        os.write(write_fd, b"after\n")
        with anyio.fail_after(5):
            assert await lines.next() == "after"
    finally:
        lines.close()
        os.close(read_fd)
        os.close(write_fd)


async def test_a_client_writing_faster_than_the_server_reads_is_held_back_and_loses_nothing() -> (
    None
):
    # Nothing is read ahead of the server: a read per line wanted, so the pipe fills.
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    line = b"x" * 999 + b"\n"
    lines = _Lines(read_fd)
    written = 0
    try:
        os.write(write_fd, line)
        with anyio.fail_after(10):
            assert await lines.next() == line[:-1].decode()
            while written < 16 * 1024 * 1024:
                try:
                    written += os.write(write_fd, line * 64)
                except BlockingIOError:
                    await anyio.sleep(0.05)  # a reader reading ahead would drain the pipe now
                    try:
                        written += os.write(write_fd, line * 64)
                    except BlockingIOError:
                        break  # held back: nothing more is read ahead
                await anyio.lowlevel.checkpoint()
            assert written < 4 * 1024 * 1024, "the server read ahead without bound"
            for _ in range(written // len(line)):
                assert await lines.next() == line[:-1].decode()
    finally:
        lines.close()
        os.close(read_fd)
        os.close(write_fd)


def test_bridge_with_stdin_from_dev_null_exits_cleanly(tmp_path: Path) -> None:
    # /dev/null cannot be polled (epoll says EPERM): the SDK's reader takes it and reads EOF.
    config = tmp_path / "servers.json"
    config.write_text('{"mcpServers": {}}', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    env.update(MCP_BRIDGE_DISCOVER="false", MCP_BRIDGE_CONFIG=str(config), MCP_BRIDGE_POOL_SIZE="0")
    done = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "--state-dir", str(tmp_path / "s")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


async def test_a_line_past_the_bound_is_skipped_as_it_arrives_and_the_next_line_is_read() -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    lines: list[str] = []

    async def read() -> None:
        async for line in _Lines(read_fd):
            lines.append(line)

    def write() -> None:
        chunk = b"x" * (1024 * 1024)
        for _ in range(2 * MAX_LINE // len(chunk)):  # twice the bound, no newline
            os.write(write_fd, chunk)
        os.write(write_fd, b'\n{"after": true}\n')
        os.close(write_fd)

    tracemalloc.start()
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await anyio.to_thread.run_sync(write)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        os.close(read_fd)
    assert lines == [SKIPPED, '{"after": true}']
    # One line's worth (plus the buffer's growth slack), never the whole flood.
    assert peak < MAX_LINE * 5 // 4 + 4 * 1024 * 1024


def _answer(text: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"text": text}))


def _small_pipe() -> tuple[int, int]:
    """A pipe that holds 4 KiB: long answers take the writer task's path."""
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(write_fd, False)
    return read_fd, write_fd


async def _read_until_closed(fd: int, into: list[bytes]) -> None:
    def read_all() -> bytes:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)

    into.append(await anyio.to_thread.run_sync(read_all))


def _texts(data: bytes) -> list[str]:
    *lines, rest = data.split(b"\n")
    assert rest == b""  # every line ended
    return [json.loads(line)["result"]["text"] for line in lines]


async def test_answers_longer_than_the_pipe_arrive_whole_and_in_order() -> None:
    read_fd, write_fd = _small_pipe()
    received: list[bytes] = []
    big = "x" * 200_000
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                answers = _Answers(write_fd, tg)
                async with anyio.create_task_group() as client:
                    client.start_soon(_read_until_closed, read_fd, received)
                    await answers.send(_answer(big))
                    await answers.send(_answer("after"))
                    os.close(write_fd)
                tg.cancel_scope.cancel()
    finally:
        os.close(read_fd)
    assert _texts(received[0]) == [big, "after"]


async def test_a_sender_cancelled_while_its_answer_waits_leaves_no_half_line() -> None:
    read_fd, write_fd = _small_pipe()
    received: list[bytes] = []
    big = "y" * 100_000
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                answers = _Answers(write_fd, tg)
                with anyio.CancelScope() as scope:
                    scope.cancel()  # delivered at the sender's first wait: the pipe is full
                    await answers.send(_answer(big))
                assert scope.cancelled_caught
                async with anyio.create_task_group() as client:
                    client.start_soon(_read_until_closed, read_fd, received)
                    await answers.send(_answer("next"))
                    os.close(write_fd)
                tg.cancel_scope.cancel()
    finally:
        os.close(read_fd)
    assert _texts(received[0]) == [big, "next"]


async def test_lines_waiting_in_the_pipe_while_the_server_was_busy_still_let_the_loop_turn() -> (
    None
):
    # A client can fill the pipe with tiny lines while the server is busy (it stops reading
    # stdout, say): a chunk's lines then come without waiting, but the loop gets a turn per
    # chunk read (signals, sandbox channels and deadlines are served meanwhile).
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    lines = _Lines(read_fd)
    total = 256 * 1024  # lines of 2 bytes: 512 KiB, all read ahead before the reading starts
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await anyio.lowlevel.checkpoint()
            turns += 1

    def write() -> None:
        data = memoryview(b"x\n" * total)
        while data:
            data = data[os.write(write_fd, data[: 1 << 16]) :]

    try:
        with anyio.fail_after(60):
            os.write(write_fd, b"first\n")
            assert await lines.next() == "first"
            writer = threading.Thread(target=write)
            writer.start()
            await anyio.sleep(0.5)  # busy elsewhere: the pipe fills
            longest = 0
            async with anyio.create_task_group() as tg:
                tg.start_soon(count_turns)
                await anyio.lowlevel.checkpoint()
                seen, run = turns, 0
                for _ in range(total):
                    assert await lines.next() == "x"
                    if turns == seen:
                        run += 1
                        longest = max(longest, run)
                    else:
                        seen, run = turns, 0
                tg.cancel_scope.cancel()
            writer.join()
    finally:
        lines.close()
        os.close(read_fd)
        os.close(write_fd)
    # A chunk is 64 KiB (32,768 of these lines); trio may run two reads in one turn of the task
    # counting them.
    assert longest <= 2 * (64 * 1024 // 2), f"{longest} lines without a loop turn"
