"""The upstream MCP proxy: supervised clients of the user's MCP servers and the sandbox gateway."""

from bridge_core.proxy.errors import (
    UnknownServer,
    UpstreamCrashed,
    UpstreamRPCError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from bridge_core.proxy.gateway import ProxyGateway, open_proxy
from bridge_core.proxy.options import ProxyOptions
from bridge_core.proxy.pool import ToolsListener, UpstreamPool

__all__ = [
    "ProxyGateway",
    "open_proxy",
    "UpstreamPool",
    "ToolsListener",
    "ProxyOptions",
    "UnknownServer",
    "UpstreamUnavailable",
    "UpstreamCrashed",
    "UpstreamTimeout",
    "UpstreamRPCError",
]
