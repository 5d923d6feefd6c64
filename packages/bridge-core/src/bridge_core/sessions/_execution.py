"""The host-side state of one ``Execute`` while it runs, and what it keeps of the sandbox's frames.

An :class:`Execution` is what the sandbox's reader (:mod:`._sandbox`) hands each frame of the
running code to: its output goes to the execution's collector and live listener, its progress
through a rate gate, its images into a capped list. Every such frame is bounded before the host
keeps it, and so is the ``Result`` (:func:`bounded_result`), whose fields the bridge forwards to
the MCP client: a sandbox can forge any frame. Running an execution (timeouts, interrupts, the
result the caller gets) is :mod:`._execute`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

import anyio
from bridge_protocol import Display, ErrorInfo, Execute, Progress, Result, Stream

from bridge_core import tracing
from bridge_core.client_link import ClientLink, as_client_link
from bridge_core.sessions._output import OutputCollector
from bridge_core.sessions._progress import ProgressGate, cut_message
from bridge_core.sessions.types import ExecutionListener, Image

__all__ = ["Execution", "bounded_result"]

logger = logging.getLogger("bridge_core.sessions")

LISTENER_TIMEOUT = 5.0
"""Longest one live-output or progress callback may take before the listener is dropped."""
MAX_IMAGES = 32
MAX_IMAGE_BYTES = 32 * 1024 * 1024
"""Images are kept in bridge memory until the result is returned, so they are capped too."""
MAX_VALUE_CHARS = Execute(execution_id="", code="").repr_limit
"""The ``repr_limit`` every ``Execute`` asks for: a forged ``Result`` gets no more."""
MAX_ERROR_TYPE_CHARS = 200
MAX_ERROR_MESSAGE_CHARS = 16 * 1024
MAX_TRACEBACK_CHARS = 64 * 1024 + 100
"""The sandbox client's own caps (``_traceback``), plus the room of its omission marker."""


class Execution:
    """The host-side state of one ``Execute`` while it runs."""

    def __init__(
        self,
        execution_id: str,
        output: OutputCollector,
        listener: ExecutionListener | None,
        *,
        client_key: str | None = None,
        grant_scope: str = "",
    ) -> None:
        self.id = execution_id
        self.output = output
        self.listener = listener
        # Kept apart from the listener, which is dropped when it fails or blocks: the client
        # stays the one to ask for approvals until the execution ends.
        self.client: ClientLink | None = as_client_link(getattr(listener, "client", None))
        self.client_key = client_key
        self.grant_scope = grant_scope
        self.images: list[Image] = []
        self.image_bytes = 0
        self.dropped_images = 0
        self.result: Result | None = None
        self.done = anyio.Event()
        """Set on the Result frame or when the sandbox's channel ends, whichever comes first."""
        self.calls: dict[int, anyio.CancelScope] = {}
        self.sent = False
        """True once the Execute frame was written (only then is there code to interrupt)."""
        self.progress_gate = ProgressGate()
        self.trace = tracing.current_execution()
        """The execution's span (None when tracing is off): the parent of its calls' spans."""

    async def on_output(self, stream: Stream, text: str) -> None:
        await self.output.add(stream, text)
        if self.listener is not None:
            await self._notify(self.listener.on_output(stream, text))

    async def on_progress(self, message: Progress) -> None:
        # Sandbox code can forge Progress frames past the client's own limit (and send values that
        # go back): the host limits too.
        if self.listener is not None and self.progress_gate.admit(message.progress):
            listener = self.listener
            await self._notify(
                listener.on_progress(message.progress, message.total, cut_message(message.message))
            )

    async def _notify(self, event: Coroutine[Any, Any, None]) -> None:
        # Listeners run on the reader task: one that fails or hangs (e.g. the MCP client went
        # away) is dropped, so it can neither end the execution nor stall its Result frame.
        try:
            with anyio.move_on_after(LISTENER_TIMEOUT) as scope:
                await event
        except Exception:
            logger.exception("execution listener failed; no more live events for execution")
            self.listener = None
            return
        if scope.cancelled_caught:
            logger.warning("execution listener blocked for %g s; dropped", LISTENER_TIMEOUT)
            self.listener = None

    def on_display(self, message: Display) -> None:
        if len(self.images) >= MAX_IMAGES or self.image_bytes + len(message.data) > MAX_IMAGE_BYTES:
            self.dropped_images += 1
            return
        self.images.append(Image(message.mime, message.data))
        self.image_bytes += len(message.data)

    def cancel_calls(self) -> None:
        for scope in self.calls.values():
            scope.cancel()
        self.calls.clear()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f"... [{len(text) - limit} more characters]"
    return text[: max(0, limit - len(marker))] + marker


def bounded_result(result: Result) -> Result:
    """``result`` with its fields held to the sandbox client's own caps: they go to the MCP
    client (the model's context), and a forged frame could hold up to the frame limit."""
    error = result.error
    value = None if result.value is None else _cut(result.value, MAX_VALUE_CHARS)
    if error is not None:
        error = ErrorInfo(
            _cut(error.type, MAX_ERROR_TYPE_CHARS),
            _cut(error.message, MAX_ERROR_MESSAGE_CHARS),
            _cut(error.traceback, MAX_TRACEBACK_CHARS),
        )
    if value is result.value and error == result.error:
        return result
    return Result(result.execution_id, result.status, value, error)
