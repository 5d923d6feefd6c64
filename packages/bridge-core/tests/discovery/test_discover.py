"""discover(): every client format, precedence, self-skip, and never-fatal problem reporting."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from bridge_core.discovery import DiscoveryReport, discover

if TYPE_CHECKING:
    from conftest import Machine  # type: ignore[attr-defined]  # pytest (importlib mode) resolves it

ENV = {"HOME": "/home/ada", "GITHUB_TOKEN": "ghp_secret", "API_KEY": "k123", "LINEAR_TOKEN": "lin"}


def run(machine: Machine, *, environ: Mapping[str, str] = ENV, **kwargs: object) -> DiscoveryReport:
    return discover(home=machine.home, cwd=machine.cwd, environ=environ, platform="linux", **kwargs)  # type: ignore[arg-type]


def problems_of(report: DiscoveryReport, entry: str | None) -> list[tuple[str, str]]:
    return [(p.severity, p.message) for p in report.problems if p.entry == entry]


def test_every_client_format_is_read_from_its_documented_location(machine: Machine) -> None:
    machine.install()
    report = run(machine)
    assert set(report.servers) == {
        # Claude Desktop (its own entry skipped), Claude Code user + local scope, .mcp.json
        "filesystem", "github", "memory", "sentry", "api",
        # Cursor (one disabled), VS Code workspace, Windsurf, Gemini CLI, Codex (one disabled)
        "time", "remote", "legacy", "perplexity", "fetch", "figma", "sequential-thinking",
        "streamer", "events", "python-tools", "git", "linear",
        # ~/.config/mcp/servers/*.json: a single-server file and an mcpServers file
        "everything", "sqlite",
    }  # fmt: skip
    assert "unrelated" not in report.servers  # another project's local scope
    assert report.errors == []


def test_each_server_knows_the_file_and_entry_it_came_from(machine: Machine) -> None:
    machine.install()
    servers = run(machine).servers
    assert servers["filesystem"].source == (
        "~/.config/Claude/claude_desktop_config.json#mcpServers.filesystem"
    )
    assert (
        servers["sentry"].source
        == f"~/.claude.json#projects[{str(machine.cwd)!r}].mcpServers.sentry"
    )
    assert servers["git"].source == "~/.codex/config.toml#mcp_servers.git"
    assert servers["perplexity"].source == f"{machine.cwd}/.vscode/mcp.json#servers.perplexity"
    assert servers["everything"].source == "~/.config/mcp/servers/everything.json#everything"


@pytest.mark.parametrize(
    ("platform", "location"),
    [
        ("darwin", "~/Library/Application Support/Claude/claude_desktop_config.json"),
        ("linux", "~/.config/Claude/claude_desktop_config.json"),
    ],
)
def test_claude_desktop_config_is_found_at_its_platform_location(
    machine: Machine, platform: str, location: str
) -> None:
    machine.write(
        location, (Path(__file__).parent / "fixtures/claude_desktop_config.json").read_text()
    )
    report = discover(home=machine.home, cwd=machine.cwd, environ=ENV, platform=platform)
    assert set(report.servers) == {"filesystem", "github"}


def test_transports_are_taken_from_type_or_inferred_from_command_and_url(machine: Machine) -> None:
    machine.install()
    servers = run(machine).servers
    kinds = {name: spec.transport for name, spec in servers.items()}
    assert kinds["time"] == "stdio"
    assert kinds["remote"] == "http"  # a url without type: streamable HTTP ...
    assert kinds["legacy"] == "sse"  # ... unless it is an /sse endpoint
    assert kinds["github"] == "http"
    assert kinds["sentry"] == "sse"
    assert kinds["streamer"] == "http"
    assert kinds["events"] == "sse"
    assert kinds["figma"] == "http"  # Windsurf serverUrl
    assert servers["figma"].url == "https://figma.example.com/mcp"


def test_variables_are_expanded_in_env_args_headers_and_url(machine: Machine) -> None:
    machine.install()
    servers = run(machine, environ={**ENV, "API_BASE_URL": "https://staging.example.com"}).servers
    assert servers["github"].transport == "http"
    assert dict(servers["memory"].env) == {"MEMORY_FILE_PATH": "/home/ada/memory.json"}
    assert servers["sqlite"].args[-1] == "/home/ada/test.db"
    assert servers["api"].url == "https://staging.example.com/mcp"
    assert dict(servers["api"].headers) == {"Authorization": "Bearer k123"}
    assert servers["perplexity"].env["HOME_DIR"] == "/home/ada"  # VS Code's ${env:VAR}


def test_default_applies_when_variable_is_unset_or_empty(machine: Machine) -> None:
    machine.install("mcp.json", "windsurf_mcp_config.json")
    servers = run(machine, environ={"API_KEY": "k", "API_BASE_URL": ""}).servers
    assert servers["api"].url == "https://api.example.com/mcp"
    assert dict(servers["figma"].headers) == {"X-Token": ""}  # ${FIGMA_TOKEN:-}: empty default


def test_unset_variable_becomes_empty_and_is_reported_as_a_warning(machine: Machine) -> None:
    machine.install("claude_desktop_config.json")
    report = run(machine, environ={})
    assert dict(report.servers["github"].env) == {"GITHUB_PERSONAL_ACCESS_TOKEN": ""}
    assert problems_of(report, "github") == [
        ("warning", "environment variable GITHUB_TOKEN is not set; expanded to an empty string")
    ]


def test_an_entry_using_a_vscode_input_is_not_proxied_and_is_reported_as_info(
    machine: Machine,
) -> None:
    machine.install("vscode_mcp.json")
    report = run(machine)
    # Only VS Code can ask the user for the value; proxied, the server would get the literal text.
    assert "search" not in report.servers
    [(severity, message)] = problems_of(report, "search")
    assert severity == "info"
    assert "${input:search-token}" in message
    assert report.servers["perplexity"].env["PERPLEXITY_API_KEY"] == "k123"


def test_in_the_home_directory_a_clients_file_is_its_user_file_read_once(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor/mcp.json").write_text('{"mcpServers": {"t": {"command": "t"}}}')
    report = discover(home=tmp_path, cwd=tmp_path, environ={}, platform="linux")
    [cursor] = [c for c in report.sources_checked if c.app == "cursor"]
    assert (cursor.path, cursor.scope, cursor.usable) == (
        tmp_path / ".cursor/mcp.json",
        "user",
        ("t",),
    )


def test_entry_that_launches_the_bridge_itself_is_skipped_and_reported_as_info(
    machine: Machine,
) -> None:
    machine.install("claude_desktop_config.json")
    machine.write(
        "./.mcp.json",
        json.dumps(
            {"mcpServers": {"bridge2": {"command": "uvx", "args": ["mcp-code-execution-mode"]}}}
        ),
    )
    report = run(machine)
    assert "code-execution" not in report.servers
    assert "bridge2" not in report.servers
    for name in ("code-execution", "bridge2"):
        [(severity, message)] = problems_of(report, name)
        assert severity == "info"
        assert "bridge itself" in message


def test_disabled_entries_are_skipped_and_reported_as_info(machine: Machine) -> None:
    machine.install("cursor_mcp.json", "codex_config.toml")
    report = run(machine)
    assert "old-thing" not in report.servers
    assert "off" not in report.servers
    assert problems_of(report, "old-thing")[0][0] == "info"
    assert problems_of(report, "off")[0][0] == "info"


def test_codex_pass_through_env_vars_and_bearer_token_become_env_and_headers(
    machine: Machine,
) -> None:
    machine.install("codex_config.toml")
    servers = run(machine, environ={**ENV, "GIT_AUTHOR_NAME": "Ada"}).servers
    assert servers["git"].command == "uvx"
    assert dict(servers["git"].env) == {"GIT_AUTHOR_NAME": "Ada"}
    assert servers["linear"].transport == "http"
    assert dict(servers["linear"].headers) == {"X-Client": "codex", "Authorization": "Bearer lin"}


def test_gemini_scalars_in_args_and_env_become_strings(machine: Machine) -> None:
    machine.install("gemini_settings.json")
    spec = run(machine, environ={"DB_CONNECTION_STRING": "pg://db"}).servers["python-tools"]
    assert spec.args == ("-m", "my_mcp_server", "--port", "8080")
    assert dict(spec.env) == {"DATABASE_URL": "pg://db", "DEBUG": "true"}
    assert spec.cwd == "./mcp-servers/python"


def test_client_specific_fields_are_accepted_without_warnings(machine: Machine) -> None:
    machine.install()
    extra = {"DB_CONNECTION_STRING": "pg://", "FIGMA_TOKEN": "f", "GIT_AUTHOR_NAME": "A"}
    report = run(machine, environ={**ENV, **extra})
    assert [p for p in report.problems if p.severity == "warning"] == []


def test_unknown_field_is_reported_with_file_and_entry_and_the_entry_is_kept(
    machine: Machine,
) -> None:
    machine.write(
        "~/.cursor/mcp.json", json.dumps({"mcpServers": {"x": {"command": "x", "cmmand": "y"}}})
    )
    report = run(machine)
    assert "x" in report.servers
    [problem] = report.problems
    assert (problem.source, problem.entry, problem.severity) == (
        "~/.cursor/mcp.json",
        "x",
        "warning",
    )
    assert "'cmmand'" in problem.message


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"args": ["a"]}, "missing command"),
        ({"command": ""}, "missing command"),
        ({"type": "websocket", "url": "ws://x"}, "unknown transport"),
        ({"type": "http"}, "missing url"),
        ({"url": "file:///etc/passwd"}, "url must start with http"),
        ({"command": "x", "args": "--flag"}, "args must be a list"),
        ({"command": "x", "args": [["nested"]]}, "args[0] must be a string"),
        ({"command": "x", "env": ["A=1"]}, "env must be an object"),
        ({"command": "x", "url": "https://x"}, "both command and url"),
        ({"command": 42}, "command must be a string"),
        ("npx server", "expected an object"),
    ],
)
def test_invalid_entry_is_skipped_with_file_and_entry_named(
    machine: Machine, entry: object, fragment: str
) -> None:
    machine.write(
        "./.mcp.json", json.dumps({"mcpServers": {"bad": entry, "good": {"command": "ok"}}})
    )
    report = run(machine)
    assert set(report.servers) == {"good"}
    [problem] = report.errors
    assert (problem.source, problem.entry) == (f"{machine.cwd}/.mcp.json", "bad")
    assert fragment in problem.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"mcpServers": {"a": ', "invalid JSON at line 1"),
        ('{"mcpServers": ["a", "b"]}', "mcpServers is not an object"),
        ("[1, 2]", "the top level is not an object"),
        ("[" * 100_000, "JSON"),
    ],
)
def test_malformed_file_is_reported_and_the_other_files_are_still_read(
    machine: Machine, text: str, fragment: str
) -> None:
    machine.install("cursor_mcp.json")
    machine.write("~/.claude.json", text)
    report = run(machine)
    assert "time" in report.servers
    [problem] = report.errors
    assert (problem.source, problem.entry) == ("~/.claude.json", None)
    assert fragment in problem.message


def test_file_that_is_not_utf8_is_reported(machine: Machine) -> None:
    machine.path("~/.cursor").mkdir()
    machine.path("~/.cursor/mcp.json").write_bytes(b'{"mcpServers": {"\xff": {}}}')
    [problem] = run(machine).errors
    assert "UTF-8" in problem.message


def test_malformed_toml_is_reported(machine: Machine) -> None:
    machine.write("~/.codex/config.toml", "[mcp_servers.git\ncommand = 1")
    [problem] = run(machine).errors
    assert problem.source == "~/.codex/config.toml"
    assert "invalid TOML" in problem.message


def test_explicit_file_wins_every_conflict_and_the_losers_are_reported(machine: Machine) -> None:
    machine.install()
    explicit = machine.write(
        "./bridge.json", json.dumps({"mcpServers": {"github": {"command": "my-github"}}})
    )
    report = run(machine, explicit=explicit)
    assert report.servers["github"].command == "my-github"
    [conflict] = [c for c in report.conflicts if c.name == "github"]
    assert conflict.winner == f"{machine.cwd}/bridge.json#mcpServers.github"
    assert conflict.losers == (
        "~/.claude.json#mcpServers.github",
        "~/.config/Claude/claude_desktop_config.json#mcpServers.github",
    )


def test_project_scope_wins_over_user_scope(machine: Machine) -> None:
    machine.install("cursor_mcp.json")
    machine.write(
        "./.cursor/mcp.json", json.dumps({"mcpServers": {"time": {"command": "local-time"}}})
    )
    report = run(machine)
    assert report.servers["time"].command == "local-time"
    assert [c.name for c in report.conflicts] == ["time"]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bridge.toml", '[mcp_servers.one]\ncommand = "one"\n'),
        ("bridge.json", '{"servers": {"one": {"type": "stdio", "command": "one"}}}'),
        ("one.json", '{"command": "one"}'),
        ("bridge.json", '{"mcpServers": {"one": {"serverUrl": "https://one.example/mcp"}}}'),
    ],
)
def test_explicit_file_may_use_any_client_shape(machine: Machine, name: str, text: str) -> None:
    explicit = machine.write(f"./{name}", text)
    report = run(machine, explicit=explicit)
    assert list(report.servers) == ["one"]
    assert report.problems == []


def test_missing_explicit_file_is_an_error_but_discovery_continues(machine: Machine) -> None:
    machine.install("cursor_mcp.json")
    report = run(machine, explicit=machine.cwd / "nope.json")
    assert "time" in report.servers
    [problem] = report.errors
    assert problem.message == "explicit config file not found"


def test_sources_checked_lists_every_location_found_or_not(machine: Machine) -> None:
    machine.install("cursor_mcp.json")
    listed = run(machine).sources_checked
    checked = {str(c.path): c for c in listed}
    cursor = checked[str(machine.home / ".cursor/mcp.json")]
    assert cursor.found
    assert cursor.servers == 4
    assert not checked[str(machine.home / ".codex/config.toml")].found
    assert not checked[str(machine.home / ".config/mcp/servers/*.json")].found
    assert not checked[str(machine.home / ".config/mcp-code-execution-mode/servers.json")].found
    assert len(listed) == 14


def test_an_unusable_file_is_listed_with_the_reason(machine: Machine) -> None:
    machine.write("~/.cursor/mcp.json", '{"mcpServers": {')
    checked = {c.path: c for c in run(machine).sources_checked}
    cursor = checked[machine.home / ".cursor/mcp.json"]
    assert cursor.found
    assert cursor.problem is not None
    assert cursor.problem.startswith("invalid JSON at line 1")


def test_each_file_says_which_client_loads_it_and_whether_it_launches_the_bridge(
    machine: Machine,
) -> None:
    machine.write(
        "~/.cursor/mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "code-execution": {
                        "command": "/v/bin/python",
                        "args": ["-m", "mcp_code_execution_mode"],
                    },
                    "time": {"command": "mcp-server-time"},
                    "off": {"command": "x", "disabled": True},
                }
            }
        ),
    )
    report = run(machine)
    checked = {c.path: c for c in report.sources_checked}
    cursor = checked[machine.home / ".cursor/mcp.json"]
    assert cursor.app == "cursor"
    assert cursor.bridge_entries == ("code-execution",)
    assert cursor.usable == ("time",)
    assert list(report.servers) == ["time"]
    assert checked[machine.home / ".config/mcp-code-execution-mode/servers.json"].app is None


def test_the_bridge_servers_file_is_read_after_project_files_and_before_user_files(
    machine: Machine, tmp_path: Path
) -> None:
    own = {"mcpServers": {"shared": {"command": "from-bridge-file"}}}
    machine.write("~/.config/mcp-code-execution-mode/servers.json", json.dumps(own))
    machine.write("~/.cursor/mcp.json", '{"mcpServers": {"shared": {"command": "from-cursor"}}}')
    machine.write("./.cursor/mcp.json", '{"mcpServers": {"shared": {"command": "from-project"}}}')
    report = run(machine)
    assert report.servers["shared"].command == "from-project"
    [conflict] = report.conflicts
    assert conflict.losers == (
        "~/.config/mcp-code-execution-mode/servers.json#mcpServers.shared",
        "~/.cursor/mcp.json#mcpServers.shared",
    )
    moved = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    (tmp_path / "xdg/mcp-code-execution-mode").mkdir(parents=True)
    (tmp_path / "xdg/mcp-code-execution-mode/servers.json").write_text(json.dumps(own))
    assert "shared" in run(machine, environ=moved).servers


def test_a_file_is_read_once_when_the_project_is_the_home_directory(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor/mcp.json").write_text('{"mcpServers": {"t": {"command": "t"}}}')
    report = discover(home=tmp_path, cwd=tmp_path, environ={}, platform="linux")
    assert report.conflicts == []
    paths = [c.path for c in report.sources_checked]
    assert len(paths) == len(set(paths)) + 1  # ~/.claude.json is read twice: user and project keys


def test_codex_home_and_xdg_config_home_move_their_files(machine: Machine, tmp_path: Path) -> None:
    (tmp_path / "codex").mkdir()
    (tmp_path / "codex/config.toml").write_text('[mcp_servers.c]\ncommand = "c"\n')
    (tmp_path / "xdg/Claude").mkdir(parents=True)
    (tmp_path / "xdg/Claude/claude_desktop_config.json").write_text(
        '{"mcpServers": {"d": {"command": "d"}}}'
    )
    environ = {"CODEX_HOME": str(tmp_path / "codex"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert set(run(machine, environ=environ).servers) == {"c", "d"}


def test_without_clients_only_the_explicit_file_is_read(machine: Machine) -> None:
    machine.install()
    explicit = machine.write("./bridge.json", '{"mcpServers": {"one": {"command": "one"}}}')
    report = run(machine, explicit=explicit, clients=False)
    assert list(report.servers) == ["one"]
    assert [c.path for c in report.sources_checked] == [explicit]


def test_a_symlink_loop_is_not_fatal(machine: Machine) -> None:
    (machine.home / ".cursor").mkdir()
    loop = machine.home / ".cursor" / "mcp.json"
    loop.symlink_to(loop)
    machine.install("claude_desktop_config.json")
    report = run(machine)
    assert "filesystem" in report.servers
