"""Workflows end to end: the real bridge (stdio and ``serve --http`` with tokens), the real SDK
client, real podman and a real MCP server (the probe). A workflow saved in one session is found
by a paraphrase and called from another session and after a restart; versions; delete; a
workflow's nested call to a tool that needs approval still asks; principals are kept apart."""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import code_text, open_bridge, open_http_bridge

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
SERVERS = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}

SAVE_V1 = '''
from mcp import runtime, mcp_servers

async def monthly_sales_report(month: str) -> str:
    """Summarise the revenue of one month from the sales CSV."""
    echoed = await mcp_servers["probe"].echo(text=f"report {month}")
    return f"v1 {echoed}"

print(await runtime.save_workflow(monthly_sales_report, description="Monthly sales summary"))
'''
SAVE_V2 = SAVE_V1.replace('f"v1 {echoed}"', 'f"v2 {echoed}"')
FIND_AND_CALL = """
from mcp import runtime
hits = runtime.search_workflows("summary of revenue per month")
print([(h["name"], h["version"]) for h in hits])
mixed = await runtime.search_tool_docs("monthly revenue summary", limit=3)
print(mixed[0]["kind"], mixed[0]["name"], {h["kind"] for h in mixed[1:]} <= {"tool"})
report = runtime.workflow(hits[0]["name"])
print(await report("may"))
"""


def _lines(result: Any) -> list[str]:
    return code_text(result).splitlines()


def _audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_saved_found_by_paraphrase_called_elsewhere_versioned_restarted_and_deleted(
    tmp_path: Path, sandbox_image: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    env = {"MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(tmp_path, servers=SERVERS, env=env) as bridge:
        saved = await bridge.run(SAVE_V1, session="first")
        assert _lines(saved) == ["{'name': 'monthly_sales_report', 'version': 1}"], saved
        found = await bridge.run(FIND_AND_CALL, session="second")
        assert _lines(found) == [
            "[('monthly_sales_report', 1)]",
            "workflow monthly_sales_report True",
            "v1 report may",
        ], found
        again = await bridge.run(SAVE_V2, session="first")
        assert _lines(again) == ["{'name': 'monthly_sales_report', 'version': 2}"], again
        both = await bridge.run(
            "from mcp import runtime\n"
            "print(await runtime.workflow('monthly_sales_report')('june'))\n"
            "old = await runtime.workflow('monthly_sales_report', version=1)\n"
            "print(await old('june'))\n"
            "print([(w['name'], w['versions']) for w in runtime.list_workflows()])",
            session="third",
        )
        assert _lines(both) == [
            "v2 report june",
            "v1 report june",
            "[('monthly_sales_report', [1, 2])]",
        ], both
    async with open_bridge(tmp_path, servers=SERVERS, env=env) as restarted:
        after = await restarted.run(
            "from mcp import runtime\n"
            "print(await runtime.workflow('monthly_sales_report')('july'))\n"
            "print(runtime.delete_workflow('monthly_sales_report'))\n"
            "print(runtime.list_workflows(), runtime.search_workflows('monthly sales'))\n"
            "try:\n"
            "    runtime.workflow('monthly_sales_report')\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__, exc)",
            session="fourth",
        )
    assert _lines(after) == [
        "v2 report july",
        "{'name': 'monthly_sales_report', 'deleted': [1, 2]}",
        "[] []",
        "UnknownTool no workflow named 'monthly_sales_report'",
    ], after
    records = [r for r in _audit(audit) if "event" in r]
    assert [(r["event"], r["principal"], r["session"], r["versions"]) for r in records] == [
        ("workflow_saved", "stdio", "first", [1]),
        ("workflow_saved", "stdio", "first", [2]),
        ("workflow_deleted", "stdio", "fourth", [1, 2]),
    ]
    calls = [r for r in _audit(audit) if r.get("tool") == "echo"]
    assert [r["session"] for r in calls] == ["second", "third", "third", "fourth"]


async def test_a_workflow_that_loads_another_runs_both_in_the_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, servers=SERVERS) as bridge:
        result = await bridge.run(
            "from mcp import runtime\n"
            "def shout(text):\n"
            "    return text.upper()\n"
            "async def greet(name):\n"
            "    import os\n"
            "    loud = runtime.workflow('shout')\n"
            "    echoed = await mcp_servers['probe'].echo(text=loud(name))\n"
            "    return echoed, os.getuid()\n"
            "runtime.save_workflow(shout)\n"
            "runtime.save_workflow(greet)\n"
            "print(await runtime.workflow('greet')('ada'))\n"
            "print(runtime.list_workflows()[0]['tools'], runtime.list_workflows()[0]['workflows'])"
        )
    assert _lines(result) == ["('ADA', 65534)", "['probe.echo'] ['shout']"], result


class Decline:
    """A user who declines every approval question (and keeps them)."""

    def __init__(self) -> None:
        self.questions: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params)
        return types.ElicitResult(action="decline")


async def test_a_workflow_calling_a_tool_that_needs_approval_asks_and_declined_does_not_call(
    tmp_path: Path, sandbox_image: str
) -> None:
    user = Decline()
    audit = tmp_path / "audit.jsonl"
    env = {"MCP_BRIDGE_APPROVE_TOOLS": "probe.echo", "MCP_BRIDGE_AUDIT_LOG": str(audit)}
    async with open_bridge(
        tmp_path, servers=SERVERS, env=env, client_options={"elicitation_callback": user}
    ) as bridge:
        await bridge.run(SAVE_V1)
        result = await bridge.run(
            "from mcp import runtime, ApprovalDeclined\n"
            "try:\n"
            "    print(await runtime.workflow('monthly_sales_report')('may'))\n"
            "except ApprovalDeclined as exc:\n"
            "    print('declined', exc.reason)",
            session="later",
        )
    assert _lines(result) == ["declined declined"], result
    (question,) = user.questions
    assert "probe.echo" in question.message
    (call,) = [r for r in _audit(audit) if r.get("tool") == "echo"]
    assert (call["outcome"], call["approval"]) == ("not_approved", "declined")


def _token_file(path: Path, *names: str) -> dict[str, str]:
    tokens = {name: secrets.token_urlsafe(32) for name in names}
    lines = [f"{n} sha256:{hashlib.sha256(t.encode()).hexdigest()}\n" for n, t in tokens.items()]
    path.write_text("".join(lines), encoding="utf-8")
    path.chmod(0o600)
    return tokens


async def test_over_http_another_token_sees_none_of_the_first_tokens_workflows(
    tmp_path: Path, sandbox_image: str
) -> None:
    tokens = _token_file(tmp_path / "tokens", "alice", "bob")
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    look = (
        "from mcp import runtime\n"
        "print(runtime.list_workflows(), runtime.search_workflows('monthly sales report'))\n"
        "hits = await runtime.search_tool_docs('monthly revenue summary')\n"
        "print([h.get('kind') for h in hits])\n"
        "try:\n"
        "    runtime.workflow('monthly_sales_report')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    async with open_http_bridge(tmp_path, env=env, servers=SERVERS) as bridge:
        async with bridge.session(tokens["alice"]) as alice:
            saved = await alice.run(SAVE_V1)
            assert _lines(saved) == ["{'name': 'monthly_sales_report', 'version': 1}"], saved
        async with bridge.session(tokens["bob"]) as bob:
            seen = await bob.run(look)
            assert _lines(seen) == ["[] []", "[]", "UnknownTool"], seen
            own = await bob.run(SAVE_V2)
            assert _lines(own) == ["{'name': 'monthly_sales_report', 'version': 1}"], own
        async with bridge.session(tokens["alice"]) as again:
            mine = await again.run(
                "from mcp import runtime\n"
                "print(await runtime.workflow('monthly_sales_report')('may'))"
            )
            assert _lines(mine) == ["v1 report may"], mine
