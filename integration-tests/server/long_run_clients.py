"""Real SDK 2.3 clients of the real bridge for the long-run tests: a host that speaks the
2026-07-28 Tasks extension (:class:`Tasks`), a user who answers approvals (:class:`User`), the
bridge over stdio (with the probe server, or with a constant of its changed before it starts) and
over HTTP with bearer tokens.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict, TypeAdapter

from .conftest import bridge_env

TASKS = "io.modelcontextprotocol/tasks"
PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
ASK_ECHO = {"MCP_BRIDGE_APPROVE_TOOLS": "probe.echo"}
CALL_ECHO = (
    "from mcp import mcp_servers\n"
    "try:\n"
    "    await mcp_servers['probe'].echo(text='hello')\n"
    "    print('ran')\n"
    "except Exception as exc:\n"
    "    print('refused:', exc)\n"
)


class TaskCreated(types.Result):
    """The flat task handle a ``tools/call`` answers with (``resultType: "task"``)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class Tasks(ClientExtension):
    """What a Tasks-speaking host does: declare the extension, poll ``tasks/get`` until the task
    ends, answer its questions with ``tasks/update``; every status seen is kept."""

    identifier = TASKS

    def __init__(self, answer: Answer | None = None, poll: float = 0.25) -> None:
        self.answer = answer
        self.poll = poll
        self.created: list[dict[str, Any]] = []
        self.seen: list[dict[str, Any]] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskCreated, resolve=self._resolve)]

    async def _resolve(self, created: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created.model_dump(by_alias=True))
        while True:
            got = await request(ctx.session, "tasks/get", {"taskId": created.task_id})
            self.seen.append(got)
            if got["status"] == "completed":
                return types.CallToolResult.model_validate(got["result"])
            if got["status"] in ("failed", "cancelled"):
                text = types.TextContent(type="text", text=got["status"])
                return types.CallToolResult(content=[text], is_error=True)
            if got["status"] == "input_required" and self.answer is not None:
                answers = {k: await self.answer(v) for k, v in got["inputRequests"].items()}
                params = {"taskId": created.task_id, "inputResponses": answers}
                await request(ctx.session, "tasks/update", params)
            await anyio.sleep(self.poll)


class User:
    """Answers approval questions; keeps them."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]

    async def raw(self, request_: dict[str, Any]) -> dict[str, Any]:
        self.questions.append(request_["params"]["message"])
        return {"action": self.answer}


async def request(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request of a method the SDK has no typed call for; its result as a dict."""
    sent = types.Request[dict[str, Any], str](method=method, params=params)
    result: dict[str, Any] = await session.send_request(sent, TypeAdapter(dict[str, Any]))
    return result


async def start_task(client: Client, code: str) -> str:
    """Start ``code`` as a task (it must still run after the 1 s grace); its id."""
    created = await client.session.call_tool("run_python", {"code": code}, allow_claimed=True)
    task_id: str = created.model_dump(by_alias=True)["taskId"]
    return task_id


def probe_servers() -> str:
    """The ``mcpServers`` map (JSON) of the probe server alone."""
    return f'{{"probe": {{"command": "{sys.executable}", "args": ["{PROBE}"]}}}}'


def _stdio(work: Path, servers: str, env: dict[str, str] | None, before: str) -> Any:
    work.mkdir(parents=True, exist_ok=True)
    config = work / "servers.json"
    config.write_text(f'{{"mcpServers": {servers}}}', encoding="utf-8")
    if before:  # run in the bridge's own process, then the bridge as `python -m` runs it
        boot = f"{before}\nimport runpy\n" + (
            "runpy.run_module('mcp_code_execution_mode', run_name='__main__', alter_sys=True)\n"
        )
        start = ["-c", boot]
    else:
        start = ["-m", "mcp_code_execution_mode"]
    return StdioServerParameters(
        command=sys.executable,
        args=[*start, "--state-dir", str(work / "state")],
        env=bridge_env({"MCP_BRIDGE_CONFIG": str(config), **(env or {})}),
    )


@asynccontextmanager
async def bridge_client(work: Path, **options: Any) -> AsyncIterator[Client]:
    """The real bridge over stdio and an ``mcp.Client`` of it (2026-07-28 unless
    ``mode="legacy"``). ``servers``: the ``mcpServers`` JSON; ``env``: bridge settings;
    ``before``: Python run in the bridge's process before it starts (a test's change of one of
    its constants); the rest goes to ``mcp.Client``."""
    servers = options.pop("servers", "{}")
    env = options.pop("env", None)
    before = options.pop("before", "")
    with anyio.fail_after(300):
        async with Client(_stdio(work, servers, env, before), **options) as client:
            yield client


def all_text(result: types.CallToolResult) -> str:
    """Every text block of ``result``, joined (for messages and prose checks)."""
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def token_file(path: Path, *names: str) -> dict[str, str]:
    """Write an HTTP token file for ``names``; each name's token."""
    tokens = {name: secrets.token_urlsafe(32) for name in names}
    lines = [f"{n} sha256:{hashlib.sha256(t.encode()).hexdigest()}\n" for n, t in tokens.items()]
    path.write_text("".join(lines))
    path.chmod(0o600)
    return tokens


@asynccontextmanager
async def http_client(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    """An ``mcp.Client`` of the bridge at ``url`` that presents ``token``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client
