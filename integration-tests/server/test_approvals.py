"""Nested calls that need the user's approval, through the real bridge (stdio), a real MCP SDK
client with an elicitation callback (the user), real podman and real MCP servers.

The "user" is the client's elicitation callback: it records each question and answers as the
test says (accept, accept for the session, decline, or never).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import code_text, open_bridge, open_http_bridge, real_servers

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
SECRET = "approval-canary-9f3e1c2b7a"
"""A value configured in the probe server's env: masked wherever it would reach the user."""


def _probe() -> dict[str, Any]:
    return {"probe": {"command": sys.executable, "args": [str(PROBE)], "env": {"TOKEN": SECRET}}}


class User:
    """The person behind the client: answers approval questions (``answer``), keeps them."""

    def __init__(self, answer: str = "accept", content: dict[str, Any] | None = None) -> None:
        self.answer = answer
        self.content = content
        self.questions: list[types.ElicitRequestFormParams] = []
        self.never = anyio.Event()  # never set: a user who does not answer

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params)
        if self.answer == "never":
            await self.never.wait()
        return types.ElicitResult(action=self.answer, content=self.content)  # type: ignore[arg-type]


def _audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


ASK_ECHO = {"MCP_BRIDGE_APPROVE_TOOLS": "probe.echo"}


async def test_an_approved_call_runs_and_the_question_shows_the_call_with_secrets_masked(
    tmp_path: Path, sandbox_image: str
) -> None:
    user = User("accept")
    audit = tmp_path / "audit.jsonl"
    env = {**ASK_ECHO, "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(
        tmp_path, servers=_probe(), env=env, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers\n"
            f"r = await mcp_servers['probe'].echo(text='use {SECRET} now')\n"
            "print('ran')"
        )
    assert code_text(result).startswith("ran"), result
    (question,) = user.questions
    assert "probe.echo" in question.message
    assert "[approval] tools=probe.echo" in question.message
    assert SECRET not in question.message
    assert "use *** now" in question.message
    (record,) = _audit(audit)
    assert (record["tool"], record["outcome"], record["approval"]) == ("echo", "ok", "asked")


async def test_a_declined_call_raises_approval_declined_and_is_not_asked_again_in_that_run(
    tmp_path: Path, sandbox_image: str
) -> None:
    user = User("decline")
    audit = tmp_path / "audit.jsonl"
    env = {**ASK_ECHO, "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    code = (
        "from mcp import mcp_servers, ApprovalDeclined, PolicyDenied\n"
        "for attempt in range(3):\n"
        "    try:\n"
        "        await mcp_servers['probe'].echo(text='x')\n"
        "    except ApprovalDeclined as e:\n"
        "        print(attempt, e.reason, e.code, isinstance(e, PolicyDenied))\n"
    )
    async with open_bridge(
        tmp_path, servers=_probe(), env=env, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(code)
    lines = code_text(result).splitlines()
    assert lines == [
        "0 declined 210 True",
        "1 declined_earlier 210 True",
        "2 declined_earlier 210 True",
    ]
    assert len(user.questions) == 1
    records = _audit(audit)
    assert [(r["outcome"], r["approval"]) for r in records] == [
        ("not_approved", "declined"),
        ("not_approved", "declined_earlier"),
        ("not_approved", "declined_earlier"),
    ]


async def test_no_answer_within_the_approval_timeout_declines_the_call(
    tmp_path: Path, sandbox_image: str
) -> None:
    user = User("never")
    env = {**ASK_ECHO, "MCP_BRIDGE_APPROVAL_TIMEOUT": "1s"}
    async with open_bridge(
        tmp_path, servers=_probe(), env=env, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers, ApprovalDeclined\n"
            "try:\n"
            "    await mcp_servers['probe'].echo(text='x')\n"
            "except ApprovalDeclined as e:\n"
            "    print(e.reason, '|', e)\n"
        )
    text = code_text(result)
    assert text.startswith("timeout | "), text
    assert "[approval] timeout" in text
    assert len(user.questions) == 1


async def test_allow_for_session_is_remembered_in_that_session_only(
    tmp_path: Path, sandbox_image: str
) -> None:
    user = User("accept", {"allow_for_session": True})
    audit = tmp_path / "audit.jsonl"
    env = {**ASK_ECHO, "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    code = (
        "from mcp import mcp_servers\n"
        "for _ in range(3):\n"
        "    await mcp_servers['probe'].echo(text='x')"
    )
    async with open_bridge(
        tmp_path, servers=_probe(), env=env, client_options={"elicitation_callback": user}
    ) as bridge:
        await bridge.run(code)
        await bridge.run(code)
        asked_in_default = len(user.questions)
        await bridge.run(code, session="other")
    assert asked_in_default == 1
    assert len(user.questions) == 2
    approvals = [r["approval"] for r in _audit(audit)]
    in_default, in_other = approvals[:6], approvals[6:]
    assert in_default == ["asked_session"] + ["session"] * 5
    assert in_other == ["asked_session", "session", "session"]


async def test_a_client_without_elicitation_is_refused_with_an_error_naming_the_setting(
    tmp_path: Path, sandbox_image: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    env = {**ASK_ECHO, "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(tmp_path, servers=_probe(), env=env) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers, ApprovalDeclined\n"
            "try:\n"
            "    await mcp_servers['probe'].echo(text='x')\n"
            "except ApprovalDeclined as e:\n"
            "    print(e.reason, '|', e)\n"
            "await mcp_servers['probe'].sleep(seconds=0)\n"
            "print('after')"
        )
    text = code_text(result)
    assert text.startswith("unsupported | "), text
    assert "[approval] fallback=allow" in text
    assert text.splitlines()[-1] == "after"  # a call that needs no approval still runs
    assert [(r["tool"], r["outcome"]) for r in _audit(audit)] == [
        ("echo", "not_approved"),
        ("sleep", "ok"),
    ]


async def test_the_fallback_setting_allows_calls_when_the_client_cannot_ask(
    tmp_path: Path, sandbox_image: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    env = {**ASK_ECHO, "MCP_BRIDGE_APPROVAL_FALLBACK": "allow", "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(tmp_path, servers=_probe(), env=env) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers\nawait mcp_servers['probe'].echo(text='x')\nprint('ran')"
        )
    assert code_text(result).startswith("ran")
    (record,) = _audit(audit)
    assert (record["outcome"], record["approval"]) == ("ok", "fallback_allow")


async def test_a_tool_annotated_destructive_asks_by_default_and_a_read_only_one_does_not(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    # The real memory server annotates delete_entities destructiveHint: true and read_graph
    # readOnlyHint: true; no approval setting is given (the default applies).
    user = User("accept")
    servers = {"memory": real_servers(third_party, tmp_path)["memory"]}
    async with open_bridge(
        tmp_path, servers=servers, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "from mcp import mcp_memory\n"
            "await mcp_memory.read_graph()\n"
            "await mcp_memory.delete_entities(entityNames=['nobody'])\n"
            "print('done')"
        )
    assert code_text(result).startswith("done"), result
    (question,) = user.questions
    assert "memory.delete_entities" in question.message
    assert "[approval] mode=destructive" in question.message


async def test_over_http_each_client_is_asked_about_its_own_calls_only(
    tmp_path: Path, sandbox_image: str
) -> None:
    alice, bob = User("accept", {"allow_for_session": True}), User("decline")
    code = (
        "from mcp import mcp_servers, ApprovalDeclined\n"
        "try:\n"
        "    await mcp_servers['probe'].echo(text='x')\n"
        "    print('ran')\n"
        "except ApprovalDeclined as e:\n"
        "    print(e.reason)\n"
    )
    async with (
        open_http_bridge(tmp_path, servers=_probe(), env=ASK_ECHO) as bridge,
        bridge.session(client_options={"elicitation_callback": alice}) as first,
        bridge.session(client_options={"elicitation_callback": bob}) as second,
    ):
        ran = await first.run(code)
        refused = await second.run(code)
        again = await second.run(code)  # alice's session grant is not bob's
    assert code_text(ran).strip() == "ran"
    assert code_text(refused).strip() == "declined"
    assert code_text(again).strip() == "declined"
    assert (len(alice.questions), len(bob.questions)) == (1, 2)
