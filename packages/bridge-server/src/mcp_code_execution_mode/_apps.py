"""MCP Apps pass-through: the ``ui://`` resources of the proxied servers' App tools.

A host renders an App tool's ``_meta.ui.resourceUri`` by reading that resource from the server
that listed the tool, which for a proxied tool is the bridge. ``resources/list`` adds the
``ui://`` resources of the running servers that have App tools (a listing starts none);
``resources/read`` of a ``ui://`` URI goes to the server whose App tool names it (or that
lists it), starting it if need be; a URI that two servers claim is refused, never read from
either. Both are the
gateway's resource requests, the ones sandbox code makes (``runtime.list_resources``,
``read_resource``): the server policy, secret masking, the audit line of a read, the size and
time bounds.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_code_execution_mode._direct import DIRECT_SESSION, DirectTools, ui_resource

if TYPE_CHECKING:
    from bridge_core.client_link import ClientLink
    from bridge_core.proxy import ProxyGateway

__all__ = ["UI_SCHEME", "list_ui_resources", "read_ui_resource"]

logger = logging.getLogger(__name__)

UI_SCHEME = "ui://"


def _context(client: ClientLink | None, client_key: str | None) -> Any:
    from bridge_core.gateway import CallContext  # loaded with the bridge, not at start-up

    return CallContext(DIRECT_SESSION, uuid.uuid4().hex[:12], client=client, client_key=client_key)


async def _app_servers(direct: DirectTools) -> list[str]:
    """The running servers with App tools (a listing starts none; a read may)."""
    gateway = direct.gateway
    servers: list[str] = []
    for server, _tool in (await direct.known_apps()).values():
        if server not in servers and gateway is not None and gateway.pool.is_running(server):
            servers.append(server)
    return servers


async def _listed(gateway: ProxyGateway, ctx: Any, server: str) -> list[types.Resource]:
    from bridge_core.gateway import CallFailed

    try:
        answer = await gateway.request(ctx, "list_resources", {"server": server})
    except CallFailed as exc:
        logger.warning("ui:// resources of %s not listed: %s", server, exc.message)
        return []
    resources = []
    for item in answer if isinstance(answer, list) else ():
        if isinstance(item, dict) and str(item.get("uri", "")).startswith(UI_SCHEME):
            try:
                resources.append(types.Resource.model_validate(item))
            except ValidationError:
                continue
    return resources


async def list_ui_resources(
    direct: DirectTools, client: ClientLink | None, client_key: str | None
) -> list[types.Resource]:
    """The ``ui://`` resources of every running server that has App tools."""
    gateway = direct.gateway
    if gateway is None:
        return []
    ctx = _context(client, client_key)
    found: list[types.Resource] = []
    for server in await _app_servers(direct):
        found += await _listed(gateway, ctx, server)
    return found


async def read_ui_resource(
    direct: DirectTools, uri: str, client: ClientLink | None, client_key: str | None
) -> types.ReadResourceResult:
    """Read ``uri`` from the server whose App it belongs to; MCPError if none or it fails."""
    from bridge_core.gateway import CallFailed

    gateway = direct.gateway
    if gateway is None:
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri}")
    ctx = _context(client, client_key)
    apps = (await direct.known_apps()).values()
    owners = list(dict.fromkeys(server for server, tool in apps if ui_resource(tool) == uri))
    if not owners:
        for server in await _app_servers(direct):
            if any(str(r.uri) == uri for r in await _listed(gateway, ctx, server)):
                owners.append(server)
    if not owners:
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri}")
    if len(owners) > 1:
        # Another server naming the same page must not answer in its place (a host renders what
        # comes back as that server's App); which one is meant cannot be told, so neither.
        raise MCPError(
            types.INVALID_PARAMS,
            f"{uri} is claimed by more than one server ({', '.join(owners)}): read it from "
            "run_python with runtime.read_resource, naming the server",
        )
    try:
        answer = await gateway.request(ctx, "read_resource", {"server": owners[0], "uri": uri})
        return types.ReadResourceResult.model_validate(answer)
    except CallFailed as exc:  # masked by the gateway
        raise MCPError(types.INVALID_PARAMS, exc.message) from None
    except ValidationError as exc:
        raise MCPError(
            types.INTERNAL_ERROR, f"invalid resources/read result from {owners[0]}: {exc}"
        ) from None
