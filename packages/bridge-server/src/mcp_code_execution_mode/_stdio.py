"""The server's stdio transport: the client's stdin and stdout served on the event loop.

Why not the SDK's ``stdio_server`` (``mcp/server/stdio.py`` in modelcontextprotocol/python-sdk
2.3): it reads stdin with a blocking ``readline`` in a worker thread and writes each answer with
two more worker-thread calls (``write`` and ``flush`` of an ``anyio.wrap_file``), and passes
every message through two zero-buffer memory streams and two tasks of its own. Per warm call
that measured ~16 % of the bridge's CPU in thread hand-offs (``to_thread``, condition variables,
the loop's self-pipe) on top of the task switches. And a SIGTERM while the client still held
the pipe open (a supervisor stopping the bridge) cleaned up and then hung forever waiting for
one more line in that thread, which cancellation cannot stop.

Here both pipes are non-blocking and served on the event loop: a request line is read and
parsed in the task that iterates the read stream (the SDK's server loop), an answer is written
inside ``send()`` (a pipe takes a whole answer at once nearly always; the rest of a long one goes
to a writer task, in order, so a cancelled sender never leaves half a line behind). The fds are
claimed as the SDK does: while serving, fd 0 reads the null device and fd 1 writes to stderr, so
children and stray prints never touch the protocol. Everything above the bytes (dispatch,
validation, cancellation, progress, requests to the client) is the SDK's ``Server.run``.

The client's bytes are untrusted in shape: lines are split by :mod:`bridge_core.jsonlines` (each
byte scanned once for the newline; nothing read ahead of the server, one read per wait), and a
line longer than :data:`MAX_LINE` is skipped (its bytes dropped as they come) and stands as a
short line that is not JSON, which the server answers with a JSON-RPC parse error.
"""

from __future__ import annotations

import codecs
import fcntl
import logging
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Self

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from bridge_core.jsonlines import OVERLONG, LineSplitter
from mcp.shared.message import SessionMessage

__all__ = ["MAX_LINE", "SKIPPED", "stdio_transport"]

logger = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
MAX_LINE = 32 * 1024 * 1024
"""Longest request line read from the client: no request larger than the sandbox's 16 MiB frame
can be run, and this leaves room for JSON escaping."""
SKIPPED = f"<a request line longer than {MAX_LINE // (1024 * 1024)} MiB was skipped>"


class _Lines:
    """The lines of a non-blocking fd (split by :mod:`bridge_core.jsonlines`): :meth:`next`
    waits on the event loop, cancellable, one read of at most :data:`_READ_CHUNK` per wait, so
    nothing is read ahead of the server and the loop turns between reads."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lines = LineSplitter(MAX_LINE)
        self._ended = False

    def close(self) -> None:
        """Stop reading (before the fd is closed): nothing to release."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._all()

    async def _all(self) -> AsyncIterator[str]:
        while (line := await self.next()) is not None:
            yield line

    async def next(self) -> str | None:
        """The next line (without its newline), None at the end."""
        while True:
            line = self._lines.next() if not self._ended else self._lines.end()
            if line is OVERLONG:
                logger.warning("skipping a request line longer than %d bytes", MAX_LINE)
                return SKIPPED
            if line is not None:
                return codecs.decode(line, "utf-8", "replace")
            if self._ended:
                return None
            await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _READ_CHUNK)
            except BlockingIOError:
                continue
            if chunk:
                self._lines.feed(chunk)
            else:  # the client closed its end
                self._ended = True


class _Requests:
    """The read stream the SDK's server loop iterates (its ``ReadStream`` shape): one parsed
    message per line, read and parsed in the task that iterates it. A line that is not a
    JSON-RPC message comes as the exception, as the SDK's transport yields it.
    """

    def __init__(self, fd: int) -> None:
        self._lines = _Lines(fd)

    def close(self) -> None:
        """Stop reading (the fd is about to be closed)."""
        self._lines.close()

    async def receive(self) -> SessionMessage | Exception:
        line = await self._lines.next()
        if line is None:
            raise anyio.EndOfStream
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:  # what the SDK's stdio_server does: hand the error on
            return exc
        return SessionMessage(message)

    async def aclose(self) -> None:
        pass  # the fd belongs to stdio_transport

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return None


class _Answers:
    """The write stream (the SDK's ``WriteStream`` shape): each message is one line on fd.

    ``send`` writes straight to the pipe; what the pipe does not take at once (a long answer, a
    client slow to read) is queued whole for the writer task, and later messages queue behind it,
    so lines never interleave and a sender cancelled while it waits leaves no half line behind.
    The sender still waits until its line is out: the client's reading paces the server.
    """

    def __init__(self, fd: int, task_group: TaskGroup) -> None:
        self._fd = fd
        self._backlog: deque[memoryview] = deque()
        self._queued = anyio.Event()
        self._drained = anyio.Event()
        self._broken: OSError | None = None
        task_group.start_soon(self._write_backlog)

    async def send(self, item: SessionMessage, /) -> None:
        json = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        data = (json + "\n").encode()
        if self._broken is not None:
            raise anyio.BrokenResourceError from self._broken
        written = 0
        if not self._backlog:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                pass
            except OSError as exc:  # EPIPE: the client is gone
                self._broken = exc
                raise anyio.BrokenResourceError from exc
            if written == len(data):
                return
        if not self._backlog:
            self._drained = anyio.Event()
            self._queued.set()
        self._backlog.append(memoryview(data)[written:])
        drained = self._drained
        await drained.wait()
        if self._broken is not None:
            raise anyio.BrokenResourceError from self._broken

    async def _write_backlog(self) -> None:
        while True:
            await self._queued.wait()
            self._queued = anyio.Event()
            try:
                while self._backlog:
                    pending = self._backlog[0]
                    await anyio.wait_writable(self._fd)
                    try:
                        written = os.write(self._fd, pending)
                    except BlockingIOError:
                        continue
                    if written < len(pending):
                        self._backlog[0] = pending[written:]
                    else:
                        self._backlog.popleft()
            except OSError as exc:
                self._broken = exc
                self._backlog.clear()
            self._drained.set()

    async def aclose(self) -> None:
        pass  # the fd belongs to stdio_transport

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return None


def _pollable(fd: int) -> bool:
    """Whether epoll takes ``fd``: pipes, sockets and terminals; not regular files or most
    character devices (/dev/null: EPERM)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


@contextmanager
def _claimed(fd: int, stand_in: int) -> Iterator[int]:
    """A private non-blocking duplicate of ``fd``, which points at ``stand_in`` meanwhile (as the
    SDK claims the standard streams) and gets the wire and its blocking mode back after."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(stand_in, fd)
    was_blocking = os.get_blocking(private)
    os.set_blocking(private, False)
    try:
        yield private
    finally:
        # The flag lives on the shared open file: give the restored fd its old mode back.
        os.set_blocking(private, was_blocking)
        os.dup2(private, fd)
        os.close(private)


@asynccontextmanager
async def stdio_transport(
    stdin: int = 0, stdout: int = 1
) -> AsyncIterator[tuple[_Requests, _Answers] | None]:
    """Claim fds ``stdin`` and ``stdout`` (0 and 1; tests pass pipes) and yield the server's
    (read, write) streams over them; ``None`` when they cannot be polled (stdin from a regular
    file or ``/dev/null``), where the SDK's own transport is the right one: it never blocks
    there."""
    if not (_pollable(stdin) and _pollable(stdout)):
        yield None
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        with _claimed(stdin, null) as private_in, _claimed(stdout, 2) as private_out:
            os.close(null)
            null = -1
            requests = _Requests(private_in)
            try:
                async with anyio.create_task_group() as tg:
                    yield requests, _Answers(private_out, tg)
                    tg.cancel_scope.cancel()
            finally:
                requests.close()
    finally:
        if null >= 0:
            os.close(null)
