"""The one decision about a name from the sandbox: found, denied (the rule) or unknown (close
names), the same for a lookup, a docs request and a call."""

from __future__ import annotations

import pytest
from bridge_core.catalog import (
    Catalog,
    UnknownServer,
    UnknownTool,
    closest_names,
    resolve_server,
    resolve_tool,
)
from bridge_core.policy import Policy, PolicyDenied
from bridge_protocol import ErrorCode
from bridge_protocol.names import MAX_NAME_CHARS
from mcp.types import Tool

from .test_catalog import Upstream, specs

EVERYTHING = ["echo", "get-env", "get-resource-reference", "get-sum", "simulate-research-query"]


# --- did-you-mean --------------------------------------------------------------------------------


def test_suggestions_are_close_by_edit_distance_not_by_any_shared_fragment() -> None:
    # WRatio's partial matching put get-resource-reference (60) beside echo for "ech".
    assert closest_names("ech", EVERYTHING) == ["echo"]
    assert closest_names("get_sun", EVERYTHING)[0] == "get-sum"
    assert closest_names("zzzzzz", EVERYTHING) == []


def test_each_name_is_suggested_once_and_ties_break_by_name_whatever_the_order() -> None:
    assert closest_names("echo_", ["echo", "echo", "Echo"]) == ["Echo", "echo"]
    forward = closest_names("ab", ["ac", "aa", "ab-"])
    assert forward == closest_names("ab", ["ab-", "aa", "ac"])
    assert forward == ["ab-", "aa", "ac"]


def test_a_name_longer_than_any_name_gets_no_suggestions() -> None:
    assert closest_names("e" * (MAX_NAME_CHARS + 1), ["e" * MAX_NAME_CHARS]) == []


# --- servers -------------------------------------------------------------------------------------


def test_a_server_is_found_by_name_and_in_lookups_by_its_python_forms() -> None:
    servers = ["my-server", "github"]
    assert resolve_server(Policy(), "my-server", servers) == "my-server"
    assert resolve_server(Policy(), "mcp_my_server", servers, forms=True) == "my-server"
    assert resolve_server(Policy(), "my_server", servers, forms=True) == "my-server"
    with pytest.raises(UnknownServer):
        resolve_server(Policy(), "my_server", servers)  # calls name servers exactly


def test_a_denied_server_is_refused_with_its_rule_in_any_spelling() -> None:
    policy = Policy.from_settings(deny_servers="my-*")
    for name in ("my-server", "my_server", "mcp_my_server"):
        with pytest.raises(PolicyDenied) as denied:
            resolve_server(policy, name, ["my-server", "github"], forms=True)
        assert denied.value.code == ErrorCode.POLICY_DENIED
        assert "[policy] deny_servers=my-*" in denied.value.message
        assert denied.value.data == {"rule": "[policy] deny_servers=my-*"}


def test_a_server_typo_is_unknown_even_under_an_allow_list_and_never_suggests_a_denied_one() -> (
    None
):
    policy = Policy.from_settings(allow_servers="github,gitlab", deny_servers="gitlab")
    with pytest.raises(UnknownServer) as unknown:
        resolve_server(policy, "mcp_gitlb", ["github", "gitlab", "memory"], forms=True)
    assert unknown.value.suggestions == ["github"]
    assert "gitlab" not in unknown.value.message
    assert "memory" not in unknown.value.message


# --- tools ---------------------------------------------------------------------------------------


def test_a_denied_tool_is_refused_on_the_name_as_given_before_its_existence_is_known() -> None:
    policy = Policy.from_settings(deny_tools="memory.delete_*")
    with pytest.raises(PolicyDenied) as denied:
        resolve_tool(policy, "memory", "delete_everything", [])  # no such tool, still refused
    assert "[policy] deny_tools=memory.delete_*" in denied.value.message


def test_the_python_form_of_a_denied_tool_is_denied_in_lookups_and_unknown_in_calls() -> None:
    policy = Policy.from_settings(deny_tools="everything.get-env")
    with pytest.raises(PolicyDenied) as denied:
        resolve_tool(policy, "everything", "get_env", EVERYTHING, forms=True)
    assert denied.value.message == (
        "tool everything.get-env is denied by [policy] deny_tools=everything.get-env"
    )
    with pytest.raises(UnknownTool):
        resolve_tool(policy, "everything", "get_env", EVERYTHING)
    assert resolve_tool(policy, "everything", "get_sum", EVERYTHING, forms=True) == "get-sum"


def test_an_unknown_tool_suggests_only_allowed_names_each_once() -> None:
    policy = Policy.from_settings(deny_tools="echo")
    tools = ["echo", "echo", "get-env", "get-env"]  # a server listing names twice
    with pytest.raises(UnknownTool) as unknown:
        resolve_tool(policy, "everything", "get_en", tools, forms=False)
    assert unknown.value.suggestions == ["get-env"]
    assert unknown.value.message == (
        "server 'everything' has no tool 'get_en': did you mean 'get-env'?"
    )
    with pytest.raises(UnknownTool) as unknown:
        resolve_tool(policy, "everything", "ech", tools)
    assert unknown.value.suggestions == []
    assert "echo" not in unknown.value.message


def test_an_overlong_name_is_unknown_without_matching_or_policy() -> None:
    policy = Policy.from_settings(deny_tools="*")
    name = "x" * (MAX_NAME_CHARS + 1)
    with pytest.raises(UnknownTool) as unknown:
        resolve_tool(policy, "s", name, [name])
    assert f"names are at most {MAX_NAME_CHARS} characters" in unknown.value.message
    with pytest.raises(UnknownServer):
        resolve_server(policy, name, [name])


# --- the catalog's requests ----------------------------------------------------------------------


@pytest.fixture
def upstream(real_tools: dict[str, list[Tool]]) -> Upstream:
    return Upstream(real_tools)


async def test_docs_requests_accept_python_forms_and_answer_canonical_names(
    upstream: Upstream,
) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    docs = await catalog.handle_request(
        "query_tool_docs", {"server": "mcp_everything", "tool": "get_sum"}
    )
    assert isinstance(docs, dict)
    assert docs["server"] == "everything"
    assert [t["name"] for t in docs["tools"]] == ["get-sum"]
    names = await catalog.handle_request("list_tools", {"server": "mcp_time"})
    assert names == await catalog.list_tools("time")


async def test_a_denied_python_form_is_refused_by_the_catalog_with_the_rule(
    upstream: Upstream,
) -> None:
    policy = Policy.from_settings(deny_tools="everything.get-*", deny_servers="memory")
    catalog = Catalog(specs(), list_tools=upstream.list_tools, policy=policy)
    with pytest.raises(PolicyDenied) as denied:
        await catalog.query_tool_docs("everything", "get_sum")
    assert denied.value.data == {"rule": "[policy] deny_tools=everything.get-*"}
    with pytest.raises(PolicyDenied):
        await catalog.query_tool_docs("mcp_memory")
    assert "memory" not in upstream.calls


async def test_an_overlong_tool_name_is_decided_without_loading_the_list(
    upstream: Upstream,
) -> None:
    catalog = Catalog(specs(), list_tools=upstream.list_tools)
    with pytest.raises(UnknownTool):
        await catalog.query_tool_docs("time", "t" * 10_000_000)
    with pytest.raises(UnknownTool):
        catalog.check_call("time", "t" * 10_000_000)
    assert upstream.calls == []
