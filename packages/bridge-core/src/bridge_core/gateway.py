"""The host services that sandbox code reaches through ``call`` and ``request`` frames.

The session manager receives one :class:`Gateway` and routes every :class:`~bridge_protocol.Call`
and :class:`~bridge_protocol.Request` of every session to it, each in a task owned by the session
(so interrupting or timing out an execution cancels its calls). The implementation
(:class:`bridge_core.proxy.ProxyGateway`) applies policy and audit, then forwards to the upstream
MCP clients and the catalog.

Request methods (``Request.method`` → ``params`` → reply value):

- ``discovered_servers`` ``{detailed: bool}`` → ``["name", ...]`` or
  ``[{"name", "description", "tool_count"|None, "source"}, ...]``
- ``list_tools`` ``{server}`` → ``["tool-name", ...]`` (the names the sandbox resolves itself)
- ``query_tool_docs`` ``{server, tool: str|None, detail: "summary"|"full"|"stub"}`` →
  ``{"server", "tools": [{"name", "description", ...}]}``; with ``detail: "summary"`` it is also
  the sandbox's lookup of a name it was not shown (the answer names the canonical server and tool,
  or is the fault a call would get)

In these two requests a server or tool may be named by its Python form (``mcp_my_server``,
``get_user_info``; :mod:`bridge_protocol.names`); calls name them exactly.
- ``search_tool_docs`` ``{query, limit}`` → ``[{"server", "tool", "description", "score"}, ...]``
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bridge_protocol import ErrorCode, JSONValue

if TYPE_CHECKING:
    from bridge_core.client_link import ClientLink

__all__ = ["CallContext", "CallFailed", "Gateway", "NullGateway"]


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who is calling: for policy decisions and the audit log."""

    session: str
    execution_id: str
    client: ClientLink | None = None
    """The MCP client whose ``run_python`` this call serves (approvals and the requests an
    upstream server makes of its client go there); ``None`` when there is none to ask."""
    client_key: str | None = None
    """Which client owns the session (``None``: the single stdio client): "allow for this
    session" answers are remembered per client and session."""
    grant_scope: str = ""
    """Which life of the session this is (a reset or a new session under the same name starts
    another): "allow for this session" answers are kept under it too."""


class CallFailed(Exception):
    """A call or request failed in a way the sandbox code should see (becomes a ``Fault``)."""

    def __init__(self, code: ErrorCode, message: str, data: JSONValue = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Gateway(Protocol):
    async def call_tool(
        self, ctx: CallContext, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Call an upstream tool; return its ``CallToolResult`` as a camelCase JSON dict.

        Raises :class:`CallFailed` (policy denial, unknown server/tool, timeout, upstream down,
        JSON-RPC error from the server). An ``isError`` result is returned as-is.
        """
        ...

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> JSONValue:
        """Answer a discovery/search/docs request (see module docstring)."""
        ...


class NullGateway:
    """A gateway with no servers configured."""

    async def call_tool(
        self, ctx: CallContext, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise CallFailed(
            ErrorCode.UNKNOWN_SERVER, f"unknown server {server!r}: none are configured"
        )

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> JSONValue:
        if method in ("discovered_servers", "search_tool_docs"):
            return []
        if method in ("list_tools", "query_tool_docs"):
            raise CallFailed(
                ErrorCode.UNKNOWN_SERVER,
                f"unknown server {params.get('server')!r}: none are configured",
            )
        raise CallFailed(ErrorCode.UNKNOWN_METHOD, f"unknown method {method!r}")
