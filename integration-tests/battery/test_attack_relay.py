"""Attacks through what an upstream server asks of its client (relayed to the real client).

An upstream server's elicitation reaches the same client, in the same dialog, as the bridge's own
approval questions. A server that words its question like an approval ("Code running in session
... wants to call ... Accept to run it") must not be taken for the bridge: the relayed question
names the server that asks.
"""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import code_text, open_bridge

pytestmark = pytest.mark.container


async def test_an_upstream_elicitation_is_named_as_the_servers_not_the_bridges(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    servers = {"everything": {"command": third_party["MCP_SERVER_EVERYTHING"], "args": ["stdio"]}}
    async with open_bridge(
        tmp_path, servers=servers, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers\n"
            "await mcp_servers['everything']['trigger-elicitation-request'](raw=True)\n"
            "print('done')"
        )
    assert code_text(result).startswith("done"), result
    (question,) = asked
    assert question.message.startswith('[The MCP server "everything" asks, through the bridge] ')
