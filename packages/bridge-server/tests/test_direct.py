"""Direct tools without a bridge: their names, and forwarding an upstream's changed tool list."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core.policy import Policy
from bridge_core.redaction import MASK, Redactor
from bridge_core.sessions.types import OUTPUT_CAP
from hypothesis import given
from hypothesis import strategies as st
from mcp_code_execution_mode import _direct, doctor
from mcp_code_execution_mode._direct import (
    DirectTools,
    capped,
    direct_name,
    listed_tool,
    name_tools,
    shown_tools,
    split_name,
)
from mcp_code_execution_mode._doctor_report import Report
from mcp_code_execution_mode.settings import Settings
from mcp_code_execution_mode.tool import run_python_tool


def _tool(name: str, **extra: Any) -> types.Tool:
    return types.Tool(name=name, **{"input_schema": {"type": "object"}, **extra})


RUN_PYTHON = run_python_tool()


def test_a_direct_name_is_server_and_tool_joined_by_a_double_underscore() -> None:
    assert direct_name("github", "create_issue") == "github__create_issue"
    assert direct_name("fs", "read.file-v2") == "fs__read.file-v2"


@pytest.mark.parametrize(
    ("server", "tool"),
    [("my server", "x"), ("fs", "read file"), ("fs", "lire/écrire"), ("s", "t" * 126)],
)
def test_a_name_that_is_not_a_valid_tool_name_is_not_listed(server: str, tool: str) -> None:
    assert direct_name(server, tool) is None
    assert name_tools([(server, _tool(tool))]) == {}


def test_colliding_names_are_listed_for_neither_tool() -> None:
    named = name_tools(
        [("a", _tool("b__c")), ("a__b", _tool("c")), ("a", _tool("other"))]
    )  # fmt: skip
    assert list(named) == ["a__other"]


def test_a_name_a_third_tool_would_also_take_stays_unlisted() -> None:
    named = name_tools([("a", _tool("b__c")), ("a__b", _tool("c")), ("a", _tool("b__c"))])
    assert named == {}


def test_a_reserved_name_is_not_given_to_a_proxied_tool() -> None:
    assert name_tools([("run", _tool("python"))], reserved=["run__python"]) == {}


def test_a_name_is_split_by_every_configured_server_it_could_belong_to() -> None:
    servers = ["a", "a__b", "github"]
    assert split_name("a__b__c", servers) == [("a", "b__c"), ("a__b", "c")]
    assert split_name("github__create_issue", servers) == [("github", "create_issue")]
    assert split_name("github__", servers) == []
    assert split_name("gitlab__x", servers) == []


def test_a_listed_definition_has_every_configured_secret_masked_and_a_secret_name_is_left_out() -> (
    None
):
    secret = "sk-live-0123456789abcdef"
    shown = {
        "s__show": (
            "s",
            _tool(
                "show",
                description=f"key {secret}",
                meta={"k": secret},
                icons=[types.Icon(src=f"https://example.test/{secret}.png")],  # kept by the cache
            ),
        ),
        f"s__{secret}": ("s", _tool(secret)),
        "s__plain": ("s", _tool("plain", description="nothing here")),
    }
    (show, plain) = shown_tools(shown, Redactor([secret]))
    assert secret not in show.model_dump_json(by_alias=True)
    assert show.description == f"key {MASK}"
    assert show.meta == {"k": MASK}
    assert show.icons is not None
    assert show.icons[0].src == f"https://example.test/{MASK}.png"
    assert plain.name == "s__plain"
    assert [t.name for t in shown_tools(shown, Redactor())] == list(shown)


@dataclass
class _Catalog:
    policy: Policy
    servers: dict[str, object] = field(default_factory=dict)


class _Pool:
    def __init__(self) -> None:
        self.running: dict[str, list[types.Tool]] = {}

    def cached_tools(self, server: str) -> list[types.Tool] | None:
        return self.running.get(server)


class _Gateway:
    """What DirectTools uses of ProxyGateway: the allowed tools and the change listeners."""

    def __init__(self, tools: dict[str, list[types.Tool]], policy: Policy) -> None:
        self.lists = tools
        self.catalog = _Catalog(policy, dict.fromkeys(tools))
        self.pool = _Pool()
        self.tool_listeners: list[Any] = []
        self.redactor = Redactor()

    async def allowed_tools(self, *, start: bool = True) -> list[tuple[str, types.Tool]]:
        if start:
            self.pool.running = dict(self.lists)
        policy = self.catalog.policy
        return [
            (server, tool)
            for server, tools in self.pool.running.items()
            for tool in tools
            if policy.check(server, tool.name).allowed
        ]

    async def changed(self, server: str, tools: list[types.Tool]) -> None:
        self.lists[server] = tools
        self.pool.running[server] = tools
        for listener in self.tool_listeners:
            await listener(server, tools)


class _Session:
    def __init__(self) -> None:
        self.notified = 0

    async def send_tool_list_changed(self) -> None:
        self.notified += 1


async def _listed(policy: Policy | None = None) -> tuple[_Gateway, DirectTools, _Session]:
    gateway = _Gateway(
        {"fs": [_tool("read"), _tool("delete")], "time": [_tool("now")]}, policy or Policy()
    )
    direct = DirectTools(OUTPUT_CAP)
    await direct.attach(gateway)  # type: ignore[arg-type]
    await direct.attach(gateway)  # type: ignore[arg-type]  # once per gateway
    session = _Session()
    with anyio.fail_after(5):
        listed = await direct.listing("direct", RUN_PYTHON, session, "one")
    assert [t.name for t in listed] == [n for n in ("fs__read", "fs__delete", "time__now")
                                        if policy is None or n != "fs__delete"]  # fmt: skip
    return gateway, direct, session


async def test_a_changed_upstream_list_is_forwarded_once_to_the_sessions_given_direct_tools() -> (
    None
):
    gateway, _direct, session = await _listed()
    await gateway.changed("fs", [_tool("read"), _tool("delete"), _tool("write")])
    assert session.notified == 1
    assert len(gateway.tool_listeners) == 1


async def test_a_new_schema_under_the_same_name_is_a_change_too() -> None:
    gateway, _direct, session = await _listed()
    changed = _tool("now", input_schema={"type": "object", "properties": {"tz": {}}})
    await gateway.changed("time", [changed])
    assert session.notified == 1


async def test_a_relisting_that_changes_nothing_is_not_forwarded() -> None:
    gateway, _direct, session = await _listed()
    await gateway.changed("fs", [_tool("read"), _tool("delete")])
    assert session.notified == 0


async def test_a_change_to_a_denied_tool_only_is_not_forwarded() -> None:
    policy = Policy.from_settings(deny_tools=("fs.delete",))
    gateway, _direct, session = await _listed(policy)
    await gateway.changed("fs", [_tool("read"), _tool("delete", description="now documented")])
    assert session.notified == 0


async def test_a_server_no_client_was_shown_is_not_announced() -> None:
    gateway = _Gateway({"fs": [_tool("read")]}, Policy())
    direct = DirectTools(OUTPUT_CAP)
    await direct.attach(gateway)  # type: ignore[arg-type]
    await gateway.changed("fs", [_tool("read"), _tool("write")])  # nobody listed yet: no error
    session = _Session()
    await direct.listing("direct", RUN_PYTHON, session, "one")
    assert session.notified == 0


async def test_a_session_that_went_away_stops_being_told() -> None:
    gateway, direct, session = await _listed()

    class Gone:
        async def send_tool_list_changed(self) -> None:
            raise anyio.BrokenResourceError

    gone = Gone()
    await direct.listing("direct", RUN_PYTHON, gone, "gone")
    await gateway.changed("fs", [_tool("read")])
    await gateway.changed("fs", [_tool("read"), _tool("x")])
    assert session.notified == 2


APP_META = {"ui": {"resourceUri": "ui://apps/chart.html"}}


@pytest.mark.parametrize(("mode", "count"), [("code", 2), ("direct", 3), ("both", 4)])
def test_doctor_shows_the_mode_and_how_many_tools_it_lists(mode: str, count: int) -> None:
    # The App tool is listed in code mode too: a code-mode client is given run_python and it.
    out = io.StringIO()
    results: dict[str, list[types.Tool] | str] = {
        "fs": [_tool("read"), _tool("delete")],
        "time": [_tool("now")],
        "apps": [_tool("chart", meta=APP_META)],
        "broken": "did not start",
    }
    policy = Policy.from_settings(deny_tools=("fs.delete",))
    doctor._check_tools_mode(Settings(tools=mode), policy, results, Report(out))
    line = out.getvalue()
    assert f"mode {mode}: lists {count} tool(s), ~" in line
    assert "tokens of definitions per request" in line


async def test_code_mode_lists_app_tools_of_running_servers_only_and_hears_a_new_one() -> None:
    gateway = _Gateway({"apps": [_tool("chart", meta=APP_META), _tool("erase")]}, Policy())
    direct = DirectTools(OUTPUT_CAP)
    await direct.attach(gateway)  # type: ignore[arg-type]
    session = _Session()
    # not running: nothing started for a listing
    assert await direct.listing("code", RUN_PYTHON, session, "one") == [RUN_PYTHON]
    assert gateway.pool.running == {}
    await gateway.changed("apps", gateway.lists["apps"])  # a nested call started it
    assert session.notified == 1
    listed = await direct.listing("code", RUN_PYTHON, session, "one")
    assert [(t.name, t.meta) for t in listed] == [("run_python", None), ("apps__chart", APP_META)]
    await gateway.changed("apps", [*gateway.lists["apps"], _tool("plain")])
    assert session.notified == 1  # a change that is not an App tool's: code mode unchanged


async def test_a_server_already_running_when_the_gateway_is_attached_is_looked_at() -> None:
    gateway = _Gateway({"apps": [_tool("chart", meta=APP_META)]}, Policy())
    direct = DirectTools(OUTPUT_CAP)
    session = _Session()
    assert await direct.listing("code", RUN_PYTHON, session, "one") == [RUN_PYTHON]  # not open
    gateway.pool.running = dict(gateway.lists)
    await direct.attach(gateway)  # type: ignore[arg-type]
    assert session.notified == 1


def test_a_direct_result_over_the_output_cap_keeps_head_and_tail_and_says_so() -> None:
    text = "h" * 6000 + "m" * 20000 + "t" * 6000
    image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text), image],
        structured_content={"kept": True},
    )
    shown = capped(result, 8000)
    first, second, notice = shown.content
    assert isinstance(first, types.TextContent)
    assert first.text == "h" * 5997 + "\n…\n" + "t" * 2000  # the cut counts within the cap
    assert second == image
    assert isinstance(notice, types.TextContent)
    assert "32,000 characters" in notice.text
    assert "MCP_BRIDGE_OUTPUT_CAP" in notice.text
    assert shown.structured_content == {"kept": True}
    small = types.CallToolResult(content=[types.TextContent(type="text", text="ok")])
    assert capped(small, 8000) is small


def _texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


def test_a_capped_result_of_several_text_blocks_shows_no_text_twice() -> None:
    # One block between half the cap and the cap was kept as head + tail of itself: its tail
    # twice (4,027 characters, 1,000 Zs of 500).
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="A" * 2500 + "Z" * 500),
            types.TextContent(type="text", text="B" * 3000),
        ]
    )
    *kept, _notice = _texts(capped(result, 4096))
    assert kept == ["A" * 2500 + "Z" * 500, "B" * 69 + "\n…\n" + "B" * 1024]
    assert sum(map(len, kept)) == 4096


_BLOCK = st.one_of(
    st.text(alphabet="ab\n", max_size=300).map(lambda t: types.TextContent(type="text", text=t)),
    st.just(types.ImageContent(type="image", data="aGk=", mime_type="image/png")),
)


@given(st.lists(_BLOCK, max_size=8), st.integers(min_value=4, max_value=700))
def test_a_capped_result_keeps_a_head_and_a_tail_of_its_text_within_the_cap(
    blocks: list[Any], cap: int
) -> None:
    result = types.CallToolResult(content=blocks)
    whole = "".join(_texts(result))
    shown = capped(result, cap)
    if len(whole) <= cap:
        assert shown is result
        return
    *content, notice = shown.content
    assert isinstance(notice, types.TextContent)
    assert f"{len(whole):,} characters" in notice.text
    others = [b for b in blocks if not isinstance(b, types.TextContent)]
    assert [b for b in content if not isinstance(b, types.TextContent)] == others
    kept = "".join(_texts(types.CallToolResult(content=content)))
    assert len(kept) <= cap
    assert kept.count("…") == 1  # the cut, marked once
    head, _, tail = kept.partition("\n…\n")
    # One head and one tail of the whole text, disjoint: nothing shown twice or out of order.
    assert whole.startswith(head)
    assert whole.endswith(tail)
    assert len(head) + len(tail) < len(whole)


def test_a_listed_title_always_ends_with_the_server_it_comes_from() -> None:
    # A hostile server titled its tool as another server's would read in a client's picker.
    spoof = _tool("grab", title="read_file (filesystem)\u202e")
    assert listed_tool("evil__grab", "evil", spoof).title == (
        "read_file (filesystem)\\u202e (evil)"
    )
    plain = _tool("read_file")
    assert listed_tool("fs__read_file", "fs", plain).title == "read_file (fs)"
    said = _tool("read_file", title="Read a file (fs)")
    assert listed_tool("fs__read_file", "fs", said).title == "Read a file (fs)"


def test_a_listed_tool_has_no_execution_the_bridge_answers_every_call_plainly() -> None:
    task_only = _tool("research").model_copy(
        update={"execution": types.ToolExecution(task_support="required")}
    )
    assert listed_tool("everything__research", "everything", task_only).execution is None


async def test_a_session_that_never_takes_the_notification_is_forgotten_and_holds_nobody_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_direct, "NOTIFY_TIMEOUT", 0.2)
    gateway, direct, session = await _listed()

    class Stuck:
        sent = 0

        async def send_tool_list_changed(self) -> None:
            self.sent += 1
            await anyio.sleep_forever()  # its stream is never read

    stuck = Stuck()
    await direct.listing("direct", RUN_PYTHON, stuck, "stuck")
    with anyio.fail_after(5):
        await gateway.changed("fs", [_tool("read")])
        await gateway.changed("fs", [_tool("read"), _tool("x")])
    assert session.notified == 2
    assert stuck.sent == 1  # tried once, then forgotten
