"""Direct tools (``[tools] mode``, ``serve --tools``, ``?tools=``) through the real bridge, a real
MCP SDK client and real MCP servers: listed as ``<server>__<tool>`` with their schemas, output
schemas, annotations and ``_meta`` as the upstream gave them (also from the tool cache), called
through the gateway the sandbox's nested calls use (policy, approvals, audit, the call bound,
secret masking), over stdio and HTTP.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .conftest import bridge_env, code_text, open_bridge, open_http_bridge

pytestmark = pytest.mark.container

APPS = Path(__file__).resolve().parents[1] / "servers" / "apps_server.py"
PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
CHART_URI = "ui://apps/chart.html"
CHART_HTML = "<!doctype html><html><body><h1 id='chart'>apps-server chart</h1></body></html>"
CALL_TIMEOUT = 60


def _everything(third_party: dict[str, str]) -> dict[str, Any]:
    return {"everything": {"command": third_party["MCP_SERVER_EVERYTHING"], "args": ["stdio"]}}


def _apps(erase_log: Path) -> dict[str, Any]:
    return {
        "apps": {
            "command": sys.executable,
            "args": [str(APPS)],
            "env": {"ERASE_LOG": str(erase_log)},
        }
    }


async def _names(session: ClientSession) -> list[str]:
    with anyio.fail_after(CALL_TIMEOUT):
        listed = await session.list_tools()
    return [tool.name for tool in listed.tools]


async def _call(session: ClientSession, name: str, arguments: dict[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT + 10):
        return await session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _settings_file(work: Path, text: str) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "bridge.toml").write_text(text, encoding="utf-8")


def _direct_bridge(work: Path, servers: dict[str, Any]) -> StdioServerParameters:
    """The bridge in direct mode for ``mcp.Client`` (which speaks 2026-07-28 by default)."""
    config = work / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "serve", "--tools", "direct",
              "--state-dir", str(work / "state")],
        env=bridge_env({"MCP_BRIDGE_CONFIG": str(config)}),
    )  # fmt: skip


class User:
    """Answers the bridge's approval questions with ``answer``; keeps them."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.questions: list[types.ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.questions.append(params)
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]


async def test_direct_mode_lists_everything_echo_with_its_schema_and_calls_it(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    async with open_bridge(
        tmp_path, servers=_everything(third_party), args=("--tools", "direct")
    ) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            listed = await bridge.session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert "run_python" not in tools
        echo = tools["everything__echo"]
        assert echo.input_schema["properties"]["message"]["type"] == "string"
        assert echo.input_schema["required"] == ["message"]
        assert all(name.startswith("everything__") for name in tools)
        result = await _call(bridge.session, "everything__echo", {"message": "direct hello"})
        assert not result.is_error
        assert "direct hello" in _text(result)


async def test_a_denied_tool_is_not_listed_and_a_call_by_its_name_is_refused_and_audited(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    audit = tmp_path / "audit.jsonl"
    _settings_file(
        tmp_path,
        f'[policy]\ndeny_tools = ["everything.echo"]\n[audit]\nlog = "{audit}"\n',
    )
    async with open_bridge(
        tmp_path, servers=_everything(third_party), args=("--tools", "direct")
    ) as bridge:
        names = await _names(bridge.session)
        assert "everything__echo" not in names
        assert "everything__get-sum" in names
        refused = await _call(bridge.session, "everything__echo", {"message": "x"})
        assert refused.is_error
        assert refused.structured_content["error"]["type"] == "POLICY_DENIED"
        summed = await _call(bridge.session, "everything__get-sum", {"a": 2, "b": 3})
        assert not summed.is_error
        assert "5" in _text(summed)
    records = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    outcomes = [(r["server"], r["tool"], r["outcome"]) for r in records]
    assert outcomes == [("everything", "echo", "denied"), ("everything", "get-sum", "ok")]


async def test_a_destructive_tool_asks_first_and_declined_does_not_run(
    tmp_path: Path, sandbox_image: str
) -> None:
    erase_log = tmp_path / "erased.txt"
    user = User("decline")
    async with open_bridge(
        tmp_path,
        servers=_apps(erase_log),
        args=("--tools", "direct"),
        client_options={"elicitation_callback": user},
    ) as bridge:
        result = await _call(bridge.session, "apps__erase", {"path": "/data/precious"})
        assert result.is_error
        assert result.structured_content["error"]["type"] == "APPROVAL_DECLINED"
        assert len(user.questions) == 1
        assert "erase" in user.questions[0].message
        user.answer = "accept"
        done = await _call(bridge.session, "apps__erase", {"path": "/data/scratch"})
        assert not done.is_error
        assert _text(done) == "erased /data/scratch"
    assert erase_log.read_text(encoding="utf-8") == "/data/scratch\n"


async def test_a_2026_07_28_client_approves_a_direct_destructive_call_as_input_required(
    tmp_path: Path, sandbox_image: str
) -> None:
    erase_log = tmp_path / "erased.txt"
    user = User("decline")
    params = _direct_bridge(tmp_path, _apps(erase_log))
    with anyio.fail_after(CALL_TIMEOUT * 3):
        async with Client(params, elicitation_callback=user) as client:
            assert client.protocol_version == "2026-07-28"  # no back channel: input_required
            declined = await client.call_tool("apps__erase", {"path": "/data/precious"})
            user.answer = "accept"
            done = await client.call_tool("apps__erase", {"path": "/data/scratch"})
    assert declined.is_error
    assert declined.structured_content is not None
    assert declined.structured_content["error"]["type"] == "APPROVAL_DECLINED"
    assert [q.message.count("erase") > 0 for q in user.questions] == [True, True]
    assert not done.is_error
    assert _text(done) == "erased /data/scratch"
    assert erase_log.read_text(encoding="utf-8") == "/data/scratch\n"


async def test_a_direct_result_over_the_output_cap_is_cut_to_head_and_tail_and_says_so(
    tmp_path: Path, sandbox_image: str
) -> None:
    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
    big = "a" * 3000 + "b" * 20000 + "z" * 3000
    async with open_bridge(
        tmp_path,
        servers=servers,
        args=("--tools", "direct"),
        env={"MCP_BRIDGE_OUTPUT_CAP": "4k"},
    ) as bridge:
        result = await _call(bridge.session, "probe__echo", {"text": big})
    text = _text(result)
    assert not result.is_error
    assert "a" * 2000 in text
    assert "z" * 1000 in text
    assert "b" * 5000 not in text
    assert "over the bridge's output cap of 4,096" in text


async def test_a_destructive_tool_is_refused_when_the_client_cannot_be_asked(
    tmp_path: Path, sandbox_image: str
) -> None:
    erase_log = tmp_path / "erased.txt"
    async with open_bridge(tmp_path, servers=_apps(erase_log), args=("--tools", "direct")) as b:
        result = await _call(b.session, "apps__erase", {"path": "/data/precious"})
        assert result.is_error
        assert result.structured_content["error"]["type"] == "APPROVAL_DECLINED"
    assert not erase_log.exists()


async def test_both_lists_run_python_and_the_direct_tools(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    async with open_bridge(
        tmp_path, servers=_everything(third_party), args=("--tools", "both")
    ) as bridge:
        names = await _names(bridge.session)
        assert names[0] == "run_python"
        assert "everything__echo" in names


async def test_the_default_lists_only_run_python(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    async with open_bridge(tmp_path, servers=_everything(third_party)) as bridge:
        assert await _names(bridge.session) == ["run_python"]
        unknown = await _call(bridge.session, "everything__echo", {"message": "x"})
        assert unknown.is_error


async def test_over_http_tools_direct_in_the_url_changes_that_clients_list_only(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    async with (
        open_http_bridge(tmp_path, servers=_everything(third_party)) as bridge,
        bridge.session() as plain,
        bridge.http() as http,
        streamable_http_client(f"{bridge.url}?tools=direct", http_client=http) as (read, write),
        ClientSession(read, write) as direct,
    ):
        with anyio.fail_after(60):
            await direct.initialize()
        direct_names = await _names(direct)
        assert "everything__echo" in direct_names
        assert "run_python" not in direct_names
        assert await _names(plain.session) == ["run_python"]
        echoed = await _call(direct, "everything__echo", {"message": "over http"})
        assert "over http" in _text(echoed)


async def test_an_mcp_app_tool_is_listed_in_code_mode_once_its_server_runs_and_its_ui_reads_back(
    tmp_path: Path, sandbox_image: str
) -> None:
    erase_log = tmp_path / "erased.txt"
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with open_bridge(
        tmp_path, servers=_apps(erase_log), client_options={"message_handler": on_message}
    ) as bridge:
        # Not running yet: a code-mode listing starts no server.
        assert await _names(bridge.session) == ["run_python"]
        ran = await bridge.run(
            "from mcp import mcp_servers\n"
            "r = await mcp_servers['apps'].show_chart(title='q3')\n"
            "print(r)"
        )
        assert "chart q3" in code_text(ran)
        with anyio.fail_after(10):
            await changed.wait()
        with anyio.fail_after(CALL_TIMEOUT):
            listed = await bridge.session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert list(tools) == ["run_python", "apps__show_chart"]
        assert tools["apps__show_chart"].meta == {"ui": {"resourceUri": CHART_URI}}
        with anyio.fail_after(CALL_TIMEOUT):
            resources = await bridge.session.list_resources()
            read = await bridge.session.read_resource(CHART_URI)
        assert CHART_URI in [str(resource.uri) for resource in resources.resources]
        (content,) = read.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.text == CHART_HTML
        assert content.mime_type == "text/html;profile=mcp-app"
        shown = await _call(bridge.session, "apps__show_chart", {"title": "direct"})
        assert _text(shown) == "chart direct"
        # Not an App tool: code mode neither lists nor calls it directly.
        refused = await _call(bridge.session, "apps__erase", {"path": "/data/precious"})
        assert refused.is_error
    assert not erase_log.exists()


async def test_an_upstream_list_change_reaches_the_direct_client_as_list_changed(
    tmp_path: Path, sandbox_image: str
) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
    async with open_bridge(
        tmp_path,
        servers=servers,
        args=("--tools", "direct"),
        client_options={"message_handler": on_message},
    ) as bridge:
        before = await _names(bridge.session)
        assert "probe__echo" in before
        assert "probe__fresh_tool" not in before
        added = await _call(bridge.session, "probe__add_tool", {"name": "fresh_tool"})
        assert not added.is_error
        with anyio.fail_after(10):
            await changed.wait()
        assert "probe__fresh_tool" in await _names(bridge.session)


async def test_a_2026_07_28_client_hears_an_upstream_change_on_its_listen_stream(
    tmp_path: Path, sandbox_image: str
) -> None:
    params = _direct_bridge(tmp_path, {"probe": {"command": sys.executable, "args": [str(PROBE)]}})
    with anyio.fail_after(CALL_TIMEOUT * 3):
        async with Client(params) as client:
            assert client.protocol_version == "2026-07-28"
            before = [t.name for t in (await client.list_tools()).tools]
            assert "probe__fresh_tool" not in before
            async with client.listen(tools_list_changed=True) as events:
                added = await client.call_tool("probe__add_tool", {"name": "fresh_tool"})
                assert not added.is_error
                with anyio.fail_after(10):
                    async for _event in events:
                        break
            after = [t.name for t in (await client.list_tools()).tools]
    assert "probe__fresh_tool" in after


async def test_over_http_a_direct_client_declared_list_changed_and_hears_an_upstream_change(
    tmp_path: Path, sandbox_image: str
) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
    async with (
        open_http_bridge(tmp_path, servers=servers) as bridge,
        bridge.http() as http,
        streamable_http_client(f"{bridge.url}?tools=direct", http_client=http) as (read, write),
        ClientSession(read, write, message_handler=on_message) as direct,
    ):
        with anyio.fail_after(60):
            initialized = await direct.initialize()
        assert initialized.capabilities.tools is not None
        assert initialized.capabilities.tools.list_changed is True
        assert "probe__echo" in await _names(direct)
        added = await _call(direct, "probe__add_tool", {"name": "fresh_tool"})
        assert not added.is_error
        with anyio.fail_after(10):
            await changed.wait()
        assert "probe__fresh_tool" in await _names(direct)


async def test_a_direct_result_has_every_configured_secret_masked(
    tmp_path: Path, sandbox_image: str
) -> None:
    secret = "direct-canary-51c0ffee77"
    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)], "env": {"TOKEN": secret}}}
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        echoed = await _call(bridge.session, "probe__echo", {"text": f"use {secret} now"})
        environment = await _call(bridge.session, "probe__env", {})
        refused = await _call(bridge.session, f"probe__{secret}", {})
    assert "use " in _text(echoed)
    assert '"TOKEN"' in _text(environment)
    assert refused.is_error
    for result in (echoed, environment, refused):
        assert secret not in result.model_dump_json()


async def test_an_mcp_app_tool_known_from_an_earlier_start_is_listed_before_its_server_runs(
    tmp_path: Path, sandbox_image: str
) -> None:
    servers = _apps(tmp_path / "erased.txt")
    async with open_bridge(tmp_path, servers=servers) as bridge:
        ran = await bridge.run(
            "from mcp import mcp_servers\nprint(await mcp_servers['apps'].show_chart(title='a'))"
        )
        assert "chart a" in code_text(ran)  # the server ran: its list is in the tool cache
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with open_bridge(
        tmp_path, servers=servers, client_options={"message_handler": on_message}
    ) as bridge:
        names = await _names(bridge.session)
        if names == ["run_python"]:  # listed before the bridge opened: it says so once open
            with anyio.fail_after(30):
                await changed.wait()
            names = await _names(bridge.session)
        assert names == ["run_python", "apps__show_chart"]
        with anyio.fail_after(CALL_TIMEOUT):
            read = await bridge.session.read_resource(CHART_URI)  # starts the server
        (content,) = read.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.text == CHART_HTML


async def test_direct_tools_known_from_an_earlier_start_are_listed_without_starting_a_server(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A client's first tools/list must not wait for every server to start: a list the tool cache
    # holds is shown, the server starts when a tool of it is called.
    starts = tmp_path / "starts.txt"
    launch = f'echo start >> "{starts}"; exec "{sys.executable}" "{PROBE}"'
    servers = {"probe": {"command": "sh", "args": ["-c", launch]}}
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        first = await _names(bridge.session)
    assert "probe__echo" in first
    assert starts.read_text().count("start") == 1
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        again = await _names(bridge.session)
        assert again == first
        assert starts.read_text().count("start") == 1  # listed from the cache
        echoed = await _call(bridge.session, "probe__echo", {"text": "cached"})
    assert "cached" in _text(echoed)
    assert starts.read_text().count("start") == 2  # the call started it


async def test_a_direct_listing_from_the_cache_equals_the_live_one_and_a_call_announces_nothing(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    # server-everything gives each tool an `execution`: a cache that dropped it listed each
    # tool differently from the live list, and the first call told every client list_changed.
    async with open_bridge(
        tmp_path, servers=_everything(third_party), args=("--tools", "direct")
    ) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            live = await bridge.session.list_tools()
    changed: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message)

    async with open_bridge(
        tmp_path,
        servers=_everything(third_party),
        args=("--tools", "direct"),
        client_options={"message_handler": on_message},
    ) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            cached = await bridge.session.list_tools()
        assert cached.tools == live.tools
        summed = await _call(bridge.session, "everything__get-sum", {"a": 2, "b": 3})
        assert not summed.is_error
        # A tool that runs only as a task upstream is a plain call here: the bridge awaits the
        # task, so the listing does not tell the client to make one.
        assert all(tool.execution is None for tool in cached.tools)
        research = await _call(
            bridge.session, "everything__simulate-research-query", {"topic": "tides"}
        )
        assert not research.is_error, research
        assert "tides" in _text(research)
        # The server's first listing is announced before the call is answered, so a
        # notification would have arrived ahead of this listing's answer.
        again = await bridge.session.list_tools()
    assert again.tools == live.tools
    assert changed == []


async def test_a_cached_server_whose_start_fails_is_left_out_of_the_next_listing(
    tmp_path: Path, sandbox_image: str
) -> None:
    allowed = tmp_path / "may-start"
    allowed.touch()
    launch = f'[ -e "{allowed}" ] || exit 3; exec "{sys.executable}" "{PROBE}"'
    servers = {"probe": {"command": "sh", "args": ["-c", launch]}}
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        assert "probe__echo" in await _names(bridge.session)  # it ran: its list is cached
    allowed.unlink()
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        assert "probe__echo" in await _names(bridge.session)  # from the cache, not started
        failed = await _call(bridge.session, "probe__echo", {"text": "x"})
        assert failed.is_error
        assert "probe__echo" not in await _names(bridge.session)


async def test_everything_time_and_an_app_server_are_listed_directly_as_their_servers_gave_them(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    erase_log = tmp_path / "erased.txt"
    servers = {
        **_everything(third_party),
        "time": {"command": third_party["MCP_SERVER_TIME"], "args": ["--local-timezone", "UTC"]},
        **_apps(erase_log),
    }
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        with anyio.fail_after(CALL_TIMEOUT):
            listed = await bridge.session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert "run_python" not in tools
        assert {t.split("__")[0] for t in tools} == {"everything", "time", "apps"}
        assert tools["everything__echo"].input_schema["required"] == ["message"]
        structured = tools["everything__get-structured-content"]
        assert structured.output_schema is not None
        assert structured.output_schema["type"] == "object"
        erase = tools["apps__erase"]
        assert erase.annotations is not None
        assert erase.annotations.destructive_hint is True
        assert tools["apps__show_chart"].meta == {"ui": {"resourceUri": CHART_URI}}
        now = tools["time__get_current_time"]
        assert "timezone" in now.input_schema["properties"]

        result = await _call(bridge.session, "time__get_current_time", {"timezone": "UTC"})
        assert not result.is_error
        assert "UTC" in _text(result)
        shown = await _call(bridge.session, "apps__show_chart", {"title": "q4"})
        assert _text(shown) == "chart q4"
    assert not erase_log.exists()


async def test_a_direct_call_longer_than_the_servers_call_timeout_is_refused_as_call_timeout(
    tmp_path: Path, sandbox_image: str
) -> None:
    _settings_file(tmp_path, '[servers]\ncall_timeout = "2s"\n')
    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        quick = await _call(bridge.session, "probe__sleep", {"seconds": 0})
        assert not quick.is_error
        with anyio.fail_after(30):  # the bound, not the 60 s sleep, ends the call
            slow = await _call(bridge.session, "probe__sleep", {"seconds": 60})
    assert slow.is_error
    assert slow.structured_content["error"]["type"] == "CALL_TIMEOUT"


async def test_an_upstream_error_holding_a_configured_secret_reaches_a_direct_client_masked(
    tmp_path: Path, sandbox_image: str
) -> None:
    secret = "direct-error-canary-9a8b7c6d5e"
    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)], "env": {"TOKEN": secret}}}
    async with open_bridge(tmp_path, servers=servers, args=("--tools", "direct")) as bridge:
        crashed = await _call(
            bridge.session, "probe__crash", {"status": 3, "message": f"marker-41 {secret}"}
        )
    assert crashed.is_error
    assert "marker-41" in crashed.model_dump_json()  # the stderr tail reached the error
    assert secret not in crashed.model_dump_json()


async def test_over_http_tools_both_lists_both_and_an_unknown_mode_is_invalid_params(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    async with (
        open_http_bridge(tmp_path, servers=_everything(third_party)) as bridge,
        bridge.http() as http,
        streamable_http_client(f"{bridge.url}?tools=both", http_client=http) as (read, write),
        ClientSession(read, write) as both,
        streamable_http_client(f"{bridge.url}?tools=everything", http_client=http) as (r2, w2),
        ClientSession(r2, w2) as wrong,
    ):
        with anyio.fail_after(60):
            await both.initialize()
            await wrong.initialize()
            listed = await both.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names[0] == "run_python"
        assert "everything__echo" in names
        with anyio.fail_after(60), pytest.raises(MCPError) as refused:
            await wrong.list_tools()
        assert refused.value.error.code == types.INVALID_PARAMS
