"""The MCP sessions of ``serve --http``: per-client bounds, fast expiry of idle anonymous ones, and
the end of an anonymous client's sandboxes when its MCP session ends.

The SDK's streamable-HTTP session manager opens an MCP session per ``initialize`` and ends it on
``DELETE`` or after its idle timeout; it bounds them only globally, so one client that sends
initializes in a loop fills the bound (10,000 sessions, ~450 MB) and every other client is
refused until they expire. :class:`McpSessionGate` sits in front of it, behind authentication,
and adds what a shared bridge needs:

* **Per-client bound.** A client (a token's principal; all unauthenticated clients together, as
  loopback cannot tell them apart) keeps at most ``http_connections_per_client`` MCP sessions.
  A new one past the bound ends that client's oldest idle session whose end loses nothing —
  first those that never got past ``initialize`` — and only if there is none is the new
  initialize refused (429). A session with a request in flight (an open GET stream included) or
  an anonymous session holding sandboxes is never ended to make room: a flood of bare
  initializes cannot lock out a client that holds a session.
* **Idle expiry.** An unauthenticated MCP session with nothing in flight and no sandbox ends after
  ``http_anonymous_ttl``; every idle MCP session ends after ``session_ttl``.
* **End of an anonymous client.** Its sessions belong to its MCP session (see ``_clients``), so
  when that ends (DELETE, expiry, eviction) its sandboxes are stopped. A principal's sessions
  outlive its MCP sessions and expire on their own idle TTL.

A session is ended the way its client would end it: a ``DELETE`` through the SDK's app, so the
SDK's own bookkeeping (forget the id, terminate the transport) runs as for a client's DELETE.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_code_execution_mode._clients import (
    anonymous_client,
    principal_client,
    principal_name,
)

__all__ = ["ClientSessions", "McpSessionGate"]

logger = logging.getLogger(__name__)

ANONYMOUS = "anonymous"
"""The bound shared by every unauthenticated client."""
END_TIMEOUT = 10.0
"""Bound on ending one MCP session through the SDK (it only terminates a transport)."""
SWEEP_INTERVAL_MAX = 5.0


class ClientSessions(Protocol):
    """What the gate asks the session manager about a client's sandbox sessions."""

    def holds_sessions(self, client: str | None) -> bool: ...

    async def close_client(self, client: str | None) -> list[str]: ...


@dataclass(eq=False)
class _McpSession:
    id: str
    group: str
    """Whose bound it counts against: the principal, or :data:`ANONYMOUS`."""
    client: str
    """Whose sandbox sessions its requests use (the principal, or this MCP session)."""
    label: str
    authenticated: bool
    replay: dict[str, Any]
    """What a DELETE ending it must carry: the creator's user, auth and Host header."""
    in_flight: int = 1
    idle_since: float = 0.0
    past_initialize: bool = False
    """A request followed the opening ``initialize`` (a bare-initialize flood never gets here)."""


@dataclass
class McpSessionGate:
    """Tracks and bounds the MCP sessions of the streamable-HTTP app; see the module docstring.

    :meth:`middleware` wraps the SDK's app (inside authentication); :meth:`serving` runs the
    sweeper for the lifetime of the session manager it asks.
    """

    path: str
    per_client: int
    anonymous_ttl: float
    idle_ttl: float
    requires_auth: bool
    clock: Callable[[], float] = time.monotonic
    _sessions: dict[str, _McpSession] = field(default_factory=dict)
    _opening: Counter[str] = field(default_factory=Counter)
    _admission: anyio.Lock = field(default_factory=anyio.Lock)
    _clients: ClientSessions | None = None
    _background: TaskGroup | None = None
    _app: ASGIApp | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """The ASGI app that gates ``app`` (the rest of the stack: router, auth, SDK)."""
        self._app = app

        async def gate(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"] == self.path:
                await self._handle(scope, receive, send)
            else:
                await app(scope, receive, send)

        return gate

    @asynccontextmanager
    async def serving(self, clients: ClientSessions) -> AsyncIterator[None]:
        """Expire idle MCP sessions while the session manager ``clients`` is open."""
        self._clients = clients
        try:
            async with anyio.create_task_group() as tg:
                self._background = tg
                tg.start_soon(self._sweep)
                yield
                tg.cancel_scope.cancel()
        finally:
            self._clients = self._background = None

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    # --- requests ----------------------------------------------------------------------------

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self._app is not None
        user = scope.get("user")
        principal = principal_client(user)
        if self.requires_auth and principal is None:
            await self._app(scope, receive, send)  # the SDK answers 401
            return
        headers = Headers(scope=scope)
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
            stateless = version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS
            if scope["method"] == "POST" and not stateless:
                await self._open(scope, receive, send, principal)
            else:
                await self._app(scope, receive, send)
            return
        session = self._sessions.get(session_id)
        if session is None or session.group != (principal or ANONYMOUS):
            await self._app(scope, receive, send)  # the SDK answers 404
            return
        session.in_flight += 1
        session.past_initialize = True
        status = None
        try:
            status = await _forward(self._app, scope, receive, send)
        finally:
            session.in_flight -= 1
            session.idle_since = self.clock()
        if status == 404 or (scope["method"] == "DELETE" and status is not None and status < 300):
            self._ended(session, "ended by its client" if status != 404 else "is gone")

    async def _open(
        self, scope: Scope, receive: Receive, send: Send, principal: str | None
    ) -> None:
        """A request without a session id: an ``initialize`` that opens an MCP session."""
        assert self._app is not None
        group = principal or ANONYMOUS
        async with self._admission:
            # Under the lock so that concurrent initializes cannot all take the last place.
            if self._count(group) + self._opening[group] >= self.per_client:
                victim = self._victim(group)
                if victim is None:
                    logger.warning(
                        "refused a new MCP session of %s: its %d are all in use",
                        principal_name(scope.get("user")) or "the unauthenticated clients",
                        self.per_client,
                    )
                    await _too_many(self.per_client)(scope, receive, send)
                    return
                await self._end(victim, "to make room for a new one of the same client")
            self._opening[group] += 1
        opening = True
        user = scope.get("user")
        label = principal_name(user) or "an unauthenticated client"
        session: _McpSession | None = None

        async def watch(message: Message) -> None:
            nonlocal opening, session
            if message["type"] == "http.response.start" and opening:
                opening = False
                self._opening[group] -= 1
                session_id = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID_HEADER)
                if message["status"] < 400 and session_id:
                    session = _McpSession(
                        id=session_id,
                        group=group,
                        client=principal or anonymous_client(session_id),
                        label=label,
                        authenticated=principal is not None,
                        replay=_replay_of(scope),
                    )
                    self._sessions[session_id] = session
            await send(message)

        try:
            await self._app(scope, receive, watch)
        finally:
            if opening:
                self._opening[group] -= 1
            if session is not None:
                session.in_flight -= 1
                session.idle_since = self.clock()

    # --- ending sessions ---------------------------------------------------------------------

    def _count(self, group: str) -> int:
        return sum(1 for s in self._sessions.values() if s.group == group)

    def _loses_state(self, session: _McpSession) -> bool:
        """Whether ending ``session`` drops sandboxes (an anonymous one that holds some)."""
        clients = self._clients
        return (
            not session.authenticated
            and clients is not None
            and clients.holds_sessions(session.client)
        )

    def _victim(self, group: str) -> _McpSession | None:
        """The session of ``group`` to end for a new one: idle, losing nothing; bare ones first,
        then the longest idle."""
        idle = [
            s
            for s in self._sessions.values()
            if s.group == group and s.in_flight == 0 and not self._loses_state(s)
        ]
        return min(idle, key=lambda s: (s.past_initialize, s.idle_since), default=None)

    async def _end(self, session: _McpSession, reason: str) -> None:
        """End ``session`` through the SDK (a DELETE of its own), then forget it."""
        assert self._app is not None
        # Forgotten first: a request racing with the end is passed to the SDK, which 404s it.
        self._sessions.pop(session.id, None)
        try:
            with anyio.fail_after(END_TIMEOUT):
                await _delete(self._app, session)
        except Exception:  # top-level of a background job: the sweep must go on
            logger.exception("ending the MCP session of %s failed", session.label)
        self._ended(session, reason)

    def _ended(self, session: _McpSession, reason: str) -> None:
        self._sessions.pop(session.id, None)
        if session.authenticated or self._clients is None or self._background is None:
            # A principal's sessions outlive its MCP sessions (they expire on their own TTL).
            logger.info("MCP session of %s %s", session.label, reason)
            return
        # Stopping sandboxes takes a moment: not in the request (or sweep) that ended it.
        self._background.start_soon(self._close_client, self._clients, session, reason)

    async def _close_client(
        self, clients: ClientSessions, session: _McpSession, reason: str
    ) -> None:
        stopped = await clients.close_client(session.client)
        logger.info(
            "MCP session of %s %s%s",
            session.label,
            reason,
            f"; its sessions {', '.join(stopped)} were stopped" if stopped else "",
        )

    async def expire_idle(self) -> int:
        """End the MCP sessions idle for their TTL; return how many. Runs periodically; public
        so that a test with its own clock can force a sweep."""
        now = self.clock()
        ended = 0
        for session in list(self._sessions.values()):
            if session.in_flight or session.id not in self._sessions:
                continue
            ttl = self.idle_ttl
            if not session.authenticated and not self._loses_state(session):
                ttl = min(ttl, self.anonymous_ttl)
            if now - session.idle_since >= ttl:
                await self._end(session, f"ended after {ttl:g} s idle")
                ended += 1
        return ended

    async def _sweep(self) -> None:
        interval = min(self.anonymous_ttl / 4, self.idle_ttl / 4, SWEEP_INTERVAL_MAX)
        while True:
            await anyio.sleep(interval)
            await self.expire_idle()


def _replay_of(scope: Scope) -> dict[str, Any]:
    keep = ("type", "asgi", "http_version", "scheme", "server", "client", "root_path", "path")
    replay = {key: scope[key] for key in keep if key in scope}
    # The creator's identity: the SDK refuses a DELETE from anyone else.
    replay.update({key: scope[key] for key in ("user", "auth") if key in scope})
    host = Headers(scope=scope).get("host")
    replay["host"] = host.encode("latin-1") if host is not None else None
    return replay


async def _delete(app: ASGIApp, session: _McpSession) -> int | None:
    """Send ``DELETE`` for ``session`` through ``app``; return the status it answered with."""
    replay = dict(session.replay)
    host = replay.pop("host")
    headers = [(MCP_SESSION_ID_HEADER.encode(), session.id.encode())]
    if host is not None:
        headers.append((b"host", host))  # the transport's DNS-rebinding check reads it
    scope = {**replay, "method": "DELETE", "raw_path": replay["path"].encode(), "query_string": b""}
    scope["headers"] = headers
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.disconnect"}

    status: int | None = None

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def _forward(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status


def _too_many(bound: int) -> Response:
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=types.ErrorData(
            code=types.INTERNAL_ERROR,
            message=f"this client already keeps {bound} MCP sessions open, all in use "
            "([http] connections_per_client in bridge.toml): close one (DELETE) or wait for one "
            "to end",
        ),
    )
    return Response(
        error.model_dump_json(by_alias=True, exclude_none=True),
        status_code=429,
        media_type="application/json",
        headers={"Retry-After": "5"},
    )
