"""Calls and requests in flight to the host, multiplexed by call id.

Every call is a :class:`concurrent.futures.Future` (:class:`~._pending.PendingCall`, imported
with the first call) completed by the thread reading the channel.
Async callers await it through :func:`asyncio.wrap_future` on whatever loop they run on (ours, or
one user code made with ``asyncio.run``); sync callers block on it. Cancelling the future (task
cancellation, ``asyncio.wait_for`` timeout, interrupt) sends ``CancelCall`` exactly once.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridge_protocol import Call, CancelCall, Message, Reply, Request

from bridge_sandbox_client._channel import signals_deferred
from bridge_sandbox_client.errors import BridgeDisconnected, ToolCancelled, error_from_fault

if TYPE_CHECKING:
    from bridge_sandbox_client._pending import PendingCall

__all__ = ["CallRegistry"]

Send = Callable[[Message], None]


class CallRegistry:
    """Allocates call ids, sends calls and requests, and resolves them from replies."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[PendingCall, str]] = {}
        self._execution: str | None = None
        self._closed: str | None = None
        os.register_at_fork(after_in_child=self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        # No reader thread survives a fork, so no reply could ever reach the child.
        self._lock = threading.Lock()
        self._pending = {}
        self._closed = (
            "a forked child process cannot call tools: call them from the main process "
            "(threads are fine)"
        )

    # --- executions ----------------------------------------------------------------------------

    def begin(self, execution_id: str) -> None:
        """Calls started from now on belong to ``execution_id``."""
        with self._lock:
            self._execution = execution_id

    def end(self, execution_id: str) -> None:
        """The execution is over: its calls still in flight fail with :class:`ToolCancelled`.

        The host stops answering an execution's calls once its result is in, so a call left
        behind by a background task or thread would otherwise wait forever.
        """
        with self._lock:
            if self._execution == execution_id:
                self._execution = None
            ended = [(cid, f) for cid, (f, eid) in self._pending.items() if eid == execution_id]
            for call_id, _ in ended:
                del self._pending[call_id]
        for call_id, future in ended:
            future.settle(
                error=ToolCancelled(
                    "the execution that made this call ended before the answer came",
                    server=future.server,
                    tool=future.tool,
                )
            )
            self._send_cancel(call_id)

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
        server, tool = params.get("server"), params.get("tool")
        return self._start(
            lambda cid, eid: Request(call_id=cid, execution_id=eid, method=method, params=params),
            server=server if isinstance(server, str) else None,
            tool=tool if isinstance(tool, str) else None,
        )

    def _start(
        self, build: Callable[[int, str], Message], *, server: str | None, tool: str | None
    ) -> PendingCall:
        # Here, in the thread of the code making its first call: an import that fails (no file
        # descriptor left) is that call's error. Every future the registry holds was made here,
        # so the reader thread never imports it.
        from bridge_sandbox_client._pending import PendingCall

        future = PendingCall(server, tool)
        call_id = next(self._ids)
        with self._lock:
            # Reading the execution and registering the call under one lock: end() cannot slip
            # in between and miss this call.
            if self._closed is not None:
                raise BridgeDisconnected(self._closed, server=server, tool=tool)
            execution_id = self._execution
            if execution_id is None:
                raise ToolCancelled(
                    "no execution is running: tools can be called only while an execution "
                    "runs (not from a task or thread left running between executions)",
                    server=server,
                    tool=tool,
                )
            self._pending[call_id] = (future, execution_id)
        message = build(call_id, execution_id)
        future.add_done_callback(lambda _: self._on_done(call_id, future))
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
        import asyncio  # awaited, so already imported: plain code never needs it

        return await asyncio.wrap_future(future)

    @staticmethod
    def wait_sync(future: PendingCall) -> Any:
        """Block until the call completes; an interrupt (KeyboardInterrupt) abandons it."""
        return future.wait_sync()

    # --- reader thread side --------------------------------------------------------------------

    def resolve(self, reply: Reply) -> None:
        """Complete the call ``reply`` answers; replies to abandoned calls are dropped."""
        with self._lock:
            entry = self._pending.pop(reply.call_id, None)
        if entry is None:
            return
        future, _ = entry
        if reply.fault is not None:
            future.settle(
                error=error_from_fault(reply.fault, server=future.server, tool=future.tool)
            )
        else:
            future.settle(reply.value)

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
            future.settle(error=BridgeDisconnected(reason, server=future.server, tool=future.tool))

    def _send_cancel(self, call_id: int) -> None:
        try:
            self._send(CancelCall(call_id=call_id))
        except (OSError, ValueError):
            pass  # channel closed: nothing left to cancel

    def _on_done(self, call_id: int, future: PendingCall) -> None:
        if not future.cancelled():
            return
        # An interrupt repeats until the code stops: one landing between taking the call out
        # and sending its cancel would lose the cancel. Signals wait until it is out.
        with signals_deferred():
            with self._lock:
                still_pending = self._pending.pop(call_id, None) is not None
            if still_pending:
                self._send_cancel(call_id)
