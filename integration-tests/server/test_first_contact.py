"""A new user's first contact: `setup` for each client gives a client config that a real MCP
client starts (one tool, the moved servers behind it); problems show where the user looks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import CALL_TIMEOUT, bridge_env

CLIENT_FILES = {
    "claude-desktop": ".config/Claude/claude_desktop_config.json",
    "claude-code": ".claude.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".config/Code/User/mcp.json",
    "windsurf": ".codeium/windsurf/mcp_config.json",
    "gemini": ".gemini/settings.json",
    "codex": ".codex/config.toml",
}


def _user_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose home is ``home`` (nothing of ours, no XDG overrides)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_BRIDGE_", "XDG_"))}
    env.pop("CODEX_HOME", None)
    env.pop("CLAUDE_CONFIG_DIR", None)
    return {**env, "HOME": str(home), **extra}


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", *args],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=cwd,
    )  # fmt: skip


def _write_client_file(home: Path, client: str, time_server: str) -> Path:
    path = home / CLIENT_FILES[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    if client == "codex":
        path.write_text(
            f'model = "o3"\n\n[mcp_servers.time]\ncommand = "{time_server}"\n'
            'args = ["--local-timezone", "UTC"]\n'
        )
        return path
    entry: dict[str, Any] = {"command": time_server, "args": ["--local-timezone", "UTC"]}
    if client in ("vscode", "claude-code"):
        entry["type"] = "stdio"
    key = "servers" if client == "vscode" else "mcpServers"
    path.write_text(json.dumps({"other": True, key: {"time": entry}}, indent=2))
    return path


def _bridge_entry(client: str, path: Path) -> dict[str, Any]:
    if client == "codex":
        table = tomllib.loads(path.read_text())["mcp_servers"]
    else:
        table = json.loads(path.read_text())["servers" if client == "vscode" else "mcpServers"]
    assert list(table) == ["code-execution"], table
    entry: dict[str, Any] = table["code-execution"]
    return entry


async def _open(entry: dict[str, Any], home: Path) -> Any:
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**entry.get("env", {}), "HOME": str(home)},
        cwd=str(home),
    )
    return stdio_client(params)


@pytest.mark.container
@pytest.mark.parametrize("client", sorted(CLIENT_FILES))
async def test_setup_gives_a_client_one_tool_and_the_moved_servers_behind_it(
    tmp_path: Path, client: str, sandbox_image: str, third_party: dict[str, str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    path = _write_client_file(home, client, third_party["MCP_SERVER_TIME"])
    # No warm pool for this bridge: a key of the settings file beside the servers file, which
    # the bridge the client starts reads too (setup refuses the old --pool-size flag).
    settings = home / ".config" / "mcp-code-execution-mode" / "bridge.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("[sandbox]\npool_size = 0\n")
    done = await anyio.to_thread.run_sync(
        lambda: _cli(
            "setup", client, "--image", sandbox_image,
            "--state-dir", str(tmp_path / "state"), env=_user_env(home), cwd=home,
        )
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    entry = _bridge_entry(client, path)
    assert Path(entry["command"]).is_absolute()

    # Started exactly as the client would start it: command, args and env from its file.
    async with await _open(entry, home) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
            listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["run_python"]
        with anyio.fail_after(CALL_TIMEOUT + 10):
            result = await session.call_tool(
                "run_python",
                {"code": "from mcp import mcp_time\n(await mcp_time.get_current_time("
                 "timezone='UTC'))['timezone']"},
                read_timeout_seconds=CALL_TIMEOUT,
            )  # fmt: skip
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert not result.is_error, text.text
    assert "'UTC'" in text.text


@pytest.mark.parametrize(
    ("env", "args", "named"),
    [
        ({"MCP_BRIDGE_TIMEOUT": "soon"}, (), "MCP_BRIDGE_TIMEOUT='soon'"),
        ({}, ("--timout", "30"), "unrecognized arguments: --timout 30"),
    ],
)
async def test_a_bad_setting_still_starts_the_server_and_every_call_names_the_problem_and_fix(
    tmp_path: Path, env: dict[str, str], args: tuple[str, ...], named: str
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", *args],
        env=_user_env(tmp_path, **env),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool("run_python", {"code": "1 + 1"})
    assert [t.name for t in listed.tools] == ["run_python"]
    assert result.is_error
    assert result.structured_content is not None
    assert result.structured_content["error"]["type"] == "ConfigError"
    message = result.structured_content["error"]["message"]
    assert named in message
    assert "Fix: correct" in message
    assert ('"env"' if env else '"args"') in message


@pytest.mark.container
async def test_a_missing_image_is_a_result_naming_the_image_and_how_to_build_it(
    tmp_path: Path,
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode"],
        env=bridge_env(
            {
                "MCP_BRIDGE_IMAGE": "localhost/no-such-image:0",
                "MCP_BRIDGE_POOL_SIZE": "0",
                "MCP_BRIDGE_STATE_DIR": str(tmp_path),
            }
        ),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(CALL_TIMEOUT):
            await session.initialize()
            result = await session.call_tool("run_python", {"code": "1 + 1"})
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert result.is_error
    assert "localhost/no-such-image:0" in text.text
    assert "mcp-code-execution-mode image build" in text.text


@pytest.mark.container
def test_doctor_lists_every_file_once_and_fails_for_an_unusable_client_config(
    tmp_path: Path, sandbox_image: str
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini/settings.json").write_text('{"mcpServers": {')
    (home / ".claude.json").write_text('{"mcpServers": {}, "projects": {}}')
    env = _user_env(home, MCP_BRIDGE_IMAGE=sandbox_image, MCP_BRIDGE_STATE_DIR=str(tmp_path / "s"))
    done = _cli("doctor", env=env, cwd=project)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "invalid    ~/.gemini/settings.json (Gemini CLI): invalid JSON at line 1" in out
    assert "[FAIL] config file: ~/.gemini/settings.json (Gemini CLI) is unusable" in out
    claude = "found      ~/.claude.json (Claude Code (local), Claude Code (user)): 0 server(s)"
    assert out.count("~/.claude.json") == 1
    assert claude in out
    for place in (
        "~/.cursor/mcp.json (Cursor)",
        "~/.codex/config.toml (Codex)",
        f"{project}/.vscode/mcp.json (VS Code (workspace))",
        "~/.config/mcp-code-execution-mode/servers.json (bridge servers file)",
    ):
        assert f"not found  {place}" in out
    assert f"[ok]   log file: {tmp_path / 's' / 'logs' / 'bridge.log'}" in out
    assert "result: PROBLEMS FOUND" in out


@pytest.mark.container
def test_doctor_fails_for_a_missing_explicit_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "servers.json"
    env = bridge_env({"MCP_BRIDGE_CONFIG": str(missing), "MCP_BRIDGE_STATE_DIR": str(tmp_path)})
    done = _cli("doctor", env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"[FAIL] config file: the explicit config file {missing} does not exist" in done.stdout


@pytest.mark.container
def test_doctor_warns_with_the_token_cost_when_a_client_loads_a_server_directly_and_via_bridge(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    home = tmp_path / "home"
    path = _write_client_file(home, "cursor", third_party["MCP_SERVER_TIME"])
    data = json.loads(path.read_text())
    data["mcpServers"]["code-execution"] = {
        "command": sys.executable,
        "args": ["-m", "mcp_code_execution_mode"],
    }
    path.write_text(json.dumps(data))
    env = _user_env(home, MCP_BRIDGE_IMAGE=sandbox_image, MCP_BRIDGE_STATE_DIR=str(tmp_path / "s"))
    done = _cli("doctor", env=env, cwd=tmp_path)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    # 2,261 bytes: the time server's tools/list (the README's token table measures 572 tokens).
    assert (
        "[warn] server 'time': loaded twice: directly by Cursor (~/.cursor/mcp.json) and through "
        "the bridge; its 2 tool schema(s) cost ~566 tokens (estimate: 2,261 bytes / 4)"
    ) in out
    assert "fix: mcp-code-execution-mode setup cursor" in out

    assert _cli("setup", "cursor", env=env, cwd=tmp_path).returncode == 0
    done = _cli("doctor", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert "loaded twice" not in done.stdout
    assert "[ok]   server 'time': starts, lists 2 tool(s)" in done.stdout
    # The entry setup just wrote is expected, and every finding is one of doctor's own lines.
    assert "[warn]" not in done.stdout, done.stdout
    assert "[ok]   discovery: ~/.cursor/mcp.json: server 'code-execution': the entry of" in (
        done.stdout
    )
    assert done.stderr == ""
