"""Messages for the main thread, which keeps the event loop turning while it waits for them.

Tasks that user code left on the persistent loop (a poller, a consumer) therefore keep running
between executions, as they would in a notebook kernel, instead of freezing until the next
execution that awaits something.
"""

from __future__ import annotations

import queue
import sys
import threading
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = ["Inbox", "has_tasks"]

T = TypeVar("T")


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def has_tasks(loop: asyncio.AbstractEventLoop | None) -> bool:
    """Whether user code left tasks on ``loop`` for this thread to run (None: no loop was made,
    so none; a loop user code runs in a thread of its own is not this thread's to turn)."""
    if loop is None or loop.is_closed() or loop.is_running():
        return False
    import asyncio

    return bool(asyncio.all_tasks(loop))


class Inbox(Generic[T]):
    """A queue whose :meth:`get` runs ``loop`` while it waits, if tasks are pending on it."""

    def __init__(self) -> None:
        # SimpleQueue: a put wakes a waiting get once (a Queue's Condition wakes it, then makes
        # it wait again for the mutex the putting thread still holds): ~5 us less per hand-off.
        self._queue: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._wake: Callable[[], object] | None = None

    def put(self, item: T) -> None:
        """Add ``item`` (any thread) and wake a waiting :meth:`get`."""
        self._queue.put(item)
        with self._lock:
            wake = self._wake
        if wake is not None:
            try:
                wake()
            except RuntimeError:
                pass  # the loop was closed by user code meanwhile: get() notices by itself

    def get(self, loop: asyncio.AbstractEventLoop | None) -> T:
        """The next item (main thread). Background tasks on ``loop`` run while waiting."""
        if not has_tasks(loop):
            return self._queue.get()
        assert loop is not None
        import asyncio

        asyncio.set_event_loop(loop)
        waiter: asyncio.Future[None] = loop.create_future()
        with self._lock:
            # put() happens before the wake-up: an item is either seen by get_nowait below or
            # announced through this callback.
            self._wake = lambda: loop.call_soon_threadsafe(_resolve, waiter)
        try:
            while True:
                try:
                    return self._queue.get_nowait()
                except queue.Empty:
                    pass
                try:
                    loop.run_until_complete(waiter)
                except BaseException:
                    # Raised by a task left running by user code: report it as that code's
                    # output (it reaches the next execution) and keep serving.
                    traceback.print_exc(file=sys.stderr)
                    if loop.is_closed():
                        return self._queue.get()
        finally:
            with self._lock:
                self._wake = None
