"""The :class:`~bridge_core.client_link.ClientLink` of one ``run_python`` request.

Every request goes out as *related* to the ``run_python`` request (SDK ``related_request_id``), so
over streamable HTTP it rides that request's response stream and reaches the client that asked,
and on stdio it is simply the one client.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from bridge_core.client_link import Capability
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

__all__ = ["RequestLink"]

_CAPABILITIES: dict[Capability, types.ClientCapabilities] = {
    "elicitation": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
    "sampling": types.ClientCapabilities(sampling=types.SamplingCapability()),
    "roots": types.ClientCapabilities(roots=types.RootsCapability()),
}


class RequestLink:
    """The client behind one ``run_python`` request (see :mod:`bridge_core.client_link`)."""

    def __init__(self, ctx: ServerRequestContext[Any], identity: str | None) -> None:
        self._ctx = ctx
        self._identity = identity

    @property
    def identity(self) -> str | None:
        return self._identity

    @property
    def can_send_request(self) -> bool:
        """Whether this request's channel carries requests to the client (a 2025-11-25
        connection does; a 2026-07-28 request has no back channel)."""
        return bool(self._ctx.session.can_send_request)

    def supports(self, capability: Capability) -> bool:
        # A declared capability is not enough: the request's channel must be able to carry a
        # request to the client (a stateless HTTP request cannot).
        session = self._ctx.session
        return session.can_send_request and session.check_client_capability(
            _CAPABILITIES[capability]
        )

    def _related(self) -> ServerMessageMetadata:
        return ServerMessageMetadata(related_request_id=self._ctx.request_id)

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        return await self._ctx.session.send_request(
            types.ElicitRequest(params=params), types.ElicitResult, metadata=self._related()
        )

    async def create_message(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
        result_type: type[types.CreateMessageResult | types.CreateMessageResultWithTools] = (
            types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        )
        return await self._ctx.session.send_request(
            types.CreateMessageRequest(params=params), result_type, metadata=self._related()
        )

    async def list_roots(self) -> types.ListRootsResult:
        return await self._ctx.session.send_request(
            types.ListRootsRequest(), types.ListRootsResult, metadata=self._related()
        )

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self._ctx.session.send_notification(
            types.LoggingMessageNotification(params=params),
            related_request_id=self._ctx.request_id,
        )
