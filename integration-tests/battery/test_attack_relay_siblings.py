"""Attacks through the parts of an upstream's questions the first fixes did not name.

The relayed question's message, a form's titles, defaults and options and a sampling request's
tool definitions were escaped; an upstream then hid text in every other field it sets. Through
the real bridge and the official SDK client: nothing an upstream sets reaches the client with a
character that hides or reorders text, and a URL-mode question opens only an http(s) page.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import code_text, open_bridge

pytestmark = pytest.mark.container

SERVER = Path(__file__).resolve().with_name("relay_siblings_server.py")
HIDDEN = ("\u202e", "\u200b")


def _raw(value: Any, where: str = "") -> list[str]:
    """Where a hidden character sits raw in a JSON value (strings and object keys)."""
    if isinstance(value, str):
        return [where] if any(char in value for char in HIDDEN) else []
    if isinstance(value, dict):
        keys = [f"{where}.{key!r}" for key in value if any(char in key for char in HIDDEN)]
        return keys + [spot for key, item in value.items() for spot in _raw(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [spot for i, item in enumerate(value) for spot in _raw(item, f"{where}[{i}]")]
    return []


async def test_no_field_of_an_upstreams_question_or_sample_reaches_the_client_raw(
    tmp_path: Path, sandbox_image: str
) -> None:
    asked: list[types.ElicitRequestParams] = []
    sampled: list[types.CreateMessageRequestParams] = []
    logs: list[types.LoggingMessageNotificationParams] = []

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

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    servers = {"siblings": {"command": sys.executable, "args": [str(SERVER)]}}
    options = {"elicitation_callback": user, "sampling_callback": model, "logging_callback": on_log}
    async with open_bridge(tmp_path, servers=servers, client_options=options) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers\n"
            "r = await mcp_servers['siblings'].ask(raw=True)\n"
            "print(r['content'][0]['text'])\n"
        )
    outcomes = json.loads(code_text(result).strip().splitlines()[0])
    assert outcomes["sampling"] == outcomes["form"] == "answered", outcomes
    # A javascript: page runs in whatever opens it; a data: page has no host to name.
    assert outcomes["javascript"].startswith("refused"), outcomes
    assert outcomes["data"].startswith("refused"), outcomes
    (form,) = asked  # neither URL question reached the user
    (sample,) = sampled
    for params in (form, sample):
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        assert _raw(dumped) == [], _raw(dumped)
    assert sample.tools is not None
    assert sample.tools[0].icons is None  # the upstream's image is no part of the question
    use = sample.messages[1].content_as_list[0]
    assert isinstance(use, types.ToolUseContent)
    assert use.input == {"path\\u202e\\u200b": "/home/u/\\u202e\\u200btxt.exe"}
    named = [log for log in logs if str(log.logger).startswith("siblings/")]
    assert [log.logger for log in named] == ["siblings/reviewer\\u202e\\u200b"], logs
    assert _raw(named[0].model_dump(mode="json")) == []
