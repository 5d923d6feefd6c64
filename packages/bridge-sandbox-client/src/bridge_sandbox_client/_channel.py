"""The blocking socket adapter around the sans-IO codec of :mod:`bridge_protocol`.

The byte stream is a connected unix socket, or the process's own stdin/stdout
(:class:`~._stdio.StdioPipes`, for engines with no shared filesystem): both offer the socket
methods used here.

One reader thread reads (:meth:`Channel.read_messages`); any thread may :meth:`Channel.send`,
serialised by a lock so frames never interleave. The socket is its own file descriptor: nothing
user code writes to fds 1 and 2 can reach it.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

from bridge_protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    HOST_TO_SANDBOX,
    SUPPORTED_VERSIONS,
    FrameDecoder,
    Hello,
    Message,
    ProtocolError,
    Refusal,
    UnsupportedVersion,
    Welcome,
    encode,
)

__all__ = [
    "Channel",
    "ChannelClosed",
    "Refused",
    "Transport",
    "defer_signals_outside_user_code",
    "signals_allowed",
    "signals_deferred",
]

_RECV_SIZE = 256 * 1024
DIRECT_BODY = 512 * 1024
"""A frame body with at least this much still to come is received straight into its own buffer
(a saved state's 4 MiB ``Restore`` frames): no staging copy, no append per read."""
_DEFERRED = frozenset(
    int(number)
    for number in (
        signal.SIGINT,
        signal.SIGALRM,
        signal.SIGVTALRM,
        signal.SIGPROF,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGHUP,
    )
)
"""Signals whose Python handlers could raise mid-send (interrupts, user-installed alarms)."""
_Mask = Callable[[int, Iterable[int]], set[int]]
_sigmask: _Mask = importlib.import_module("_signal").pthread_sigmask
"""``signal.pthread_sigmask`` without its wrapper, which turns every signal number of the mask
it returns into a ``Signals`` enum member: ~3 us a call with ten signals blocked against 0.5 us
(CPython 3.13), and an execution changes the mask six times. The numbers are all a mask needs."""


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Block the signals of :data:`_DEFERRED` for the calling thread inside the block.

    Threads started inside inherit the mask: the client's own threads are started this way, so a
    signal sent to the whole process lands on the main thread, where blocking it works.
    """
    # Python runs pending handlers inside pthread_sigmask itself: the mask to restore is read
    # first, so that a handler raising as the mask changes still has it restored.
    previous = _sigmask(signal.SIG_BLOCK, ())
    try:
        _sigmask(signal.SIG_BLOCK, _DEFERRED)
        yield
    finally:
        _sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def signals_allowed() -> Iterator[None]:
    """Unblock the signals of :data:`_DEFERRED` for the calling thread inside the block (user code
    runs there); those that arrived while they were blocked are delivered on entry, inside."""
    previous = _sigmask(signal.SIG_BLOCK, ())  # as in signals_deferred
    try:
        _sigmask(signal.SIG_UNBLOCK, _DEFERRED)
        yield
    finally:
        _sigmask(signal.SIG_SETMASK, previous)


def defer_signals_outside_user_code() -> None:
    """Block the signals of :data:`_DEFERRED` on the calling (main) thread from now on; user code
    runs inside :func:`signals_allowed`.

    A handler that raises (a ``KeyboardInterrupt``, an alarm user code left behind) can then
    never land in the client's own work between executions (waiting for the next job, sending a
    result), which ended the client. What arrives meanwhile is delivered when user code next
    runs. A child made by ``fork()`` starts with them unblocked (a saving child relies on its
    alarm).
    """
    _sigmask(signal.SIG_BLOCK, _DEFERRED)
    os.register_at_fork(after_in_child=lambda: _sigmask(signal.SIG_UNBLOCK, _DEFERRED))


class Transport(Protocol):
    """What :class:`Channel` needs of its byte stream: a socket, or :class:`~._stdio.StdioPipes`."""

    def settimeout(self, timeout: float | None) -> None: ...
    def recv(self, size: int) -> bytes: ...
    def recv_into(self, buffer: bytearray | memoryview) -> int: ...
    def sendall(self, data: bytes) -> None: ...
    def shutdown(self, how: int) -> None: ...
    def close(self) -> None: ...


class ChannelClosed(ConnectionError):
    """The host closed the channel (or it was closed locally)."""


class Refused(Exception):
    """The host answered ``Hello`` with a ``Refusal``."""

    def __init__(self, refusal: Refusal) -> None:
        supported = ", ".join(map(str, refusal.supported)) or "none given"
        super().__init__(
            f"the host refused this sandbox (code {refusal.code}): {refusal.message}; "
            f"host speaks protocol versions: {supported}; "
            f"this client speaks: {', '.join(map(str, SUPPORTED_VERSIONS))}"
        )
        self.refusal = refusal


class Channel:
    """A connected protocol channel over a unix stream socket or the process's stdio."""

    def __init__(self, sock: Transport) -> None:
        self._sock = sock
        self._send_lock = threading.Lock()
        self._decoder = FrameDecoder(accept=HOST_TO_SANDBOX)
        # Reused by every read: sock.recv(_RECV_SIZE) would allocate (and the allocator mmap,
        # shrink and unmap) a fresh 256 KiB buffer per frame, several system calls on the
        # round-trip path of every execution and tool call.
        self._buffer = bytearray(_RECV_SIZE)
        self._view = memoryview(self._buffer)
        self._early: list[Message] = []
        self._closed = False
        self._forked = False
        self.version = 1
        """The protocol version the host chose (set by :meth:`handshake`)."""
        self.on_broken: Callable[[OSError], object] | None = None
        """Called when a send fails: part of a frame may be on the wire, or the way to the host
        is shut while the way back still reads (over stdio the container's init holds another
        copy of the pipe, so the host would never see EOF). Nothing more can reach the host."""
        # A child made by os.fork() (multiprocessing) shares this socket: frames it wrote would
        # interleave with ours and corrupt the stream, so the child's copy is closed.
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self._send_lock = threading.Lock()  # may have been held by another thread at fork time
        self._closed = True
        self._forked = True
        try:
            self._sock.close()
        except OSError:
            pass

    @classmethod
    def connect(cls, path: str, *, timeout: float) -> Channel:
        """Connect to the host's listening socket at ``path``."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            raise
        sock.settimeout(None)
        return cls(sock)

    def handshake(self, client_version: str, *, timeout: float) -> Welcome:
        """Send ``Hello`` and wait for ``Welcome``; raise :class:`Refused` on a ``Refusal``."""
        self.send(Hello(versions=SUPPORTED_VERSIONS, client_version=client_version))
        self._sock.settimeout(timeout)
        try:
            while not self._early:
                data = self._sock.recv(_RECV_SIZE)
                if not data:
                    raise ChannelClosed("the host closed the channel during the handshake")
                self._early.extend(self._decoder.feed(data))
        finally:
            self._sock.settimeout(None)
        first = self._early.pop(0)
        if isinstance(first, Refusal):
            raise Refused(first)
        if not isinstance(first, Welcome):
            raise ChannelClosed(f"expected 'welcome' from the host, got {type(first).KIND!r}")
        if first.version not in SUPPORTED_VERSIONS:
            raise UnsupportedVersion(f"the host chose protocol version {first.version}")
        self.version = first.version
        return first

    def send(self, message: Message) -> None:
        """Send one message; safe from any thread."""
        try:
            frame = encode(message)
        except ProtocolError as exc:  # e.g. FrameTooLarge: a local mistake, not a broken stream
            raise ValueError(str(exc)) from None
        if len(frame) > DEFAULT_MAX_FRAME_SIZE:
            # The host would drop the whole session on an oversized frame: fail the one call.
            raise ValueError(
                f"{type(message).KIND!r} message of {len(frame)} bytes exceeds the channel's "
                f"limit of {DEFAULT_MAX_FRAME_SIZE} bytes"
            )
        if threading.current_thread() is not threading.main_thread():
            self._send_locked(frame)
            return
        # Python runs signal handlers on the main thread only, and a handler that raises (the
        # interrupt's KeyboardInterrupt) in the middle of sendall leaves half a frame on the
        # wire: the host's decoder would lose sync and drop the session. Signals wait until the
        # frame is out.
        with signals_deferred():
            self._send_locked(frame)

    def _send_locked(self, frame: bytes) -> None:
        with self._send_lock:
            if self._forked:
                raise ChannelClosed(
                    "a forked child process cannot talk to the host: "
                    "call tools from the main process (threads are fine)"
                )
            if self._closed:
                raise ChannelClosed("the channel to the host is closed")
            try:
                self._sock.sendall(frame)
            except OSError as exc:
                if self.on_broken is not None:
                    self.on_broken(exc)
                raise

    def take_early(self) -> list[Message]:
        """Messages the handshake read past ``Welcome`` (once)."""
        early, self._early = self._early, []
        return early

    def read_messages(self) -> list[Message] | None:
        """Block for the next bytes; the messages they complete (maybe none), or None at EOF
        (or once this end was closed).

        Raises a :class:`bridge_protocol.ProtocolError` on a bad frame: the stream is then out of
        sync and the caller must stop. Not thread-safe: one thread reads.
        """
        if (body := self._decoder.body_target(DIRECT_BODY)) is not None:
            return self._receive_body(body)
        try:
            size = self._sock.recv_into(self._buffer)
        except OSError:
            if self._closed:
                return None
            raise
        if not size:
            return None
        # No copy: the decoder copies what it keeps of a partial frame before the buffer is
        # read into again, and decodes a whole frame in place.
        return self._decoder.feed(self._view[:size])

    def _receive_body(self, body: memoryview) -> list[Message] | None:
        """Receive the rest of a large frame's body in place (its length is already checked
        against the frame limit), then decode it as any frame: its message, or None at EOF."""
        filled = 0
        while filled < len(body):
            try:
                size = self._sock.recv_into(body[filled:])
            except OSError:
                if self._closed:
                    return None
                raise
            if not size:
                return None  # the host ended inside a frame: the reader stops as at any EOF
            filled += size
        return [message for message, _ in self._decoder.body_received(filled)]

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called here (not when the host closed its end)."""
        return self._closed

    def close(self) -> None:
        """Close the socket; pending and later sends fail with :class:`ChannelClosed`."""
        with self._send_lock:
            self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
