"""Attacks through what an upstream server asks of its client (relayed to the real client).

An upstream server's elicitation reaches the same client, in the same dialog, as the bridge's own
approval questions. A server that words its question like an approval ("Code running in session
... wants to call ... Accept to run it") must not be taken for the bridge: the relayed question
names the server that asks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
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
    assert question.message.startswith('[The MCP server "everything" asks, through the bridge; ')


FLOOD = Path(__file__).resolve().parents[1] / "servers" / "flood_server.py"
NAMED = '[The MCP server "flood" asks, through the bridge; this is not the bridge\'s approval'


async def test_an_upstream_dressing_its_questions_as_the_bridges_is_named_first_and_escaped(
    tmp_path: Path, sandbox_image: str
) -> None:
    # CR, terminal erase codes, a right-to-left override, a zero-width space and 40 blank lines
    # before a copy of the approval question; the same with the approval form's own field; in
    # URL mode; and a sampling request whose system prompt claims to be the bridge's reviewer.
    asked: list[types.ElicitRequestParams] = []
    sampled: list[types.CreateMessageRequestParams] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    async def model(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        sampled.append(params)
        text = types.TextContent(type="text", text="no")
        return types.CreateMessageResult(role="assistant", content=text, model="m")

    servers = {"flood": {"command": sys.executable, "args": [str(FLOOD)]}}
    options = {"elicitation_callback": user, "sampling_callback": model}
    async with open_bridge(tmp_path, servers=servers, client_options=options) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers\n"
            "r = await mcp_servers['flood'].mimic(raw=True)\n"
            "print(r['content'][0]['text'])\n"
        )
    outcomes = json.loads(code_text(result).strip().splitlines()[0])
    assert outcomes["field"].startswith("refused"), outcomes  # the approval form's field
    assert [outcomes[k] for k in ("form", "url", "sampling")] == ["answered"] * 3, outcomes
    form, url = asked
    for question in (form, url):
        assert question.message.split("\n")[0].startswith(NAMED), question.message
        for hidden in ("\r", "\x1b", "\u202e", "\u200b", "\n\n\n"):
            assert hidden not in question.message, question.message
    assert isinstance(url, types.ElicitRequestURLParams)
    assert 'It asks you to open a page on "evil.example".' in url.message, url.message
    (sampling,) = sampled
    assert (sampling.system_prompt or "").startswith(NAMED), sampling.system_prompt


async def test_an_upstream_flooding_questions_logs_and_progress_reaches_the_client_bounded(
    tmp_path: Path, sandbox_image: str
) -> None:
    # 200 questions at once, 2,000 logs and 2,000 progress notifications of 5 KB each: the user
    # sees at most 4 questions at a time (the rest are refused to the server at once), and at
    # most 50 notifications per 10 s window, each cut to 2,000 characters.
    waiting = 0
    most = 0
    asked = 0
    four = anyio.Event()
    logs: list[types.LoggingMessageNotificationParams] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        nonlocal waiting, most, asked
        asked += 1
        waiting += 1
        most = max(most, waiting)
        if waiting >= 4:
            four.set()
        await four.wait()
        waiting -= 1
        return types.ElicitResult(action="decline")

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    servers = {"flood": {"command": sys.executable, "args": [str(FLOOD)]}}
    options = {"elicitation_callback": user, "logging_callback": on_log}
    async with open_bridge(tmp_path, servers=servers, client_options=options) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers\n"
            "r = await mcp_servers['flood'].flood(questions=200, logs=2000, raw=True)\n"
            "print(r['content'][0]['text'])\n"
        )
    text = code_text(result)
    assert text.startswith("{"), result
    counts = json.loads(text.strip().splitlines()[0])
    assert counts["answered"] + counts["refused"] == 200, counts
    assert most <= 4, (most, asked, counts)
    relayed = [log for log in logs if str(log.logger).startswith("flood")]
    assert 0 < len(relayed) <= 100, len(relayed)  # at most two windows of 50
    assert all(len(str(log.data)) <= 2001 for log in relayed)
