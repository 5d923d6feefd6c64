"""The host end of a sandbox's protocol channel: an anyio adapter over :mod:`bridge_protocol`.

``bridge_protocol`` is sans-IO (bytes in, messages out); this module owns the I/O: it reads the
:class:`~anyio.abc.ByteStream` a :meth:`RuntimeBackend.start` returned, feeds a
:class:`~bridge_protocol.FrameDecoder` that only accepts sandbox-to-host kinds, and serialises
writes with a lock (several call tasks reply concurrently).

Every byte from the sandbox is untrusted: a malformed frame raises a
:class:`~bridge_protocol.ProtocolError` from :meth:`Channel.receive`. The session that owns the
channel treats that as the end of the sandbox (it is killed and replaced); the bridge goes on.
"""

from __future__ import annotations

import logging
from collections import deque

import anyio
from anyio.abc import ByteStream
from bridge_protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    SANDBOX_TO_HOST,
    SUPPORTED_VERSIONS,
    ErrorCode,
    FrameDecoder,
    Hello,
    Message,
    Refusal,
    UnexpectedMessage,
    UnsupportedVersion,
    Welcome,
    encode,
    negotiate,
)

# UnexpectedMessage is the protocol's, re-exported: one class for both sides to raise and catch.
__all__ = ["Channel", "ChannelClosed", "UnexpectedMessage"]

logger = logging.getLogger(__name__)

RECEIVE_CHUNK = 64 * 1024
"""Bytes asked of the stream per read. A read allocates this much before it knows what came: at
128 KiB and above glibc maps and unmaps fresh pages for every read (~15 µs on each frame of the
round-trip path), below it the buffer comes from the heap; 64 KiB still takes a 10 MB output
flood in a few hundred reads."""

SEND_TIMEOUT = 30.0
"""A sandbox whose client stops reading for this long is treated as gone (its socket buffer is
full); without a bound a wedged sandbox would hang every task replying to it."""
EXPIRED_WAIT = 0.01
"""How long a sender whose deadline has passed waits for its cancellation before it writes
anyway (the write then fails at once and closes the channel, as before)."""


class ChannelClosed(Exception):
    """The sandbox closed its end of the channel (it exited, crashed or was killed)."""


class Channel:
    """Framed, typed messages over one sandbox's byte stream.

    One task reads (:meth:`receive`); any number of tasks may :meth:`send`.
    """

    def __init__(
        self,
        stream: ByteStream,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        send_timeout: float = SEND_TIMEOUT,
    ) -> None:
        self._stream = stream
        self._send_timeout = send_timeout
        self._decoder = FrameDecoder(max_frame_size=max_frame_size, accept=SANDBOX_TO_HOST)
        self._pending: deque[tuple[Message, int]] = deque()
        # fast_acquire: an uncontended send does not yield to the loop an extra time (a
        # cancelled caller is still refused at acquire, before any byte is written).
        self._send_lock = anyio.Lock(fast_acquire=True)
        self._closed = False
        self.version: int | None = None
        """The negotiated protocol version, once :meth:`handshake` succeeded."""

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` was called."""
        return self._closed

    @property
    def partial_frame(self) -> int:
        """Bytes received of a frame whose rest has not arrived (0 between frames)."""
        return self._decoder.buffered

    async def send(self, message: Message) -> None:
        """Send one message. Raises :class:`ChannelClosed` if the sandbox is gone, and the
        encoder's :class:`~bridge_protocol.ProtocolError` (nothing written) for a message the
        wire cannot carry."""
        await self.send_frame(encode(message))

    async def send_frame(self, frame: bytes) -> None:
        """Send one frame made by :func:`~bridge_protocol.encode` (a caller that needs its size
        encodes it first).

        The write is shielded from cancellation (and bounded instead): a frame cut in half by a
        cancelled caller would desynchronise the stream for every later message. It is bounded
        by the send timeout and by the caller's own deadline (a call's timeout must hold even
        against a sandbox that stops reading): a write cut by either closes the channel.
        """
        async with self._send_lock:
            # One scope both shields the write from outside cancellation and bounds it: its own
            # deadline still cancels it (cheaper on every frame than a fail_after inside a shield).
            now = anyio.current_time()
            deadline = min(now + self._send_timeout, anyio.current_effective_deadline())
            if deadline <= now:
                # The caller's time ran out before a byte was written: its cancellation is
                # delivered here, nothing is cut and the channel stays usable. Not a mere
                # checkpoint: on asyncio the caller's scope is cancelled by a timer the loop runs
                # on its next turn, after a task that only yielded has resumed.
                await anyio.sleep(EXPIRED_WAIT)
                now = anyio.current_time()
                deadline = min(now + self._send_timeout, anyio.current_effective_deadline())
            with anyio.CancelScope(shield=True, deadline=deadline) as scope:
                try:
                    await self._stream.send(frame)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    raise ChannelClosed(
                        f"cannot send to the sandbox: {exc or type(exc).__name__}"
                    ) from exc
            if scope.cancelled_caught:
                with anyio.CancelScope(shield=True):
                    await self.aclose()
                raise ChannelClosed("the sandbox did not read its channel in time")

    async def receive(self) -> Message:
        """The next message from the sandbox.

        Raises :class:`ChannelClosed` at end of stream and
        :class:`~bridge_protocol.ProtocolError` on any invalid frame (the channel is then unusable).
        """
        message, _ = await self.receive_frame()
        return message

    async def receive_frame(self) -> tuple[Message, int]:
        """The next message and the size of the frame it came in (see :meth:`receive`)."""
        while not self._pending:
            try:
                data = await self._stream.receive(RECEIVE_CHUNK)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise ChannelClosed("the sandbox closed the channel") from exc
            except OSError as exc:
                raise ChannelClosed(f"the sandbox channel failed: {exc}") from exc
            self._pending.extend(self._decoder.feed_frames(data))
        return self._pending.popleft()

    async def handshake(self, session: str = "") -> int:
        """Wait for the sandbox's :class:`Hello`, answer :class:`Welcome` with the chosen version.

        With no common version a :class:`Refusal` is sent, the channel closed and
        :class:`~bridge_protocol.UnsupportedVersion` raised. Callers bound the wait themselves
        (``anyio.fail_after``).
        """
        first = await self.receive()
        if not isinstance(first, Hello):
            raise UnexpectedMessage(f"expected hello as the first frame, got {type(first).KIND!r}")
        version = negotiate(first.versions)
        if version is None:
            message = _mismatch(first, SUPPORTED_VERSIONS)
            try:
                await self.send(Refusal(ErrorCode.UNSUPPORTED_VERSION, message, SUPPORTED_VERSIONS))
            finally:
                await self.aclose()
            raise UnsupportedVersion(message)
        await self.send(Welcome(version=version, session=session))
        self.version = version
        return version

    async def aclose(self) -> None:
        """Close the stream (idempotent, never raises for an already broken stream)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._stream.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            logger.debug("closing a broken sandbox channel: %s", exc)


def _mismatch(hello: Hello, ours: tuple[int, ...]) -> str:
    """Which side is older, in words: the sandbox's offer is hostile, so it is bounded."""
    offered = sorted(set(hello.versions))
    shown = ", ".join(map(str, offered[:8])) + (", ..." if len(offered) > 8 else "")
    client = hello.client_version[:40] or "unknown"
    if offered and min(offered) > max(ours):
        side = "the image is NEWER than this bridge (upgrade the bridge, or use its own image)"
    elif offered and max(offered) < min(ours):
        side = "the image is OLDER than this bridge"
    else:
        side = "no common version"
    return (
        f"its sandbox client {client!r} speaks protocol [{shown}], the bridge speaks "
        f"{list(ours)}: {side}"
    )
