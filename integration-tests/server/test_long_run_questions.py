"""Questions during a run through the real bridge, real SDK 2.3 clients and real podman: the
approval of a nested call and an upstream server's own elicitation and sampling reach a
2026-07-28 client as ``input_required`` (inside a task: its input-required state) and a
2025-11-25 client over its back channel; the sealed ``requestState`` is refused when forged,
altered, expired, another token's, or replayed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from .conftest import code_text, open_http_bridge
from .long_run_clients import (
    ASK_ECHO,
    CALL_ECHO,
    Tasks,
    User,
    all_text,
    bridge_client,
    http_client,
    probe_servers,
    token_file,
)

pytestmark = pytest.mark.container


async def _asked(session: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Call ``run_python`` until its first question: the round's ``requestState`` and answers
    that accept it."""
    asked = await session.call_tool("run_python", args, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult), asked
    assert asked.request_state
    (key,) = (asked.input_requests or {}).keys()
    return asked.request_state, {key: {"action": "accept"}}


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_approvals_reach_a_2026_07_28_client_as_input_required(
    tmp_path: Path, sandbox_image: str, answer: str
) -> None:
    user = User(answer)
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, elicitation_callback=user
    ) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("run_python", {"code": CALL_ECHO})
    (question,) = user.questions
    assert "probe.echo" in question
    expected = "ran" if answer == "accept" else "refused:"
    assert code_text(result).startswith(expected), all_text(result)


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_approvals_reach_a_2025_11_25_client_over_its_back_channel(
    tmp_path: Path, sandbox_image: str, answer: str
) -> None:
    user = User(answer)
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, elicitation_callback=user, mode="legacy"
    ) as client:
        assert client.protocol_version == "2025-11-25"
        result = await client.call_tool("run_python", {"code": CALL_ECHO})
    assert len(user.questions) == 1
    expected = "ran" if answer == "accept" else "refused:"
    assert code_text(result).startswith(expected), all_text(result)


@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_a_task_asks_its_approval_as_input_required_and_resumes(
    tmp_path: Path, sandbox_image: str, answer: str
) -> None:
    user = User(answer)
    tasks = Tasks(answer=user.raw)
    code = "import time\ntime.sleep(1.5)\n" + CALL_ECHO
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, extensions=[tasks],
        elicitation_callback=user,
    ) as client:  # fmt: skip
        result = await client.call_tool("run_python", {"code": code})
    assert [s["status"] for s in tasks.seen].count("input_required") >= 1
    assert len(user.questions) == 1
    assert "probe.echo" in user.questions[0]
    expected = "ran" if answer == "accept" else "refused:"
    assert code_text(result).startswith(expected), all_text(result)


async def test_forged_and_replayed_request_state_is_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, elicitation_callback=User("accept")
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
    assert "unknown run" in all_text(replayed)


async def test_an_expired_request_state_is_refused(tmp_path: Path, sandbox_image: str) -> None:
    ttl = 2.0
    short_ttl = f"import mcp_code_execution_mode.server as server\nserver.REQUEST_STATE_TTL = {ttl}"
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, before=short_ttl,
        elicitation_callback=User("accept"),
    ) as client:  # fmt: skip
        session = client.session
        fresh_args = {"code": CALL_ECHO, "session": "fresh"}
        state, answers = await _asked(session, fresh_args)
        fresh = await session.call_tool(
            "run_python", fresh_args, input_responses=answers, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
        late_args = {"code": CALL_ECHO, "session": "late"}
        state, answers = await _asked(session, late_args)
        await anyio.sleep(ttl + 1)  # the point is the passing of time
        with pytest.raises(MCPError) as expired:
            await session.call_tool(
                "run_python", late_args, input_responses=answers, request_state=state,
                allow_input_required=True,
            )  # fmt: skip
    assert isinstance(fresh, types.CallToolResult)
    assert code_text(fresh).startswith("ran"), all_text(fresh)
    assert expired.value.error.code == types.INVALID_PARAMS


async def test_another_tokens_request_state_is_refused_over_http(
    tmp_path: Path, sandbox_image: str
) -> None:
    tokens = token_file(tmp_path / "tokens", "alice", "bob")
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens"), **ASK_ECHO}
    servers = json.loads(probe_servers())
    args = {"code": CALL_ECHO}
    async with (
        open_http_bridge(tmp_path, env=env, servers=servers) as bridge,
        http_client(bridge.url, tokens["alice"], elicitation_callback=User("accept")) as alice,
        http_client(bridge.url, tokens["bob"], elicitation_callback=User("accept")) as bob,
    ):
        assert alice.protocol_version == bob.protocol_version == "2026-07-28"
        state, answers = await _asked(alice.session, args)
        with pytest.raises(MCPError) as stolen:
            await bob.session.call_tool(
                "run_python", args, input_responses=answers, request_state=state,
                allow_input_required=True,
            )  # fmt: skip
        own = await alice.session.call_tool(
            "run_python", args, input_responses=answers, request_state=state,
            allow_input_required=True,
        )  # fmt: skip
    assert stolen.value.error.code == types.INVALID_PARAMS
    assert isinstance(own, types.CallToolResult)
    assert code_text(own).startswith("ran"), all_text(own)


async def test_a_rounds_request_state_replayed_after_its_answer_is_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    twice = (
        "from mcp import mcp_servers\n"
        "await mcp_servers['probe'].echo(text='one')\n"
        "await mcp_servers['probe'].echo(text='two')\n"
        "print('both ran')\n"
    )
    args = {"code": twice}
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, elicitation_callback=User("accept")
    ) as client:
        session = client.session
        first_state, first_answers = await _asked(session, args)
        second = await session.call_tool(
            "run_python", args, input_responses=first_answers, request_state=first_state,
            allow_input_required=True,
        )  # fmt: skip
        assert isinstance(second, types.InputRequiredResult)
        # The run is alive and waits on its second question: the first round's answer again
        # answers nothing, and the run goes on with the second round's.
        replayed = await session.call_tool(
            "run_python", args, input_responses=first_answers, request_state=first_state,
            allow_input_required=True,
        )  # fmt: skip
        (key,) = (second.input_requests or {}).keys()
        accept: Any = {key: {"action": "accept"}}
        done = await session.call_tool(
            "run_python", args, input_responses=accept,
            request_state=second.request_state, allow_input_required=True,
        )  # fmt: skip
    assert isinstance(replayed, types.CallToolResult)
    assert replayed.is_error is True
    assert replayed.structured_content is not None
    assert replayed.structured_content["error"]["type"] == "AnswerRefused"
    assert isinstance(done, types.CallToolResult)
    assert code_text(done).startswith("both ran"), all_text(done)


async def test_an_upstream_elicitation_and_sampling_reach_a_2026_07_28_client(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    elicited: list[types.ElicitRequestParams] = []
    sampled: list[types.CreateMessageRequestParams] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace"})

    async def sampling(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        sampled.append(params)
        text = types.TextContent(type="text", text="answer written by the real client")
        return types.CreateMessageResult(role="assistant", content=text, model="client-model-7")

    show = "print('\\n'.join(c.get('text', '') for c in r['content']))"
    ask = (
        "from mcp import mcp_servers\n"
        "r = await mcp_servers['everything']['trigger-elicitation-request'](raw=True)\n" + show
    )
    sample = (
        "from mcp import mcp_servers\n"
        "r = await mcp_servers['everything']['trigger-sampling-request']"
        "(prompt='two words', maxTokens=7, raw=True)\n" + show
    )
    command = third_party["MCP_SERVER_EVERYTHING"]
    everything = json.dumps({"everything": {"command": command, "args": ["stdio"]}})
    async with bridge_client(
        tmp_path, servers=everything, elicitation_callback=elicitation, sampling_callback=sampling
    ) as client:
        assert client.protocol_version == "2026-07-28"
        asked = await client.call_tool("run_python", {"code": ask, "timeout": 60})
        answered = await client.call_tool("run_python", {"code": sample, "timeout": 60})
    assert len(elicited) == 1
    assert "Ada Lovelace" in code_text(asked), all_text(asked)
    assert len(sampled) == 1
    assert "answer written by the real client" in code_text(answered), all_text(answered)


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
    async with bridge_client(
        tmp_path, servers=probe_servers(), env=ASK_ECHO, elicitation_callback=user, mode="legacy"
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
    assert code_text(final).startswith("ran"), all_text(final)
