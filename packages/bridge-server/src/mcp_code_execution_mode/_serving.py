"""The server's loop over the bridge's own stdio transport, with the ``run_python`` fast path.

``Server.run`` (SDK 2.3) enters the lifespan and drives ``serve_dual_era_loop``: the client's
first request decides the protocol era (the ``initialize`` handshake, or the 2026-07-28
per-request envelope), and every later message is relayed to the chosen loop through a memory
stream and a task of its own. Here the first request is read the same way, without the relay:
a handshake connection is served by the SDK's own parts (``JSONRPCDispatcher``,
``Connection.for_loop``, ``ServerRunner``, as ``_serve_legacy_stream`` assembles them) with
:class:`~mcp_code_execution_mode._fast_calls.FastCalls` watching the transport's lines; a
connection that opens with the 2026 envelope is handed to ``serve_dual_era_loop`` unchanged
(no fast path there: its requests carry their own envelope, which the SDK checks).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.models import InitializationOptions
from mcp.server.runner import ServerRunner, aclose_shielded, serve_dual_era_loop
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp.shared.transport_context import TransportContext

from mcp_code_execution_mode._fast_calls import FastCalls
from mcp_code_execution_mode._malformed import AnswerMalformed
from mcp_code_execution_mode._stdio import _Answers, _Requests

__all__ = ["serve_streams"]

_LEAD_LIMIT = 8
"""Messages kept from before the first request (the SDK's ``_PRE_REQUEST_REPLAY_LIMIT``)."""


class _Replay:
    """A read stream (the SDK's ``ReadStream`` shape): ``lead`` first, then ``rest``."""

    def __init__(self, lead: deque[SessionMessage], rest: AnswerMalformed) -> None:
        self._lead = lead
        self._rest = rest

    async def receive(self) -> SessionMessage | Exception:
        if self._lead:
            return self._lead.popleft()
        return await self._rest.receive()

    async def aclose(self) -> None:
        await self._rest.aclose()

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


def _has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    # The SDK's own test (runner._has_modern_envelope): the reserved protocol-version key.
    meta = (params or {}).get("_meta")
    return isinstance(meta, Mapping) and types.PROTOCOL_VERSION_META_KEY in meta


async def serve_streams(
    server: Server[Any],
    read: _Requests,
    write: _Answers,
    init_options: InitializationOptions,
    *,
    fast_path: bool = True,
) -> None:
    """What ``server.run(read, write, init_options)`` does, with the fast path on a handshake
    connection (``fast_path=False``: the SDK path only, for comparing the two)."""
    async with server.lifespan(server) as state:
        answered = AnswerMalformed(read, write)
        lead: deque[SessionMessage] = deque()
        opening: types.JSONRPCRequest | None = None
        try:
            while opening is None:
                item = await answered.receive()
                if isinstance(item, SessionMessage) and isinstance(
                    item.message, types.JSONRPCRequest
                ):
                    opening = item.message
                elif len(lead) >= _LEAD_LIMIT or not isinstance(item, SessionMessage):
                    continue
                lead.append(item)
        except anyio.EndOfStream:
            pass
        replayed = _Replay(lead, answered)
        modern = opening is not None and (
            opening.method != "initialize" and _has_modern_envelope(opening.params)
        )
        if opening is None or modern or not fast_path:
            await serve_dual_era_loop(
                server, replayed, write, lifespan_state=state, init_options=init_options
            )
            return
        await _serve_handshake(server, read, replayed, write, state, init_options)


async def _serve_handshake(
    server: Server[Any],
    read: _Requests,
    replayed: _Replay,
    write: _Answers,
    state: Any,
    init_options: InitializationOptions,
) -> None:
    """The SDK's handshake-era loop (``runner._serve_legacy_stream``) plus the fast path."""
    dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
        replayed,
        write,
        # As the SDK does: a client that pipelines initialize with its next request finds the
        # connection initialized.
        inline_methods=frozenset({"initialize"}),
    )
    connection = Connection.for_loop(dispatcher)
    runner = ServerRunner(server, connection, state, init_options=init_options)

    async def on_request(
        dctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method != "initialize" and _has_modern_envelope(params):
            raise MCPError(  # the SDK's words for it
                code=types.INVALID_REQUEST,
                message="this connection serves the handshake protocol era; "
                "requests carrying the 2026-07-28 envelope are not accepted on it",
            )
        return await runner.on_request(dctx, method, params)

    try:
        async with anyio.create_task_group() as calls:
            read.intercept = FastCalls(server, connection, dispatcher, write, state, calls).take
            try:
                await dispatcher.run(on_request, runner.on_notify)
            finally:
                read.intercept = None
                # The connection ended: taken calls still running are cut short, as the
                # dispatcher cuts its own (each answers "Connection closed").
                calls.cancel_scope.cancel()
    finally:
        await aclose_shielded(connection)
