"""Policy: allow/deny lists for servers and tools; deny beats allow; reasons name the setting."""

from __future__ import annotations

import pytest
from bridge_core.gateway import CallFailed
from bridge_core.policy import Decision, Policy, PolicyDenied
from bridge_protocol import ErrorCode

ENV = {
    "MCP_BRIDGE_ALLOW_SERVERS": "github, filesystem,git*",
    "MCP_BRIDGE_DENY_SERVERS": "gitlab",
    "MCP_BRIDGE_ALLOW_TOOLS": "",
    "MCP_BRIDGE_DENY_TOOLS": "github.delete_*, *.write_file,drop_*",
}


@pytest.mark.parametrize(
    ("server", "tool", "allowed", "rule"),
    [
        ("github", "create_issue", True, "[policy] allow_servers=github"),
        ("github", "delete_repo", False, "[policy] deny_tools=github.delete_*"),
        ("filesystem", "write_file", False, "[policy] deny_tools=*.write_file"),
        ("filesystem", "read_file", True, "[policy] allow_servers=filesystem"),
        ("git", "drop_stash", False, "[policy] deny_tools=drop_*"),  # bare name: any server
        ("gitea", "list", True, "[policy] allow_servers=git*"),
        ("gitlab", "list", False, "[policy] deny_servers=gitlab"),  # deny beats allow
        ("slack", "post", False, "[policy] allow_servers"),  # not in the allow list
        ("GitHub", "create_issue", False, "[policy] allow_servers"),  # case-sensitive
    ],
)
def test_policy_matrix_from_the_environment(
    server: str, tool: str, allowed: bool, rule: str
) -> None:
    decision = Policy.from_env(ENV).check(server, tool)
    assert (decision.allowed, decision.rule) == (allowed, rule)
    assert rule in decision.reason


def test_the_default_policy_allows_everything() -> None:
    policy = Policy.from_env({})
    assert policy.is_open
    assert policy.check("any", "tool") == Decision(
        True, "default", "server 'any' is allowed (no server rule applies)"
    )


@pytest.mark.parametrize(
    ("settings", "server", "tool", "allowed", "rule"),
    [
        (
            {"allow_tools": "github.create_*"},
            "github",
            "create_issue",
            True,
            "[policy] allow_tools=github.create_*",
        ),
        (
            {"allow_tools": "github.create_*"},
            "github",
            "list_issues",
            False,
            "[policy] allow_tools",
        ),
        ({"allow_tools": "github.create_*"}, "time", "now", False, "[policy] allow_tools"),
        (
            {"allow_tools": "time.*", "deny_tools": "time.convert_time"},
            "time",
            "convert_time",
            False,
            "[policy] deny_tools=time.convert_time",
        ),
        (
            {"allow_tools": "get_*"},
            "time",
            "get_current_time",
            True,
            "[policy] allow_tools=get_*",
        ),
        (
            {"allow_servers": "time", "allow_tools": "git.*"},
            "git",
            "git_log",
            False,
            "[policy] allow_servers",
        ),
        ({"deny_servers": ["a", "b"]}, "b", "x", False, "[policy] deny_servers=b"),
        (
            {"deny_tools": "fs.read.file"},
            "fs",
            "read.file",
            False,
            "[policy] deny_tools=fs.read.file",
        ),
    ],
)
def test_tool_rules_combine_with_server_rules(
    settings: dict[str, str], server: str, tool: str, allowed: bool, rule: str
) -> None:
    decision = Policy.from_settings(**settings).check(server, tool)
    assert (decision.allowed, decision.rule) == (allowed, rule)


def test_blank_items_in_lists_are_ignored() -> None:
    policy = Policy.from_settings(allow_servers=" , ,", deny_tools=",")
    assert policy.is_open
    assert policy.check("x", "y").allowed


def test_server_check_ignores_tool_rules() -> None:
    policy = Policy.from_settings(deny_tools="github.*")
    assert policy.check_server("github").allowed
    assert not policy.check("github", "anything").allowed


def test_enforce_raises_a_call_failure_naming_the_rule() -> None:
    policy = Policy.from_env(ENV)
    policy.enforce("github", "create_issue")
    with pytest.raises(PolicyDenied) as error:
        policy.enforce("github", "delete_repo")
    assert isinstance(error.value, CallFailed)
    assert error.value.code == ErrorCode.POLICY_DENIED
    assert error.value.message == (
        "tool github.delete_repo is denied by [policy] deny_tools=github.delete_*"
    )
    assert error.value.data == {"rule": "[policy] deny_tools=github.delete_*"}


def test_lists_may_be_separated_by_commas_or_spaces() -> None:
    policy = Policy.from_env({"MCP_BRIDGE_DENY_SERVERS": "a b,c\td"})
    assert policy.deny_servers == ("a", "b", "c", "d")
