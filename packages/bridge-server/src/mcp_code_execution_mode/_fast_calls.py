"""``run_python`` calls answered without the SDK's per-message plumbing, on stdio.

Per warm call, the SDK's server path costs more of the bridge's CPU than the bridge's own work
(py-spy, 2026-12-02): the dual-era loop relays every message through a memory stream and a task
of its own, the dispatcher validates the line into a pydantic ``JSONRPCMessage``, spawns a
handler task, the runner validates ``_meta`` and the params twice (surface, then the typed
model), builds a session, dumps the result and validates it again against the negotiated
version's surface, and wraps it in a ``JSONRPCResponse`` model.

Here the transport shows each line to :meth:`FastCalls.take` first. A ``tools/call`` of
``run_python`` whose shape is exactly the common one (see :func:`_fast_request`) on a connection
whose handshake the SDK completed is taken over: the very handler the SDK would call runs in a
task of its own, with a real ``ServerSession`` over the SDK's own dispatcher (progress, and
requests to the client such as approvals, go out and are answered exactly as on the SDK path),
and its result is written as the SDK writes it. Anything else (``initialize``, lists, ping,
responses to the bridge's own requests, notifications, any request of another shape, including
every malformed one) goes to the SDK unchanged, so the SDK stays the reference for everything
that is not the one hot call. ``notifications/cancelled`` for a taken call cancels it as the
SDK's dispatcher does (the call is then never answered) and is passed on to the SDK as well.

What the SDK still does on a taken call is only what must be identical: the result's dump
(``model_dump``/``model_dump_json`` of the same models). The per-version result sieve the SDK
applies is checked once per protocol version to leave a complete ``run_python`` result
unchanged; a version where it would change anything is served by the SDK path only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import CallOptions, coerce_request_id
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    cancelled_request_id_from_params,
    handler_exception_to_error_data,
)
from mcp.shared.message import MessageMetadata, SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import methods as _methods
from pydantic_core import from_json, to_json

from mcp_code_execution_mode._stdio import _Answers
from mcp_code_execution_mode.rendering import WireResult, error_wire, render_wire
from mcp_code_execution_mode.server import RunPythonHandler
from mcp_code_execution_mode.tool import TOOL_NAME

__all__ = ["FastCalls"]

logger = logging.getLogger(__name__)

CLOSED_ANSWER_BOUND = 1.0
"""Seconds a call cut short by the connection's end may take to say so (the SDK's own bound for
the same write, ``_SHUTDOWN_WRITE_TIMEOUT``): a client that stopped reading must not hold the
bridge's exit."""

_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS_KEYS = frozenset({"name", "arguments", "_meta"})
_META_KEYS = frozenset({"progressToken", "traceparent", "tracestate", "baggage"})
"""``_meta`` keys a taken call may carry: the progress token and W3C trace context (SEP-414).
Any other key (the 2026 envelope's reserved ones among them) leaves the call to the SDK."""
_ID_RANGE = range(-(2**63), 2**63)
_TRANSPORT = TransportContext(kind="jsonrpc", can_send_request=True)


def _request_id(value: object) -> types.RequestId | None:
    if type(value) is str or (type(value) is int and value in _ID_RANGE):
        return value
    return None


def _fast_request(
    message: dict[str, Any],
) -> tuple[types.RequestId, dict[str, Any], dict[str, Any] | None] | None:
    """``(id, params, _meta)`` of a ``run_python`` call of exactly the common shape, else None.

    The shape is what the SDK would accept and hand to the handler unchanged: ``jsonrpc`` "2.0",
    a string or 64-bit integer id, params with ``name`` "run_python", ``arguments`` an object
    (or absent) and ``_meta`` an object of :data:`_META_KEYS` with values of their types. Every
    other shape, valid or not, is the SDK's to answer (its errors are the reference).
    """
    if message.keys() != _REQUEST_KEYS or message["jsonrpc"] != "2.0":
        return None
    request_id = _request_id(message["id"])
    params = message["params"]
    if request_id is None or type(params) is not dict or not params.keys() <= _PARAMS_KEYS:
        return None
    if params.get("name") != TOOL_NAME or type(params.get("arguments", {})) is not dict:
        return None
    meta = params.get("_meta")
    if meta is not None:
        if type(meta) is not dict or not meta.keys() <= _META_KEYS:
            return None
        for key, value in meta.items():
            if key == "progressToken" and _request_id(value) is None:
                return None
            if key != "progressToken" and type(value) is not str:
                return None
    elif "_meta" in params:
        return None  # an explicit null: the SDK's to judge
    return request_id, params, meta


def _samples() -> list[WireResult]:
    """Results with every field and kind of block the bridge writes."""
    # Imported on first use: the session types load with the executor, after initialize.
    from bridge_core.sessions.types import ExecutionResult, Image
    from bridge_protocol import ErrorInfo

    full = ExecutionResult(
        status="error",
        session="default",
        stdout="out",
        error=ErrorInfo(type="E", message="m", traceback="tb"),
        images=(Image(mime="image/png", data=b"hi"),),
        duration=0.25,
        notices=("n",),
        truncated=True,
        full_output_path="/tmp/out",
        sandbox_start=0.5,
    )
    plain = ExecutionResult(status="ok", session="s")
    return [render_wire(full), render_wire(plain), error_wire("e")]


def _sieve_keeps_results(version: str) -> bool:
    """Whether the SDK's per-version result sieve leaves the bridge's results exactly as they
    are at ``version`` (then skipping it changes nothing), judged on samples with every field
    and block the bridge writes, key order included."""
    for wire in _samples():
        try:
            sieved = _methods.serialize_server_result("tools/call", version, wire)
        except Exception:
            return False
        if to_json(sieved) != to_json(wire):
            return False
    return True


@dataclass(eq=False)
class _CallContext:
    """The ``DispatchContext`` of one taken call (what the SDK's dispatcher makes per request):
    progress and requests to the client go out through the SDK's dispatcher."""

    _dispatcher: JSONRPCDispatcher[TransportContext]
    _request_id: types.RequestId
    _progress_token: types.ProgressToken | None
    _closed: bool = False
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)

    @property
    def transport(self) -> TransportContext:
        return _TRANSPORT

    @property
    def request_id(self) -> types.RequestId:
        return self._request_id

    @property
    def message_metadata(self) -> MessageMetadata:
        return None

    @property
    def can_send_request(self) -> bool:
        return not self._closed

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if self._closed:
            raise NoBackChannelError(method)
        return await self._dispatcher.send_raw_request(method, params, opts)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        if not self._closed:
            await self._dispatcher.notify(method, params, opts)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self._progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)

    def close(self) -> None:
        self._closed = True


@dataclass(eq=False)
class _InFlight:
    scope: anyio.CancelScope
    dctx: _CallContext


class FastCalls:
    """The ``run_python`` fast path of one handshake-era stdio connection (see the module
    docstring). :meth:`take` is the transport's line hook; calls run in ``task_group``."""

    def __init__(
        self,
        server: Server[Any],
        connection: Connection,
        dispatcher: JSONRPCDispatcher[TransportContext],
        answers: _Answers,
        lifespan_state: Any,
        task_group: anyio.abc.TaskGroup,
    ) -> None:
        entry = server.get_request_handler("tools/call")
        handler = None if entry is None else entry.handler
        # A middleware or a cache hint would see or shape what the SDK path answers: then
        # nothing is taken.
        self._handler = handler if isinstance(handler, RunPythonHandler) else None
        self._usable = not (self._handler is None or server.middleware or server.cache_hints)
        self._connection = connection
        self._dispatcher = dispatcher
        self._answers = answers
        self._state = lifespan_state
        self._task_group = task_group
        self._in_flight: dict[types.RequestId, _InFlight] = {}
        self._versions: dict[str, bool] = {}

    def _open(self) -> bool:
        connection = self._connection
        if not self._usable or not connection.initialize_accepted:
            return False
        version = connection.protocol_version
        usable = self._versions.get(version)
        if usable is None:
            usable = self._versions[version] = _sieve_keeps_results(version)
        return usable

    def take(self, line: str) -> bool:
        """True when ``line`` was a call taken over (it is answered here); False: the SDK's."""
        if not self._open():
            return False
        try:
            # The SDK's own parser (jiter), so a line it refuses is never taken: a lone
            # surrogate escape or nesting past its depth limit, which ``json`` accepts. NaN and
            # Infinity, which the SDK's parser takes, are not JSON: left to the SDK as well.
            message = from_json(line, allow_inf_nan=False)
        except ValueError:
            return False  # the SDK parses it again and answers the error
        if type(message) is not dict:
            return False
        method = message.get("method")
        if method == "notifications/cancelled":
            params = message.get("params")
            cancelled = cancelled_request_id_from_params(params if type(params) is dict else None)
            if cancelled is not None:
                flight = self._in_flight.get(coerce_request_id(cancelled))
                if flight is not None:  # as the SDK's dispatcher does with its own calls
                    flight.dctx.cancel_requested.set()
                    flight.scope.cancel()
            return False  # the SDK still sees it (it logs and drops it)
        if method != "tools/call":
            return False
        request = _fast_request(message)
        if request is None:
            return False
        request_id, params, meta = request
        token = None if meta is None else meta.get("progressToken")
        dctx = _CallContext(self._dispatcher, request_id, token)
        flight = _InFlight(anyio.CancelScope(), dctx)
        self._in_flight[coerce_request_id(request_id)] = flight
        self._task_group.start_soon(self._answer, params, meta, flight)
        return True

    async def _answer(
        self, params: dict[str, Any], meta: dict[str, Any] | None, flight: _InFlight
    ) -> None:
        """Run the handler and answer as the SDK's ``JSONRPCDispatcher._handle_request`` does:
        a cancelled call is never answered; a call cut short by the connection's end is answered
        with "Connection closed"; a raising handler with its JSON-RPC error."""
        dctx = flight.dctx
        request_id = dctx.request_id
        answer_started = False
        try:
            with flight.scope:
                try:
                    result = await self._run(params, meta, dctx)
                finally:
                    dctx.close()
                    key = coerce_request_id(request_id)
                    if self._in_flight.get(key) is flight:
                        del self._in_flight[key]
                if not dctx.cancel_requested.is_set():
                    answer_started = True
                    # What the SDK's JSONRPCResponse model writes: the same serializer, the
                    # same key order.
                    line = to_json({"jsonrpc": "2.0", "id": request_id, "result": result})
                    await self._send(line + b"\n")
        except anyio.get_cancelled_exc_class():
            if not answer_started and not dctx.cancel_requested.is_set():
                closed = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")
                with anyio.move_on_after(CLOSED_ANSWER_BOUND, shield=True):
                    await self._write(
                        types.JSONRPCError(jsonrpc="2.0", id=request_id, error=closed)
                    )
            raise
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("handler for 'tools/call' raised")
                error = types.ErrorData(code=0, message=str(exc))  # the SDK's code for it
            if not dctx.cancel_requested.is_set():
                await self._write(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    async def _run(
        self, params: dict[str, Any], meta: dict[str, Any] | None, dctx: _CallContext
    ) -> WireResult:
        assert self._handler is not None  # _open() checked it
        connection = self._connection
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(dctx, connection),
            lifespan_context=self._state,
            protocol_version=connection.protocol_version,
            method="tools/call",
            params=params,
            request_id=dctx.request_id,
            meta=meta,  # type: ignore[arg-type]  # RequestParamsMeta is this dict's TypedDict
        )
        return await self._handler.answer(ctx, TOOL_NAME, params.get("arguments"), meta)

    async def _send(self, line: bytes) -> None:
        try:
            await self._answers.send_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped an answer: stdout is closed")

    async def _write(self, message: types.JSONRPCResponse | types.JSONRPCError) -> None:
        try:
            await self._answers.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped the answer to %r: stdout is closed", message.id)
