"""Who an HTTP request comes from, as the session manager names its clients.

Over stdio the bridge has exactly one client (``None``). Over streamable HTTP:

* with authentication, sessions belong to the **principal** (the token's name): every MCP session
  of that principal — a reconnect, a second window, a stateless 2026-07-28 request — sees the
  same sessions, the way a user expects their work to be there when they come back;
* without it (loopback only), they belong to the **MCP session** that made them, the only
  identity an anonymous client has; they end with it.

A stateless (2026-07-28) request carries no MCP session, so an unauthenticated one has no
identity at all: :class:`RefuseAnonymousStateless` answers it as a handshake-only server would,
and SDK clients in ``auto`` mode fall back to the handshake, which gives them an MCP session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

__all__ = [
    "RefuseAnonymousStateless",
    "anonymous_client",
    "principal_client",
    "principal_name",
    "request_client",
]


def principal_client(user: object) -> str | None:
    """The client key of an authenticated principal (``scope["user"]``), else None."""
    if not isinstance(user, AuthenticatedUser):
        return None
    # The SDK's own notion of "who this token is" (client id, issuer, subject), unambiguous.
    return "principal:" + json.dumps(principal_components(user.access_token))


def principal_name(user: object) -> str | None:
    """A principal's name for logs (the token file's NAME), else None."""
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None


def anonymous_client(session_id: str) -> str:
    """The client key of an unauthenticated MCP session.

    Hashed: an anonymous client's session id is its only credential, and client keys can end up
    in logs.
    """
    return "mcp-session:" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def request_client(scope: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The client of an HTTP request, or None when it has no identity (stateless, anonymous)."""
    principal = principal_client(scope.get("user"))
    if principal is not None:
        return principal
    session_id = headers.get(MCP_SESSION_ID_HEADER)
    return anonymous_client(session_id) if session_id else None


class RefuseAnonymousStateless:
    """Server middleware: an unauthenticated HTTP request of the stateless protocol era gets
    ``UNSUPPORTED_PROTOCOL_VERSION`` naming the handshake versions, so the client falls back to
    the ``initialize`` handshake (and its MCP session), where it has an identity."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        request = ctx.request
        if (
            request is not None
            and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            and principal_client(request.scope.get("user")) is None
        ):
            raise MCPError(
                types.UNSUPPORTED_PROTOCOL_VERSION,
                "this bridge serves unauthenticated HTTP clients over the initialize handshake "
                "only (sessions belong to an MCP session); authenticate to use stateless requests",
                data=types.UnsupportedProtocolVersionErrorData(
                    supported=list(HANDSHAKE_PROTOCOL_VERSIONS), requested=ctx.protocol_version
                ).model_dump(mode="json"),
            )
        return await call_next(ctx)
