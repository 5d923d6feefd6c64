"""Start MCP servers the way the bridge does and list their tools (for ``doctor`` and ``demo``)."""

from __future__ import annotations

from collections.abc import Iterable

import anyio
import mcp_types as types
from bridge_core.errors import BridgeError
from bridge_core.proxy import ProxyOptions, UpstreamPool
from bridge_core.servers import ServerSpec

__all__ = ["SERVER_CHECK_TIMEOUT", "probe_servers"]

SERVER_CHECK_TIMEOUT = 60.0
"""``npx``/``uvx`` servers may install themselves on first start."""


async def probe_servers(
    specs: Iterable[ServerSpec], options: ProxyOptions
) -> dict[str, list[types.Tool] | str]:
    """Each server's tools, or why it could not list them (all started concurrently, with the
    timeouts and bounds of ``options``)."""
    specs = list(specs)
    results: dict[str, list[types.Tool] | str] = {}
    if not specs:
        return results
    async with UpstreamPool(specs, options) as pool:

        async def probe(name: str) -> None:
            try:
                with anyio.fail_after(SERVER_CHECK_TIMEOUT):
                    results[name] = list(await pool.list_tools(name))
            except TimeoutError:
                results[name] = f"did not answer within {SERVER_CHECK_TIMEOUT:g} s"
            except BridgeError as exc:
                results[name] = str(exc)

        async with anyio.create_task_group() as tg:
            for spec in specs:
                tg.start_soon(probe, spec.name)
    return results
