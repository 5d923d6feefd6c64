"""Long runs through the real bridge, real SDK clients and real podman: ``run_python`` as a task
(the 2026-07-28 Tasks extension), yield and resume for clients without Tasks, approvals on both
protocol eras (back channel on 2025-11-25, ``input_required`` on 2026-07-28), and the bounds.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

from .conftest import bridge_env, code_text, open_http_bridge

pytestmark = pytest.mark.container

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


async def request(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request of a method the SDK has no typed call for; its result as a dict."""
    sent = types.Request[dict[str, Any], str](method=method, params=params)
    result: dict[str, Any] = await session.send_request(sent, TypeAdapter(dict[str, Any]))
    return result


def _stdio(work: Path, servers: str = "{}", env: dict[str, str] | None = None) -> Any:
    work.mkdir(parents=True, exist_ok=True)
    config = work / "servers.json"
    config.write_text(f'{{"mcpServers": {servers}}}', encoding="utf-8")
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(work / "state")],
        env=bridge_env({"MCP_BRIDGE_CONFIG": str(config), **(env or {})}),
    )


def _probe_servers() -> str:
    return f'{{"probe": {{"command": "{sys.executable}", "args": ["{PROBE}"]}}}}'


@asynccontextmanager
async def _client(work: Path, **options: Any) -> AsyncIterator[Client]:
    servers = options.pop("servers", "{}")
    env = options.pop("env", None)
    with anyio.fail_after(300):
        async with Client(_stdio(work, servers, env), **options) as client:
            yield client


def _texts(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_a_task_shows_its_output_while_it_runs_and_ends_with_the_plain_result(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = Tasks()
    code = (
        "import time\nfor i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(1)\n"
        "'done'"
    )
    async with _client(tmp_path, extensions=[tasks]) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run_python", {"code": code})
        plain = await client.call_tool("run_python", {"code": "'done'"})
    (created,) = tasks.created
    assert created["status"] == "working"
    assert created["ttlMs"] > 0
    assert "result" not in created
    assert "requestState" not in created
    working = [s["statusMessage"] for s in tasks.seen if s["status"] == "working"]
    # The output so far travels in the status message, growing while the code runs.
    assert any("tick 2" in m and "tick 9" not in m for m in working), working
    assert any("tick 6" in m for m in working), working
    assert tasks.seen[-1]["status"] == "completed"
    assert result.is_error is False
    assert code_text(result) == "\n".join(f"tick {i}" for i in range(10)) + "\n[result] 'done'"
    assert result.structured_content is not None
    assert result.structured_content["status"] == "ok"
    assert "run_id" not in result.structured_content  # exactly what a plain call returns
    # A quick call of the same client stays a call: no task.
    assert plain.structured_content is not None
    assert plain.structured_content["status"] == "ok"
    assert len(tasks.created) == 1


async def test_a_20_s_run_completes_through_its_task_with_a_5_s_request_timeout(
    tmp_path: Path, sandbox_image: str
) -> None:
    tasks = Tasks(poll=1.0)
    code = "import time\nfor _ in range(20):\n    time.sleep(1)\nprint('twenty seconds')"
    async with _client(tmp_path, extensions=[tasks]) as client:
        result = await client.call_tool("run_python", {"code": code}, read_timeout_seconds=5)
    assert result.is_error is False, _texts(result)
    assert code_text(result) == "twenty seconds"


async def test_tasks_cancel_stops_a_busy_loop_and_the_session_goes_on(
    tmp_path: Path, sandbox_image: str
) -> None:
    busy = (
        "import time\nn = 0\nwhile True:\n    n += 1\n"
        "    if n % 100000 == 0:\n        open('/tmp/beat', 'w').write(str(time.time()))\n"
    )
    async with _client(tmp_path, extensions=[Tasks()]) as client:
        session = client.session
        created = await session.call_tool("run_python", {"code": busy}, allow_claimed=True)
        assert isinstance(created, types.Result)
        task_id = created.model_dump(by_alias=True)["taskId"]
        await anyio.sleep(1)
        ack = await request(session, "tasks/cancel", {"taskId": task_id})
        assert ack["resultType"] == "complete"
        assert not {"taskId", "status", "result", "error"} & set(ack)  # an empty ack
        with anyio.fail_after(2):
            got = await request(session, "tasks/get", {"taskId": task_id})
            while got["status"] != "cancelled":  # polling is what a Tasks client does
                await anyio.sleep(0.1)
                got = await request(session, "tasks/get", {"taskId": task_id})
        assert "result" not in got
        # Nothing left running: the heartbeat file stops changing; the session takes code.
        check = (
            "import time\na = open('/tmp/beat').read()\ntime.sleep(1)\n"
            "print(a == open('/tmp/beat').read())"
        )
        after = await client.call_tool("run_python", {"code": check})
        again = await request(session, "tasks/cancel", {"taskId": task_id})  # idempotent
        with pytest.raises(MCPError) as unknown:
            await request(session, "tasks/get", {"taskId": "no-such-task"})
    assert code_text(after).startswith("True"), _texts(after)
    assert again["resultType"] == "complete"
    assert unknown.value.error.code == types.INVALID_PARAMS


async def test_without_tasks_a_run_yields_and_resumes_to_the_same_final_result(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = (
        "import time\nfor i in range(6):\n    print('step', i, flush=True)\n"
        "    time.sleep(0.5)\n6 * 7"
    )
    async with _client(tmp_path) as client:
        plain = await client.call_tool("run_python", {"code": code})
        first = await client.call_tool("run_python", {"code": code, "yield_after": 1})
        assert first.structured_content is not None
        assert first.structured_content["state"] == "running"
        run_id = first.structured_content["run_id"]
        shown = [code_text(first)]
        final = first
        for _ in range(20):
            final = await client.call_tool("run_python", {"resume": run_id, "yield_after": 1})
            assert final.structured_content is not None
            if final.structured_content["state"] == "done":
                break
            shown.append(code_text(final))
        tools = await client.list_tools()
    assert final.structured_content is not None
    assert final.structured_content["state"] == "done"
    assert "step 0" in shown[0]
    assert "resume=" in _texts(first)
    # Everything was shown once: what yielded, then the rest with the final result.
    # (The value alone is shown bare when no line was left to show with it, as in any result.)
    lines = [line for text in [*shown, code_text(final)] for line in text.splitlines()]
    assert [line for line in lines if line.startswith("step")] == [f"step {i}" for i in range(6)]
    assert lines[-1].removeprefix("[result] ") == "42"
    assert code_text(plain).endswith("step 5\n[result] 42")
    assert plain.structured_content is not None
    assert final.structured_content["status"] == plain.structured_content["status"] == "ok"
    (tool,) = tools.tools
    listed = tool.model_dump_json(by_alias=True, exclude_none=True)
    assert len(listed.encode()) <= 900, len(listed.encode())


async def test_run_python_cancel_stops_a_yielded_run_and_unknown_ids_are_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with _client(tmp_path) as client:
        first = await client.call_tool(
            "run_python",
            {"code": "print('started', flush=True)\nwhile True: pass", "yield_after": 1},
        )
        assert first.structured_content is not None
        run_id = first.structured_content["run_id"]
        stopped = await client.call_tool("run_python", {"cancel": run_id})
        after = await client.call_tool("run_python", {"code": "print('next')"})
        unknown = await client.call_tool("run_python", {"resume": "not-a-run"})
        both = await client.call_tool("run_python", {"code": "1", "resume": run_id})
    assert stopped.structured_content is not None
    assert stopped.structured_content["state"] == "cancelled"
    assert code_text(after) == "next"
    assert unknown.is_error is True
    assert "unknown run" in _texts(unknown)
    assert both.is_error is True
    assert "exactly one of" in _texts(both)


def _token_file(path: Path, *names: str) -> dict[str, str]:
    tokens = {name: secrets.token_urlsafe(32) for name in names}
    lines = [f"{n} sha256:{hashlib.sha256(t.encode()).hexdigest()}\n" for n, t in tokens.items()]
    path.write_text("".join(lines))
    path.chmod(0o600)
    return tokens


@asynccontextmanager
async def _http_client(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client


async def test_over_http_another_token_can_neither_resume_nor_read_a_run(
    tmp_path: Path, sandbox_image: str
) -> None:
    tokens = _token_file(tmp_path / "tokens", "alice", "bob")
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    code = "import time\nprint('alice secret output', flush=True)\ntime.sleep(4)\n'alice'"
    async with (
        open_http_bridge(tmp_path, env=env) as bridge,
        _http_client(bridge.url, tokens["alice"], extensions=[Tasks()]) as alice,
    ):
        yielded = await alice.call_tool("run_python", {"code": code, "yield_after": 1})
        created = await alice.session.call_tool(
            "run_python", {"code": code, "session": "other"}, allow_claimed=True
        )
        task_id = created.model_dump(by_alias=True)["taskId"]
        assert yielded.structured_content is not None
        run_id = yielded.structured_content["run_id"]
        async with _http_client(bridge.url, tokens["bob"], extensions=[Tasks()]) as bob:
            resumed = await bob.call_tool("run_python", {"resume": run_id})
            cancelled = await bob.call_tool("run_python", {"cancel": run_id})
            with pytest.raises(MCPError) as read:
                await request(bob.session, "tasks/get", {"taskId": task_id})
            with pytest.raises(MCPError) as stopped:
                await request(bob.session, "tasks/cancel", {"taskId": task_id})
        # A reconnect of alice (same principal) still finds both.
        async with _http_client(bridge.url, tokens["alice"], extensions=[Tasks()]) as again:
            final = await again.call_tool("run_python", {"resume": run_id})
            got = await request(again.session, "tasks/get", {"taskId": task_id})
    for refused in (resumed, cancelled):
        assert refused.is_error is True
        assert "unknown run" in _texts(refused)
        assert "alice secret" not in _texts(refused)
    assert read.value.error.code == stopped.value.error.code == types.INVALID_PARAMS
    assert final.structured_content is not None
    assert final.structured_content["state"] == "done"
    assert got["status"] in ("working", "completed")


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


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_approvals_reach_a_2026_07_28_client_as_input_required(
    tmp_path: Path, sandbox_image: str, answer: str
) -> None:
    user = User(answer)
    async with _client(
        tmp_path, servers=_probe_servers(), env=ASK_ECHO, elicitation_callback=user
    ) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run_python", {"code": CALL_ECHO})
    (question,) = user.questions
    assert "probe.echo" in question
    expected = "ran" if answer == "accept" else "refused:"
    assert code_text(result).startswith(expected), _texts(result)


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_approvals_reach_a_2025_11_25_client_over_its_back_channel(
    tmp_path: Path, sandbox_image: str, answer: str
) -> None:
    user = User(answer)
    async with _client(
        tmp_path, servers=_probe_servers(), env=ASK_ECHO, elicitation_callback=user, mode="legacy"
    ) as client:
        assert client.protocol_version == "2025-11-25"
        result = await client.call_tool("run_python", {"code": CALL_ECHO})
    assert len(user.questions) == 1
    expected = "ran" if answer == "accept" else "refused:"
    assert code_text(result).startswith(expected), _texts(result)


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_a_task_asks_its_approval_as_input_required_and_resumes(
    tmp_path: Path, sandbox_image: str, answer: str
) -> None:
    user = User(answer)
    tasks = Tasks(answer=user.raw)
    code = "import time\ntime.sleep(1.5)\n" + CALL_ECHO
    async with _client(
        tmp_path, servers=_probe_servers(), env=ASK_ECHO, extensions=[tasks],
        elicitation_callback=user,
    ) as client:  # fmt: skip
        result = await client.call_tool("run_python", {"code": code})
    assert [s["status"] for s in tasks.seen].count("input_required") >= 1
    assert len(user.questions) == 1
    assert "probe.echo" in user.questions[0]
    expected = "ran" if answer == "accept" else "refused:"
    assert code_text(result).startswith(expected), _texts(result)


async def test_forged_and_replayed_request_state_is_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with _client(
        tmp_path, servers=_probe_servers(), env=ASK_ECHO, elicitation_callback=User("accept")
    ) as client:
        session = client.session
        args = {"code": CALL_ECHO}
        asked = await session.call_tool("run_python", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        assert asked.request_state
        (key,) = (asked.input_requests or {}).keys()
        answers: Any = {key: {"action": "accept"}}
        with pytest.raises(MCPError) as forged:
            await session.call_tool(
                "run_python", args, input_responses=answers,
                request_state=asked.request_state[:-4] + "AAAA", allow_input_required=True,
            )  # fmt: skip
        with pytest.raises(MCPError) as other_args:
            await session.call_tool(
                "run_python", {"code": CALL_ECHO + "\n"}, input_responses=answers,
                request_state=asked.request_state, allow_input_required=True,
            )  # fmt: skip
        done = await session.call_tool(
            "run_python", args, input_responses=answers, request_state=asked.request_state,
            allow_input_required=True,
        )  # fmt: skip
        replayed = await session.call_tool(
            "run_python", args, input_responses=answers, request_state=asked.request_state,
            allow_input_required=True,
        )  # fmt: skip
    assert forged.value.error.code == other_args.value.error.code == types.INVALID_PARAMS
    assert isinstance(done, types.CallToolResult)
    assert code_text(done).startswith("ran")
    assert isinstance(replayed, types.CallToolResult)
    assert replayed.is_error is True
    assert "unknown run" in _texts(replayed)


def _rss_kib(state_dir: Path) -> int:
    """Resident memory of the bridge process serving ``state_dir``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if b"mcp_code_execution_mode" in b" ".join(cmdline) and str(state_dir).encode() in cmdline:
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    raise AssertionError("bridge process not found")


async def test_a_thousand_task_creations_are_refused_past_the_limit_with_memory_flat(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = "import time\ntime.sleep(60)"
    refused: list[str] = []
    accepted = 0
    async with _client(tmp_path, extensions=[Tasks()]) as client:
        session = client.session
        rss: list[int] = []
        for i in range(1000):
            answer = await session.call_tool(
                "run_python", {"code": code, "session": f"s{i % 4}"}, allow_claimed=True
            )
            if isinstance(answer, types.CallToolResult):
                assert answer.is_error is True
                refused.append(_texts(answer))
            else:
                accepted += 1
            if i in (100, 999):
                rss.append(await anyio.to_thread.run_sync(_rss_kib, tmp_path / "state"))
    assert accepted == 16, accepted
    assert len(refused) == 1000 - accepted
    assert "limit is 16" in refused[0]
    assert "cancel" in refused[0]
    assert rss[1] - rss[0] < 16 * 1024, rss  # KiB: 900 more refusals hold nothing


async def test_a_question_left_by_a_timed_out_resume_is_asked_again_by_the_next(
    tmp_path: Path, sandbox_image: str
) -> None:
    asked: list[str] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if len(asked) == 1:
            await anyio.sleep_forever()  # the user is away: the client's request times out
        return types.ElicitResult(action="accept")

    code = "import time\ntime.sleep(1.5)\n" + CALL_ECHO
    async with _client(
        tmp_path, servers=_probe_servers(), env=ASK_ECHO, elicitation_callback=user, mode="legacy"
    ) as client:
        first = await client.call_tool("run_python", {"code": code, "yield_after": 1})
        assert first.structured_content is not None
        run_id = first.structured_content["run_id"]
        timed_out = None
        with anyio.fail_after(60):
            while timed_out is None:  # resumes until one waits on the question and times out
                try:
                    await client.call_tool(
                        "run_python", {"resume": run_id, "yield_after": 1}, read_timeout_seconds=3
                    )
                except MCPError as exc:
                    timed_out = exc
        # The next resume asks again at once (not after [approvals] timeout, 120 s).
        with anyio.fail_after(30):
            final = await client.call_tool("run_python", {"resume": run_id, "yield_after": 2})
            while final.structured_content and final.structured_content["state"] == "running":
                final = await client.call_tool("run_python", {"resume": run_id, "yield_after": 2})
    assert timed_out.error.code == types.REQUEST_TIMEOUT
    assert len(asked) == 2
    assert code_text(final).startswith("ran"), _texts(final)


async def test_a_nested_call_to_a_tool_that_runs_only_as_a_task_is_awaited_through_it(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    # server-everything's simulate-research-query declares execution.taskSupport "required"
    # (2025-11-25 Tasks): a plain tools/call is refused; the bridge creates the task and waits
    # for its result.
    command = third_party["MCP_SERVER_EVERYTHING"]
    everything = json.dumps({"everything": {"command": command, "args": ["stdio"]}})
    code = (
        "from mcp import mcp_servers\n"
        "r = await mcp_servers['everything'].simulate_research_query(topic='tides')\n"
        "print(r)\n"
    )
    async with _client(tmp_path, servers=everything) as client:
        result = await client.call_tool("run_python", {"code": code, "timeout": 60})
    assert result.is_error is False, _texts(result)
    assert "tides" in code_text(result)
