"""Handing messages between the tasks of an upstream connection without spare loop turns.

anyio's memory object streams yield to the event loop before every ``send`` and ``receive``
(``checkpoint()``, a whole loop iteration) even when the other side is already waiting; a proxied
call crossed four such hand-overs each way. Here an item goes straight to a receiver that is
waiting (``send_nowait``) or is taken from a sender that is waiting (``receive_nowait``); only
when nobody waits does the caller wait as ``send``/``receive`` do. Nobody starves: with the
zero-buffer streams used here, the other side must run again before the next hand-over can skip
the wait.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from types import TracebackType
from typing import Generic, Self, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["EagerSend", "handed_over", "items", "taken"]

T = TypeVar("T")


async def handed_over(stream: MemoryObjectSendStream[T], item: T) -> None:
    """Send ``item``: at once to a waiting receiver, else waiting as ``send`` does."""
    try:
        stream.send_nowait(item)
    except anyio.WouldBlock:
        await stream.send(item)


async def taken(stream: MemoryObjectReceiveStream[T]) -> T:
    """The next item: at once from a waiting sender, else waiting as ``receive`` does."""
    try:
        return stream.receive_nowait()
    except anyio.WouldBlock:
        return await stream.receive()


def items(source: AsyncIterable[T]) -> AsyncIterable[T]:
    """``source``'s items; a memory stream's taken as :func:`taken` does (an iterator object,
    not an async generator: a cancelled relay leaves nothing to finalise)."""
    if isinstance(source, MemoryObjectReceiveStream):
        return _Taken(source)
    return source


class _Taken(Generic[T]):
    def __init__(self, stream: MemoryObjectReceiveStream[T]) -> None:
        self._stream = stream

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        try:
            return await taken(self._stream)
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class EagerSend(Generic[T]):
    """A memory object send stream whose ``send`` is :func:`handed_over` (the write stream
    handed to the SDK's dispatcher)."""

    def __init__(self, stream: MemoryObjectSendStream[T]) -> None:
        self._stream = stream

    async def send(self, item: T) -> None:
        await handed_over(self._stream, item)

    def close(self) -> None:
        self._stream.close()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()
