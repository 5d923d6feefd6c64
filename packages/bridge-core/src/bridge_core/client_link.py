"""The MCP client behind one execution: what the host may ask of it on behalf of nested calls.

bridge-server builds one :class:`ClientLink` per ``run_python`` request (over the SDK's server
session of that request) and hands it to the session manager with the execution's listener; every
call and request of that execution carries it in its :class:`~bridge_core.gateway.CallContext`.
Through it the host asks the user to approve a nested call (elicitation) and relays what an
upstream server asks of its client (elicitation, sampling, roots, logging) to the client whose
code caused the call — never to another one.

Methods take no timeout: callers bound them with ``anyio.fail_after``; a failure (the client went
away, answered with an error) raises.
"""

from __future__ import annotations

from typing import Literal, Protocol, cast, runtime_checkable

import mcp_types as types

__all__ = ["Capability", "ClientLink", "as_client_link"]

Capability = Literal["elicitation", "sampling", "roots"]


@runtime_checkable
class ClientLink(Protocol):
    """One MCP client, reached through the request that started an execution."""

    @property
    def identity(self) -> str | None:
        """Which client this is (the HTTP client key; ``None``: the single stdio client). Two
        links with the same identity reach the same user."""
        ...

    def supports(self, capability: Capability) -> bool:
        """Whether the client declared ``capability`` when it connected."""
        ...

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Send ``elicitation/create`` and return the user's answer."""
        ...

    async def create_message(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
        """Send ``sampling/createMessage`` and return the client's completion."""
        ...

    async def list_roots(self) -> types.ListRootsResult:
        """Send ``roots/list`` and return the client's roots."""
        ...

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """Send a ``notifications/message`` to the client."""
        ...


_MAX_KNOWN_TYPES = 64
_link_types: dict[type, bool] = {}
"""Whether instances of a type are :class:`ClientLink`\\ s, decided once per type (a handful)."""


def as_client_link(value: object) -> ClientLink | None:
    """``value`` if it is a :class:`ClientLink`, else None.

    The Protocol's ``isinstance`` runs once per type: on Python 3.11 it costs ~14 us a call,
    and the session manager asks it for every execution (bound as ``listener.client``)."""
    if value is None:
        return None
    kind = type(value)
    known = _link_types.get(kind)
    if known is None:
        known = isinstance(value, ClientLink)
        if len(_link_types) < _MAX_KNOWN_TYPES:
            _link_types[kind] = known
    return cast(ClientLink, value) if known else None
