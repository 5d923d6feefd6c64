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
  (``"kind": "tool"``), merged by score with the caller's matching workflows
  (``{"kind": "workflow", "name", "version", "description", "score"}``) when the gateway has a
  :class:`WorkflowRequests`
- :data:`WORKFLOW_METHODS` (``save_workflow``, ``list_workflows``, ``search_workflows``,
  ``get_workflow``, ``delete_workflow``): answered by the gateway's :class:`WorkflowRequests`
  (:mod:`bridge_core.workflows`), for the principal of ``CallContext.client_key``
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bridge_protocol import ErrorCode, JSONValue

if TYPE_CHECKING:
    from bridge_core.client_link import ClientLink

__all__ = [
    "WORKFLOW_METHODS",
    "CallContext",
    "CallFailed",
    "Gateway",
    "NullGateway",
    "WorkflowRequests",
    "no_workflows",
]

WORKFLOW_METHODS = frozenset(
    {"save_workflow", "list_workflows", "search_workflows", "get_workflow", "delete_workflow"}
)


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


class WorkflowRequests(Protocol):
    """The workflows of each principal, as a gateway answers for them (one route: every
    gateway hands :data:`WORKFLOW_METHODS` and search results to it)."""

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> JSONValue:
        """Answer one of :data:`WORKFLOW_METHODS` for ``ctx.client_key``'s workflows."""
        ...

    async def add_to_search(
        self, ctx: CallContext, params: Mapping[str, Any], hits: JSONValue
    ) -> JSONValue:
        """``search_tool_docs``'s tool ``hits`` with the caller's matching workflows merged."""
        ...


def no_workflows() -> CallFailed:
    """What a workflow request gets from a gateway that keeps none."""
    return CallFailed(ErrorCode.UNKNOWN_METHOD, "workflows are not kept by this bridge")


class NullGateway:
    """A gateway with no servers configured (workflows still work when given)."""

    def __init__(self, workflows: WorkflowRequests | None = None) -> None:
        self.workflows = workflows

    async def call_tool(
        self, ctx: CallContext, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        raise CallFailed(
            ErrorCode.UNKNOWN_SERVER, f"unknown server {server!r}: none are configured"
        )

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> JSONValue:
        if method in WORKFLOW_METHODS:
            if self.workflows is None:
                raise no_workflows()
            return await self.workflows.request(ctx, method, params)
        if method == "search_tool_docs":
            return (
                []
                if self.workflows is None
                else await self.workflows.add_to_search(ctx, params, [])
            )
        if method == "discovered_servers":
            return []
        if method in ("list_tools", "query_tool_docs"):
            raise CallFailed(
                ErrorCode.UNKNOWN_SERVER,
                f"unknown server {params.get('server')!r}: none are configured",
            )
        raise CallFailed(ErrorCode.UNKNOWN_METHOD, f"unknown method {method!r}")
