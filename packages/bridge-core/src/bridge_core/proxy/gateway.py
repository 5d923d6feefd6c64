"""The gateway the session manager routes sandbox calls and requests to.

A call goes: policy and known-server check (catalog, no I/O) → the server's live tool list (starts
it if needed; an unknown tool is refused here with close names, the same way for every server,
whether it would have answered ``isError`` or a JSON-RPC error) → the upstream call → one audit
line. Upstream failures become :class:`~bridge_core.gateway.CallFailed` with a specific
:class:`~bridge_protocol.ErrorCode`; an ``isError`` result is returned as-is (the sandbox raises
it as the tool's error).

This is the one place where the sandbox's answers are made: every result, error and discovery
answer leaves it through :attr:`ProxyGateway.redactor`, which masks every secret configured for
any server (an upstream may echo its token in an error, its environment in a result). A
successful result's keys and types (never its values) are also given to the catalog there, which
learns the result shapes of tools that declare none (:meth:`Catalog.observe_result`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from bridge_protocol import ErrorCode, JSONValue
from pydantic import ValidationError

from bridge_core import tracing
from bridge_core.approval import ApprovalGate, ApprovalRefused, ApprovalRules
from bridge_core.audit import AuditLog, CallRecord
from bridge_core.catalog import Catalog, ToolCache, ToolDoc, resolve_tool
from bridge_core.errors import UpstreamError
from bridge_core.gateway import (
    WORKFLOW_METHODS,
    CallContext,
    CallFailed,
    WorkflowRequests,
    no_workflows,
)
from bridge_core.policy import Policy
from bridge_core.proxy._resources import RESOURCE_METHODS, audit_name
from bridge_core.proxy.errors import (
    UnknownServer,
    UpstreamCrashed,
    UpstreamRPCError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from bridge_core.proxy.options import ProxyOptions
from bridge_core.proxy.pool import UpstreamPool
from bridge_core.redaction import Redactor
from bridge_core.servers import ServerSpec

__all__ = ["ProxyGateway", "ToolsChanged", "open_proxy"]

logger = logging.getLogger(__name__)

ToolsChanged = Callable[[str, list[types.Tool]], Awaitable[None]]
"""Told a server's name and its new tool list, each time the pool lists it (start, restart,
``notifications/tools/list_changed``)."""


class ProxyGateway:
    """:class:`bridge_core.gateway.Gateway` over an :class:`UpstreamPool` and a :class:`Catalog`.

    Build both with :func:`open_proxy`, which also keeps the catalog (and its persisted cache) in
    step with each server's live tool list.
    """

    def __init__(
        self,
        pool: UpstreamPool,
        catalog: Catalog,
        audit: AuditLog | None = None,
        approvals: ApprovalRules | None = None,
    ) -> None:
        self.pool = pool
        self.catalog = catalog
        self.audit = audit or AuditLog(None)
        self.redactor: Redactor = pool.redactor
        self.approvals = ApprovalGate(approvals or ApprovalRules(), self.redactor)
        self.tool_listeners: list[ToolsChanged] = []
        """Called after the catalog took a new tool list (direct tools forward it to clients)."""
        self.workflows: WorkflowRequests | None = None
        """Answers the workflow requests and adds workflows to searches (set by the server)."""

    @classmethod
    def for_pool(
        cls,
        pool: UpstreamPool,
        *,
        policy: Policy | None = None,
        cache: ToolCache | None = None,
        audit: AuditLog | None = None,
        approvals: ApprovalRules | None = None,
    ) -> ProxyGateway:
        """A gateway over an existing pool (entered by the caller), with a catalog of the pool's
        servers that the pool keeps in step with each live tool list (it sets ``pool.on_tools``).
        """
        specs = {spec.name: spec for spec in pool.specs}

        async def remember_tools(spec: ServerSpec, tools: list[types.Tool]) -> None:
            await catalog.set_tools(spec.name, tools)
            for listener in gateway.tool_listeners:
                await listener(spec.name, tools)

        async def fetch_tools(server: str) -> list[types.Tool]:
            try:
                return await pool.list_tools(server)
            except UpstreamError as exc:
                raise _upstream_failure(specs[server], exc) from None

        catalog = Catalog(specs, list_tools=fetch_tools, policy=policy, cache=cache)
        pool.on_tools = remember_tools
        gateway = cls(pool, catalog, audit, approvals)
        return gateway

    async def allowed_tools(self, *, start: bool = True) -> list[tuple[str, types.Tool]]:
        """Every tool the policy lets a client call, as ``(server, tool)`` in discovery order.

        Each visible server's list is its last live one, else the catalog's (the persisted cache
        of an earlier start) unless its last start failed; a server with neither is started
        (concurrently) for its list, or left out with ``start=False``. A server that cannot start
        is left out (logged);
        :meth:`call_tool` still says why if named. A list from the cache may be stale: when its
        server starts, its live list reaches the catalog, and the tools-changed listeners."""
        servers = self.catalog.visible_servers()
        lists: dict[str, list[types.Tool]] = {}
        for server in servers:
            live = self.pool.cached_tools(server)
            if live is not None:
                lists[server] = live
            elif self.pool.failed_to_start(server):
                continue  # its cached list would offer tools nothing can answer now
            elif known := await self.catalog.known_tools(server):
                lists[server] = [t for doc in known if (t := _as_tool(doc)) is not None]
        if not start:
            servers = [server for server in servers if server in lists]

        async def list_one(server: str) -> None:
            try:
                lists[server] = await self.pool.list_tools(server)
            except UpstreamError as exc:
                logger.warning("tools of %s not listed: %s", server, self.redactor.text(str(exc)))

        async with anyio.create_task_group() as tg:
            for server in servers:
                if server not in lists:
                    tg.start_soon(list_one, server)
        policy = self.catalog.policy
        return [
            (server, tool)
            for server in servers
            for tool in lists.get(server, ())
            if policy.check(server, tool.name).allowed
        ]

    async def call_tool(
        self, ctx: CallContext, server: str, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Call ``server.tool``; see :meth:`bridge_core.gateway.Gateway.call_tool`."""
        started = anyio.current_time()
        outcome, detail = "cancelled", None
        approval: list[str] = []
        try:
            result = await self._call(ctx, server, tool, arguments, approval)
            outcome = "tool_error" if result.get("isError") else "ok"
            shown: dict[str, Any] = self.redactor.value(result)
            if outcome == "ok":
                # Every successful call passes here (nested and direct): the shapes of tools
                # without an output schema are learnt from what their callers are given.
                self.catalog.observe_result(server, tool, shown)
            return shown
        except CallFailed as exc:
            if isinstance(exc, ApprovalRefused):
                approval.append(exc.reason)
            failure = self._masked(exc)
            outcome, detail = _OUTCOMES.get(failure.code, "error"), failure.message
            raise failure from None
        finally:
            if self.audit.enabled:
                # Shielded: a cancelled call is recorded too (the write is one short append).
                with anyio.CancelScope(shield=True):
                    await self.audit.record(
                        CallRecord(
                            session=ctx.session,
                            execution_id=ctx.execution_id,
                            server=server,
                            tool=tool,
                            arguments=arguments,
                            outcome=outcome,
                            duration=anyio.current_time() - started,
                            detail=detail,
                            approval=approval[0] if approval else None,
                        )
                    )

    def resolves(self, server: str, tool: str) -> bool:
        """Whether ``server`` is configured and ``tool`` is one it listed: only such names are
        recorded in traces (:func:`bridge_core.tracing.naming`), never sandbox-made ones."""
        if server not in self.catalog.servers:
            return False
        tools = self.pool.cached_tools(server)
        return tools is not None and any(described.name == tool for described in tools)

    def _masked(self, failure: CallFailed) -> CallFailed:
        """``failure`` as the sandbox may see it: every configured secret masked."""
        if not self.redactor:
            return failure
        masked = CallFailed(
            failure.code, self.redactor.text(failure.message), self.redactor.value(failure.data)
        )
        masked.__cause__ = failure.__cause__
        return masked

    async def _call(
        self,
        ctx: CallContext,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        approval: list[str],
    ) -> dict[str, Any]:
        spec = self.catalog.check_call(server, tool)  # unknown server / policy: no I/O
        _require_json(server, tool, arguments)
        try:
            with self.pool.serving(server, ctx.client):
                live = await self.pool.tools_by_name(server)
                # The same decision (and did-you-mean) as the sandbox's lookups, on exact names.
                resolve_tool(self.catalog.policy, server, tool, live.keys())
                described = live[tool]
                # The user's approval, after every check that needs no user (a denied or
                # unknown tool is never asked about) and before anything reaches the server.
                # A span around the nested call would start here, so that it covers the wait.
                decided = await self.approvals.check(ctx, server, described, arguments)
                if decided is not None:
                    approval.append(decided)
                return await self.pool.call_tool(server, tool, arguments, client=ctx.client)
        except UpstreamError as exc:
            raise _upstream_failure(spec, exc) from None

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> JSONValue:
        """Answer a discovery/docs/search request from the catalog (which starts a server only
        when neither memory nor the persisted cache knows its tools), or a resource/prompt
        request from the upstream server (:mod:`bridge_core.proxy._resources`)."""
        if method in RESOURCE_METHODS:
            return await self._resource_request(ctx, method, params)
        if method in WORKFLOW_METHODS:
            if self.workflows is None:
                raise no_workflows()
            return await self.workflows.request(ctx, method, params)
        try:
            with self.pool.serving_all(ctx.client):
                answer = await self.catalog.handle_request(method, params)
            masked: JSONValue = self.redactor.value(answer)
        except CallFailed as exc:
            raise self._masked(exc) from None
        if method == "search_tool_docs" and self.workflows is not None:
            return await self.workflows.add_to_search(ctx, params, masked)
        return masked

    async def _resource_request(
        self, ctx: CallContext, method: str, params: Mapping[str, Any]
    ) -> JSONValue:
        server = params.get("server")
        if not isinstance(server, str):
            raise CallFailed(ErrorCode.INVALID_ARGUMENTS, "'server' must be a string")
        started = anyio.current_time()
        outcome, detail = "cancelled", None
        try:
            try:
                spec = self.catalog.require_server(server)  # unknown / denied: no I/O
                with self.pool.serving(spec.name, ctx.client):
                    answer = await self.pool.resource_request(spec.name, method, params)
            except UpstreamError as exc:
                raise _upstream_failure(spec, exc) from None
            outcome = "ok"
            masked: JSONValue = self.redactor.value(answer)
            return masked
        except CallFailed as exc:
            failure = self._masked(exc)
            outcome, detail = _OUTCOMES.get(failure.code, "error"), failure.message
            raise failure from None
        finally:
            # Reads and prompts are recorded like calls; listings are discovery (not recorded).
            if self.audit.enabled and method in ("read_resource", "get_prompt"):
                tool, arguments = audit_name(method, params)
                with anyio.CancelScope(shield=True):
                    await self.audit.record(
                        CallRecord(
                            session=ctx.session,
                            execution_id=ctx.execution_id,
                            server=server[:200],
                            tool=tool,
                            arguments=arguments,
                            outcome=outcome,
                            duration=anyio.current_time() - started,
                            detail=detail,
                        )
                    )


def _as_tool(doc: ToolDoc) -> types.Tool | None:
    """A cached tool as the SDK's type (what its server listed, as far as the cache keeps);
    None for one the SDK would not accept (its server's live list decides then)."""
    try:
        return types.Tool.model_validate(doc.to_json())
    except ValidationError:
        return None


def _require_json(server: str, tool: str, arguments: Mapping[str, Any]) -> None:
    """Refuse arguments MCP cannot carry (bytes, NaN, sets...) before they reach the SDK, where
    they would fail as an internal error."""
    try:
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CallFailed(
            ErrorCode.INVALID_ARGUMENTS,
            f"arguments of {server}.{tool} must be JSON values (str, int, float, bool, None, "
            f"list, dict): {exc}",
            {"server": server, "tool": tool},
        ) from None


_OUTCOMES = {
    ErrorCode.POLICY_DENIED: "denied",
    ErrorCode.UNKNOWN_SERVER: "unknown_server",
    ErrorCode.UNKNOWN_TOOL: "unknown_tool",
    ErrorCode.CALL_TIMEOUT: "timeout",
    ErrorCode.UPSTREAM_UNAVAILABLE: "unavailable",
    ErrorCode.TOOL_ERROR: "upstream_error",
    ErrorCode.INVALID_ARGUMENTS: "invalid_arguments",
    ErrorCode.APPROVAL_DECLINED: "not_approved",
}


def _upstream_failure(spec: ServerSpec, exc: UpstreamError) -> CallFailed:
    """The :class:`CallFailed` a sandbox sees for a proxy error (masked on its way out by
    :meth:`ProxyGateway._masked`)."""
    message = str(exc)
    data: dict[str, JSONValue] = {"server": spec.name}
    if isinstance(exc, UpstreamTimeout):
        data.update(tool=exc.tool, timeout=exc.timeout)
        return CallFailed(ErrorCode.CALL_TIMEOUT, message, data)
    if isinstance(exc, UpstreamRPCError):
        data.update(tool=exc.tool, code=exc.code, message=exc.rpc_message)
        return CallFailed(ErrorCode.TOOL_ERROR, message, data)
    if isinstance(exc, UpstreamCrashed):
        data.update(exit_status=exc.exit_status, stderr_tail=exc.stderr_tail)
        return CallFailed(ErrorCode.UPSTREAM_UNAVAILABLE, message, data)
    if isinstance(exc, UpstreamUnavailable):
        return CallFailed(ErrorCode.UPSTREAM_UNAVAILABLE, message, data)
    if isinstance(exc, UnknownServer):
        data["suggestions"] = list(exc.suggestions)
        return CallFailed(ErrorCode.UNKNOWN_SERVER, message, data)
    return CallFailed(ErrorCode.INTERNAL, message, data)


@asynccontextmanager
async def open_proxy(
    servers: Sequence[ServerSpec],
    *,
    options: ProxyOptions | None = None,
    policy: Policy | None = None,
    cache: ToolCache | None = None,
    audit: AuditLog | None = None,
    approvals: ApprovalRules | None = None,
) -> AsyncIterator[ProxyGateway]:
    """The upstream pool, the catalog and the gateway over them, for one bridge lifetime.

    Every server a call or listing starts has its tool list pushed into the catalog (and the
    persisted ``cache``), again after each ``notifications/tools/list_changed``. On exit every
    server process is stopped.
    """
    async with UpstreamPool(servers, options) as pool:
        gateway = ProxyGateway.for_pool(
            pool, policy=policy, cache=cache, audit=audit, approvals=approvals
        )
        with tracing.naming(gateway.resolves):
            yield gateway
