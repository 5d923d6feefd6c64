"""Attacks on the user's approval of nested calls, through the real bridge (stdio), a real MCP SDK
client whose elicitation callback is the user, real podman and the probe server.

Sandbox code chooses the arguments of the call the user is asked about, and their order: it must
not be able to push the argument the tool acts on out of the question, nor keep a call (or the
run_python call) alive past the bounds the user set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from .conftest import code_text, open_bridge

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
SERVERS = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
ASK_ECHO = {"MCP_BRIDGE_APPROVE_TOOLS": "probe.echo"}


class User:
    """Answers each approval question with ``answer`` (or never), and keeps the questions."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.questions: list[types.ElicitRequestFormParams] = []
        self.asked = anyio.Event()

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params)
        self.asked.set()
        if self.answer == "never":
            await anyio.sleep_forever()
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]


async def test_padding_arguments_cannot_push_the_real_argument_out_of_the_question(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The probe's echo declares one argument, `text`, and ignores any other (as servers that
    # strip unknown keys do): sandbox code puts long undeclared arguments first.
    user = User("decline")
    async with open_bridge(
        tmp_path, servers=SERVERS, env=ASK_ECHO, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers, ApprovalDeclined\n"
            "pad = {f'note{i}': 'harmless ' * 40 for i in range(8)}\n"
            "try:\n"
            "    await mcp_servers['probe'].echo(**pad, text='DROP-TABLE-users')\n"
            "except ApprovalDeclined as e:\n"
            "    print('declined')\n"
        )
    assert code_text(result).startswith("declined"), result
    (question,) = user.questions
    assert "DROP-TABLE-users" in question.message, question.message


THESIS = "/srv/scratch/cache/build-0123" + "/x" * 96 + "/.." * 98 + "/../../home/alice/thesis.tex"


async def test_a_long_path_is_shown_to_its_end_and_resolved_and_padding_cannot_shrink_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A path far longer than a value's room, whose end walks out of the scratch directory. With
    # forty empty undeclared arguments the call is refused without asking (nothing would show
    # honestly); with three, the question shows the path's end and where it resolves.
    user = User("decline")
    async with open_bridge(
        tmp_path, servers=SERVERS, env=ASK_ECHO, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "from mcp import mcp_servers, ApprovalDeclined\n"
            f"path = {THESIS!r}\n"
            "for pad in (40, 3):\n"
            "    empty = {f'p{i}': '' for i in range(pad)}\n"
            "    try:\n"
            "        await mcp_servers['probe'].echo(**empty, text=path)\n"
            "    except ApprovalDeclined as e:\n"
            "        print(pad, e.reason)\n"
        )
    assert code_text(result).split() == ["40", "unshowable", "3", "declined"], result
    (question,) = user.questions
    assert '/../../home/alice/thesis.tex" (' in question.message, question.message
    assert '"text" resolves to "/home/alice/thesis.tex"' in question.message, question.message


async def test_a_question_never_answered_does_not_hold_run_python_past_its_timeout(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The approval timeout (120 s by default) is longer than this run_python call's timeout
    # (3 s): the run ends at its own bound, the question with it, and the call is not made.
    user = User("never")
    async with open_bridge(
        tmp_path, servers=SERVERS, env=ASK_ECHO, client_options={"elicitation_callback": user}
    ) as bridge:
        warm = await bridge.run("from mcp import mcp_servers\nawait mcp_servers['probe'].env()")
        assert not warm.is_error, warm  # the server is up: the 3 s are the question's
        with anyio.fail_after(60):  # a guard against a hang, far above the 3 s asked for
            result = await bridge.run(
                "from mcp import mcp_servers\n"
                "await mcp_servers['probe'].echo(text='never answered')\n"
                "print('ran')\n",
                timeout=3,
            )
        assert user.questions, result
        assert "ran" not in code_text(result), result
        # The bridge still serves: the next run (not asking anything) answers.
        after = await bridge.run("print('still here')")
    assert code_text(after).startswith("still here"), after


async def test_two_thousand_concurrent_calls_needing_approval_ask_once_and_hold_a_bounded_number(
    tmp_path: Path, sandbox_image: str
) -> None:
    # One question (declined): every other call is refused — as declined earlier in this run, or
    # at once past the calls-in-flight bound — and none reaches the server.
    user = User("decline")
    async with open_bridge(
        tmp_path, servers=SERVERS, env=ASK_ECHO, client_options={"elicitation_callback": user}
    ) as bridge:
        result = await bridge.run(
            "import asyncio, collections\n"
            "from mcp import mcp_servers\n"
            "calls = [mcp_servers['probe'].echo(text=f'n{i}') for i in range(2000)]\n"
            "out = await asyncio.gather(*calls, return_exceptions=True)\n"
            "print(sorted(collections.Counter(type(o).__name__ for o in out).items()))\n"
        )
    text = code_text(result)
    assert len(user.questions) == 1, (len(user.questions), text)
    # No call ran: every outcome is an exception.
    assert "str" not in text, text
    assert "dict" not in text, text


async def test_allow_for_session_of_one_server_tool_does_not_cover_another_spelled_alike(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Servers `p` and `p.x`; `p` gains a tool named `x.echo`. "Allow for this session" of
    # p / x.echo must not cover p.x / echo, though both read "p.x.echo" when joined by a dot.
    asked: list[str] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"allow_for_session": True})

    probe = {"command": sys.executable, "args": [str(PROBE)]}
    async with open_bridge(
        tmp_path,
        servers={"p": probe, "p.x": probe},
        env={"MCP_BRIDGE_APPROVAL": "all"},
        client_options={"elicitation_callback": user},
    ) as bridge:
        added = await bridge.run(
            "from mcp import mcp_servers\nawait mcp_servers['p'].add_tool(name='x.echo')"
        )
        assert not added.is_error, added
        result = await bridge.run(
            "import asyncio\n"
            "from mcp import mcp_servers, UnknownTool\n"
            # The new tool shows once the bridge has refreshed p's list (a bounded look).
            "for _ in range(100):\n"
            "    try:\n"
            "        await mcp_servers['p']['x.echo'](value='granted for the session')\n"
            "        break\n"
            "    except UnknownTool:\n"
            "        await asyncio.sleep(0.05)\n"
            "r = await mcp_servers['p.x'].echo(text='another server')\n"
            "print('done')\n"
        )
    assert code_text(result).startswith("done"), result
    assert len(asked) == 3, asked
    # The two questions about different calls read differently.
    assert asked[1].split("\n")[0] != asked[2].split("\n")[0], asked


async def test_allow_for_session_ends_with_the_session_it_was_given_in(
    tmp_path: Path, sandbox_image: str
) -> None:
    asked: list[str] = []

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"allow_for_session": True})

    call = "from mcp import mcp_servers\nawait mcp_servers['probe'].echo(text='x')\nprint('ran')"
    async with open_bridge(
        tmp_path, servers=SERVERS, env=ASK_ECHO, client_options={"elicitation_callback": user}
    ) as bridge:
        first = await bridge.run(call)
        again = await bridge.run(call, reset=True)  # a new sandbox, a new session state
    assert code_text(first).startswith("ran"), first
    assert code_text(again).startswith("ran"), again
    assert len(asked) == 2, asked
