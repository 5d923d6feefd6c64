"""The call lane of a stdio server: a ``tools/call`` written straight to its stdin, its answer
taken straight from its stdout reader.

Why: through the SDK's dispatcher a proxied call crossed four hand-overs between tasks (the
request's write stream to our writer task, the line from our reader to the session's relay, the
relay to the dispatcher's read loop, the dispatcher to the request's answer stream), each a
loop turn or two, and built and validated a JSON-RPC model each way: 1.04 ms per call of the
host's time against 0.15 ms for the same line written and read by hand (``bench/floor.py``
figures in ``docs/performance.md``). Here the caller writes the line itself and waits on one
event that the reader sets; the answer is parsed once, into plain values, and shape-checked by
:func:`~._results.checked_call_result` as before.

What stays the SDK's: everything else on the connection (``initialize``, tool lists, the
server's own requests and notifications, resources, prompts). Lane requests carry string ids
with :data:`ID_PREFIX`, which the SDK (integer ids) never uses, so the reader can tell their
answers apart by a byte search before anything parses the line.

Where the lane is not used: with tracing on, calls go through the dispatcher, which makes the
upstream call's span and passes its trace context on; on trio, because a send cancelled there
may have written part of a line (on asyncio the whole line is in the pipe's transport before
the first await, so a cancelled caller never leaves half a request on the server's stdin).

Failures are the dispatcher's own errors (:class:`~mcp.shared.exceptions.MCPError` with the same
codes), so callers handle both paths alike: the server's error answer, ``REQUEST_TIMEOUT``
(a ``notifications/cancelled`` is sent upstream, as on a caller's cancel), ``CONNECTION_CLOSED``
when the connection ends with the call in flight, and ``INTERNAL_ERROR`` naming what is wrong
with an answer that is not a JSON-RPC response.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict  # pydantic needs this one below Python 3.12

from ._results import describe as _kind

__all__ = ["ID_PREFIX", "CallLane", "LaneClosed", "LaneTimeout"]

logger = logging.getLogger("bridge_core.proxy")

ID_PREFIX = "mcp-bridge-call-"
"""The start of every lane request's id (a string: the SDK numbers its own requests)."""
_MARK = f'"{ID_PREFIX}'.encode()
"""How a line that may concern a lane call starts its id or progress token (a byte search)."""
_PROGRESS_KEPT = 16
"""Progress notifications of one call kept while its client is slow to take them."""
_CANCEL_WRITE_TIMEOUT = 2.0
"""Bound on writing the courtesy ``notifications/cancelled`` of an abandoned call."""
_SHOWN_ERROR_CHARS = 300
_serials = itertools.count(1)


@with_config(ConfigDict(extra="ignore"))
class _Line(TypedDict, total=False):
    """What the lane reads of a line: its values as plain JSON values, nothing built per field."""

    jsonrpc: object
    id: object
    method: object
    params: object
    result: object
    error: object


# pydantic-core's parser: the same strict JSON and nesting bound as the SDK's own adapter.
_line_adapter = TypeAdapter(_Line)

SendLine = Callable[[bytes], Awaitable[None]]
"""Writes one whole line to the server's stdin; raises when the connection is gone."""


class LaneClosed(MCPError):
    """The lane's own ``CONNECTION_CLOSED``: the connection ended, or its stdin broke. A class
    of its own because the code alone cannot tell it from a live server's error answer:
    -32000 is also JSON-RPC's generic "server error", which servers use freely."""


class LaneTimeout(MCPError):
    """The lane's own ``REQUEST_TIMEOUT``: the call's time limit passed. A class of its own for
    the same reason as :class:`LaneClosed`: a server may answer with -32001 itself (its own
    backend timed out), which is its error, not the bridge's timeout."""


_Progress = tuple[float, float | None, str | None]


class _Waiter:
    __slots__ = ("answer", "on_progress", "progress", "wake")

    def __init__(self, on_progress: ProgressFnT | None) -> None:
        self.wake = anyio.Event()
        """Set when the answer, or progress, arrives (a new one after each progress)."""
        self.answer: dict[str, Any] | MCPError | None = None
        self.on_progress = on_progress
        self.progress: deque[_Progress] = deque(maxlen=_PROGRESS_KEPT)
        """Progress not yet relayed, oldest first (past the bound the oldest is dropped)."""

    def settle(self, answer: dict[str, Any] | MCPError) -> None:
        self.answer = answer
        self.wake.set()


class CallLane:
    """``tools/call`` requests of one stdio connection that bypass the SDK's dispatcher."""

    def __init__(self, send_line: SendLine, in_flight: dict[types.RequestId, str]) -> None:
        """``in_flight``: the transport's record of requests awaiting an answer (id → method),
        which lane calls join while they wait (it bounds tool-list answers)."""
        self._send_line = send_line
        self._in_flight = in_flight
        self._waiters: dict[str, _Waiter] = {}
        self._closed: str | None = None

    async def call(
        self,
        params: dict[str, Any],
        *,
        time_limit: float,
        on_progress: ProgressFnT | None = None,
    ) -> Any:
        """Send ``tools/call`` with ``params`` (JSON values) and return the answer's ``result``
        (unchecked: the caller checks its shape). Raises :class:`MCPError`."""
        if self._closed is not None:
            raise LaneClosed(code=types.CONNECTION_CLOSED, message=self._closed)
        request_id = f"{ID_PREFIX}{next(_serials)}"
        if on_progress is not None:  # the request id doubles as the token, as in the SDK
            params = {**params, "_meta": {"progressToken": request_id}}
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        line = _encode(request)
        waiter = _Waiter(on_progress)
        self._waiters[request_id] = waiter
        self._in_flight[request_id] = "tools/call"
        written = False
        try:
            with anyio.fail_after(time_limit):
                # A write interrupted by the time limit or a cancel may have put the line in the
                # pipe already (it waits for the server to read after that), so a started write
                # counts as sent, as in the SDK: a cancel for an id the server never saw is
                # ignored, while a skipped one would leave the server working for nobody.
                written = True
                await self._write(line)
                while waiter.answer is None:
                    await waiter.wake.wait()
                    waiter.wake = anyio.Event()
                    while waiter.progress and waiter.answer is None:
                        await _relay_progress(waiter, waiter.progress.popleft())
        except TimeoutError:
            if written:
                await self._cancel(request_id, f"timed out after {time_limit:g}s", shield=False)
            raise LaneTimeout(
                code=types.REQUEST_TIMEOUT, message="Request 'tools/call' timed out"
            ) from None
        except anyio.get_cancelled_exc_class():
            if written and waiter.answer is None:
                await self._cancel(request_id, "caller cancelled", shield=True)
            raise
        finally:
            del self._waiters[request_id]
            self._in_flight.pop(request_id, None)
        answer = waiter.answer
        if not isinstance(answer, LaneClosed):
            # A server's last progress often comes in the same read as its answer: the client
            # sees it before the result, as through the SDK (whose relay runs on its own).
            while waiter.progress:
                await _relay_progress(waiter, waiter.progress.popleft())
        if isinstance(answer, MCPError):
            raise answer
        return answer["result"]

    async def _write(self, line: bytes) -> None:
        try:
            await self._send_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise LaneClosed(code=types.CONNECTION_CLOSED, message="Connection closed") from None

    async def _cancel(self, request_id: str, reason: str, *, shield: bool) -> None:
        """The courtesy cancel the SDK sends for an abandoned request; best effort, bounded."""
        line = _encode(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": reason},
            }
        )
        with anyio.move_on_after(_CANCEL_WRITE_TIMEOUT, shield=shield):
            try:
                await self._send_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass

    # -- the reader's side --------------------------------------------------------------------

    def expects(self, line: bytes | bytearray) -> bool:
        """Whether ``line`` may answer (or report progress on) a lane call: a byte search."""
        return bool(self._waiters) and _MARK in line

    def take(self, line: bytes | bytearray) -> bool:
        """Deliver ``line`` if it is a lane call's answer or progress; False to leave it to the
        SDK's session (anything else, including a line that does not parse)."""
        try:
            message = _line_adapter.validate_json(line)
        except ValueError:
            return False
        request_id = message.get("id")
        if "method" in message:
            if request_id is None and message.get("method") == "notifications/progress":
                return self._progress(message.get("params"))
            return False
        waiter = self._waiters.get(request_id) if isinstance(request_id, str) else None
        if waiter is None or waiter.answer is not None:
            return False
        waiter.settle(_answer(message))
        return True

    def settle(self, message: object) -> bool:
        """Deliver an answer the session's parse made of a line :meth:`take` did not claim;
        False to leave it to the session. Such a line names a lane call in a way the byte
        search does not see (its id in escaped JSON: ``"mcp\\u002dbridge-call-1"``), or is
        the transport's error in place of an answer that is not JSON-RPC (``_stdio``): either
        way, without this its call would wait out its time limit."""
        if not self._waiters or not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return False
        waiter = self._waiters.get(message.id) if isinstance(message.id, str) else None
        if waiter is None or waiter.answer is not None:
            return False
        if isinstance(message, types.JSONRPCError):
            error = message.error
            waiter.settle(MCPError(code=error.code, message=error.message, data=error.data))
        else:
            waiter.settle({"result": message.result})
        return True

    def close(self, reason: str = "Connection closed") -> None:
        """The connection ended: calls in flight and later ones fail with ``CONNECTION_CLOSED``."""
        if self._closed is None:
            self._closed = reason
        for waiter in self._waiters.values():
            if waiter.answer is None:
                waiter.settle(LaneClosed(code=types.CONNECTION_CLOSED, message=reason))

    def _progress(self, params: object) -> bool:
        if not isinstance(params, dict):
            return False
        token, progress = params.get("progressToken"), params.get("progress")
        waiter = self._waiters.get(token) if isinstance(token, str) else None
        if waiter is None or waiter.on_progress is None:
            return False
        if not isinstance(progress, int | float) or isinstance(progress, bool):
            return True  # ours, but not a progress value: dropped, as the SDK drops it
        total, text = params.get("total"), params.get("message")
        # Relayed by the call's own task, not awaited here: the relay may wait on the client
        # (up to its bound), and the reader must not keep the server's other answers waiting
        # meanwhile. Only the newest few are kept: a flood costs the reader a parse per
        # line and the call nothing but what its client takes.
        waiter.progress.append(
            (
                float(progress),
                float(total) if isinstance(total, int | float) else None,
                text if isinstance(text, str) else None,
            )
        )
        waiter.wake.set()
        return True


async def _relay_progress(waiter: _Waiter, report: _Progress) -> None:
    assert waiter.on_progress is not None
    try:
        await waiter.on_progress(*report)
    except Exception:
        logger.warning("relaying the progress of a tool call failed", exc_info=True)


def _encode(message: dict[str, Any]) -> bytes:
    # Compact, non-ASCII as UTF-8 like the SDK's writer; the arguments were checked to be JSON
    # values by the gateway, and JSON escapes every newline inside a string.
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _answer(message: _Line) -> dict[str, Any] | MCPError:
    """The answer as the caller gets it: the message (holding ``result``) or the error."""
    problem = None
    if message.get("jsonrpc") != "2.0":
        problem = "'jsonrpc' is not \"2.0\""
    elif "error" in message:
        error = message["error"]
        if not isinstance(error, dict):
            problem = "'error' is not an object"
        else:
            code, text = error.get("code"), error.get("message")
            if not isinstance(code, int) or isinstance(code, bool):
                problem = "error.code is not an integer"
            elif not isinstance(text, str):
                problem = "error.message is not a string"
            else:
                return MCPError(code=code, message=text, data=error.get("data"))
    elif "result" not in message:
        problem = "it has neither 'result' nor 'error'"
    elif not isinstance(message["result"], dict):
        problem = f"'result' is {_kind(message['result'])}, not an object"
    if problem is not None:
        return MCPError(
            code=types.INTERNAL_ERROR,
            message="the answer to tools/call is not a valid JSON-RPC response: "
            f"{problem[:_SHOWN_ERROR_CHARS]}",
        )
    return dict(message)
