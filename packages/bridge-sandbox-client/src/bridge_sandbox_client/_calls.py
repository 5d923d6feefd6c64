"""Calls and requests in flight to the host, multiplexed by call id.

Every call is a :class:`concurrent.futures.Future` completed by the channel's reader thread. Async
callers await it through :func:`asyncio.wrap_future` on whatever loop they run on (ours, or one
user code made with ``asyncio.run``); sync callers block on it. Cancelling the future (task
cancellation, ``asyncio.wait_for`` timeout, interrupt) sends ``CancelCall`` exactly once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading
from collections.abc import Callable
from typing import Any

from bridge_protocol import Call, CancelCall, Message, Reply, Request

from bridge_sandbox_client.errors import BridgeDisconnected, ToolCancelled, error_from_fault

__all__ = ["CallRegistry", "PendingCall"]

Send = Callable[[Message], None]


class PendingCall(concurrent.futures.Future[Any]):
    """A call or request in flight; knows its target for error messages."""

    def __init__(self, server: str | None, tool: str | None) -> None:
        super().__init__()
        self.server = server
        self.tool = tool


class CallRegistry:
    """Allocates call ids, sends calls and requests, and resolves them from replies."""

    def __init__(self, send: Send, execution_id: Callable[[], str]) -> None:
        self._send = send
        self._execution_id = execution_id
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[PendingCall, str]] = {}
        self._closed: str | None = None

    # --- starting calls ----------------------------------------------------------------------

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> PendingCall:
        """Send a ``Call``; the future resolves to the raw ``CallToolResult`` dict."""
        return self._start(
            lambda cid, eid: Call(
                call_id=cid, execution_id=eid, server=server, tool=tool, arguments=arguments
            ),
            server=server,
            tool=tool,
        )

    def request(self, method: str, params: dict[str, Any]) -> PendingCall:
        """Send a ``Request``; the future resolves to the reply's value."""
        return self._start(
            lambda cid, eid: Request(call_id=cid, execution_id=eid, method=method, params=params),
            server=params.get("server") if isinstance(params.get("server"), str) else None,
            tool=None,
        )

    def _start(
        self, build: Callable[[int, str], Message], *, server: str | None, tool: str | None
    ) -> PendingCall:
        future = PendingCall(server, tool)
        call_id = next(self._ids)
        execution_id = self._execution_id()
        message = build(call_id, execution_id)
        with self._lock:
            if self._closed is not None:
                raise BridgeDisconnected(self._closed, server=server, tool=tool)
            self._pending[call_id] = (future, execution_id)
        future.add_done_callback(lambda f: self._on_done(call_id, f))
        try:
            self._send(message)
        except BaseException:
            with self._lock:
                self._pending.pop(call_id, None)
            raise
        return future

    # --- waiting -----------------------------------------------------------------------------

    @staticmethod
    async def wait(future: PendingCall) -> Any:
        """Await a call from any event loop; cancelling the awaiting task abandons the call."""
        return await asyncio.wrap_future(future)

    @staticmethod
    def wait_sync(future: PendingCall) -> Any:
        """Block until the call completes; an interrupt (KeyboardInterrupt) abandons it."""
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise ToolCancelled(
                "the call was cancelled", server=future.server, tool=future.tool
            ) from None
        except BaseException:
            future.cancel()
            raise

    # --- reader thread side --------------------------------------------------------------------

    def resolve(self, reply: Reply) -> None:
        """Complete the call ``reply`` answers; replies to abandoned calls are dropped."""
        with self._lock:
            entry = self._pending.pop(reply.call_id, None)
        if entry is None:
            return
        future, _ = entry
        if reply.fault is not None:
            outcome: BaseException | None = error_from_fault(
                reply.fault, server=future.server, tool=future.tool
            )
        else:
            outcome = None
        try:
            if outcome is not None:
                future.set_exception(outcome)
            else:
                future.set_result(reply.value)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled concurrently by its caller

    def abandon(self, execution_id: str) -> None:
        """Cancel every call of ``execution_id`` still in flight (each sends ``CancelCall``)."""
        with self._lock:
            futures = [f for f, eid in self._pending.values() if eid == execution_id]
        for future in futures:
            future.cancel()

    def close(self, reason: str) -> None:
        """The channel is gone: fail every call in flight and refuse new ones."""
        with self._lock:
            self._closed = reason
            entries = list(self._pending.values())
            self._pending.clear()
        for future, _ in entries:
            try:
                future.set_exception(
                    BridgeDisconnected(reason, server=future.server, tool=future.tool)
                )
            except concurrent.futures.InvalidStateError:
                pass

    def _on_done(self, call_id: int, future: concurrent.futures.Future[Any]) -> None:
        if not future.cancelled():
            return
        with self._lock:
            still_pending = self._pending.pop(call_id, None) is not None
        if still_pending:
            try:
                self._send(CancelCall(call_id=call_id))
            except (OSError, ValueError):
                pass  # channel closed: nothing left to cancel
