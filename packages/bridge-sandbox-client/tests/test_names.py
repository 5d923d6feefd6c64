"""Names the sandbox was not shown: the host decides (denied or unknown), the sandbox raises its
answer verbatim in every form a name can be written, with Python's own semantics kept."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import DENIED_SERVERS, DENIED_TOOLS, FakeHost  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it

DENY_TOOL_RULE = DENIED_TOOLS[("github", "delete-repo")]
DENY_SERVER_RULE = DENIED_SERVERS["vault"]
HOST_SAYS_NO_CREAT_ISSUE = (
    "server 'github' has no tool 'creat_issue': host suggests ['create_issue']"
)


def ok(host: FakeHost, code: str) -> str | None:
    run = host.execute(code)
    assert run.result.status == "ok", run.result.error
    return run.result.value


def lookups(host: FakeHost) -> list[dict[str, Any]]:
    return [dict(r.params) for r in host.requests if r.method == "query_tool_docs"]


# --- unknown names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "mcp_github.creat_issue",
        "mcp_servers['github'].creat_issue",
        "mcp_servers['github']['creat_issue']",
        "import mcp\nmcp.servers.github.creat_issue",
        "await mcp_github.creat_issue(title='t')",
    ],
)
def test_an_unknown_tool_raises_the_hosts_unknown_tool_verbatim_and_calls_nothing(
    host: FakeHost, code: str
) -> None:
    run = host.execute(code)
    error = run.result.error
    assert error is not None
    assert error.type == "mcp.UnknownTool"
    assert error.message == HOST_SAYS_NO_CREAT_ISSUE
    # Python adds no "Did you mean" of its own from dir(): the host's suggestion is the only one.
    assert "Did you mean" not in error.traceback
    assert run.calls == []
    assert lookups(host)[-1] == {"server": "github", "tool": "creat_issue", "detail": "summary"}


def test_unknown_tools_and_servers_keep_python_lookup_semantics(host: FakeHost) -> None:
    code = (
        "import mcp\n"
        "try:\n"
        "    mcp_servers['gitlab']\n"
        "except KeyError as e:\n"
        "    key_error = (type(e).__name__, isinstance(e, mcp.ToolError), e.suggestions)\n"
        "try:\n"
        "    mcp_github['creat_issue']\n"
        "except KeyError as e:\n"
        "    tool_key_error = (e.tool, e.suggestions, str(e))\n"
        "(\n"
        "    hasattr(mcp_github, 'creat_issue'),\n"
        "    getattr(mcp_github, 'nope', 'default'),\n"
        "    hasattr(mcp_servers, 'gitlab'),\n"
        "    'gitlab' in mcp_servers,\n"
        "    key_error,\n"
        "    tool_key_error,\n"
        ")"
    )
    assert ok(host, code) == repr(
        (
            False,
            "default",
            False,
            False,
            ("UnknownServer", True, ["github"]),
            ("creat_issue", ["create_issue"], HOST_SAYS_NO_CREAT_ISSUE),
        )
    )


@pytest.mark.parametrize(
    ("code", "error_type", "message"),
    [
        (
            "from mcp.servers.github import creat_issue",
            "ImportError",
            HOST_SAYS_NO_CREAT_ISSUE,
        ),
        ("from mcp_github import creat_issue", "ImportError", HOST_SAYS_NO_CREAT_ISSUE),
        (
            "from mcp import mcp_gitlab",
            "ImportError",
            "unknown server 'mcp_gitlab': host suggests ['github']",
        ),
        (
            "from mcp.servers import gitlab",
            "ModuleNotFoundError",
            "unknown server 'gitlab': host suggests ['github']",
        ),
        (
            "import mcp.servers.gitlab",
            "ModuleNotFoundError",
            "unknown server 'gitlab': host suggests ['github']",
        ),
    ],
)
def test_imports_of_unknown_names_are_import_errors_with_the_hosts_message(
    host: FakeHost, code: str, error_type: str, message: str
) -> None:
    run = host.execute(code)
    error = run.result.error
    assert error is not None
    assert (error.type, error.message) == (error_type, message)
    assert "Did you mean" not in error.traceback


def test_an_import_error_carries_the_hosts_exception_as_its_cause(host: FakeHost) -> None:
    code = (
        "try:\n"
        "    from mcp.servers.github import creat_issue\n"
        "except ImportError as e:\n"
        "    cause = (type(e.__cause__).__name__, e.__cause__.suggestions)\n"
        "cause"
    )
    assert ok(host, code) == repr(("UnknownTool", ["create_issue"]))


def test_import_of_an_unknown_alias_falls_through_to_other_packages(host: FakeHost) -> None:
    # ``mcp_<x>`` is also a valid name for an installed package: not ours to refuse.
    run = host.execute("import mcp_gitlab")
    assert run.result.error is not None
    assert run.result.error.type == "ModuleNotFoundError"
    assert run.result.error.message == "No module named 'mcp_gitlab'"


def test_a_tool_the_cached_list_lacks_is_found_through_the_host(host: FakeHost) -> None:
    ok(host, "sorted(dir(mcp_github))")  # the list is cached now
    host.tools["github"]["brand-new"] = lambda a: {"content": [], "structuredContent": a}
    run = host.execute("await mcp_github.brand_new(x=1)")
    assert run.result.value == "{'x': 1}", run.result.error
    assert [c.tool for c in run.calls] == ["brand-new"]  # the host's canonical name
    assert lookups(host)[-1]["tool"] == "brand_new"
    assert "brand_new" in (ok(host, "dir(mcp_github)") or "")  # the stale list was dropped


# --- denied names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "await mcp_github.delete_repo(name='x')",
        "await mcp_servers['github']['delete-repo'](name='x')",
        "await mcp_servers.github.delete_repo(name='x')",
        "from mcp.servers.github import delete_repo",
        "from mcp_github import delete_repo",
        "hasattr(mcp_github, 'delete_repo')",
        "getattr(mcp_github, 'delete_repo', None)",
    ],
)
def test_a_denied_tool_raises_policy_denied_naming_the_rule_in_every_form(
    host: FakeHost, code: str
) -> None:
    run = host.execute(code)
    error = run.result.error
    assert error is not None
    assert error.type == "mcp.PolicyDenied"
    assert error.message == f"tool github.delete-repo is denied by {DENY_TOOL_RULE}"
    assert run.calls == []


@pytest.mark.parametrize(
    "code",
    [
        "mcp_servers['vault']",
        "mcp_servers.vault",
        "from mcp import mcp_vault",
        "import mcp_vault",
        "import mcp.servers.vault",
        "from mcp.servers.vault import read_secret",
        "from mcp.servers import vault",
        "await mcp_vault.read_secret()",  # a bare alias, never imported
        "mcp_vault['read_secret']",
        "import mcp\nmcp.servers.vault",
    ],
)
def test_a_denied_server_raises_policy_denied_naming_the_rule_in_every_form(
    host: FakeHost, code: str
) -> None:
    run = host.execute(code)
    error = run.result.error
    assert error is not None
    assert error.type == "mcp.PolicyDenied"
    assert error.message == f"server 'vault' is denied by {DENY_SERVER_RULE}"
    assert run.calls == []


def test_policy_denied_exposes_its_rule_and_is_not_hidden_by_membership(host: FakeHost) -> None:
    code = (
        "from mcp import PolicyDenied\n"
        "try:\n"
        "    mcp_github.delete_repo\n"
        "except PolicyDenied as e:\n"
        "    rule = e.rule\n"
        "(rule, 'vault' in mcp_servers, 'vault' in list(mcp_servers))"
    )
    assert ok(host, code) == repr((DENY_TOOL_RULE, False, False))


def test_known_names_ask_the_host_nothing_more(host: FakeHost) -> None:
    ok(host, "mcp_github.create_issue, mcp_github.get_user_info, mcp_servers['my-server']")
    assert lookups(host) == []


def test_a_server_alias_is_bound_however_the_source_spells_its_name(host: FakeHost) -> None:
    # Identifiers are NFKC-normalised: a fullwidth "m" (U+FF4D) names mcp_github too (the walk is
    # skipped only for sources that cannot name one).
    for code in ("type(mcp_github).__name__", "type(\uff4dcp_github).__name__"):
        run = host.execute(code)
        assert run.result.error is None, run.result.error
        assert run.result.value == "'ServerModule'"
    assert host.execute("'no alias here'").result.value == "'no alias here'"
