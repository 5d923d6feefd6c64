"""Prompt tokens that tool definitions cost: five real MCP servers listed directly vs the bridge.

A client connected to MCP servers puts every tool's name, description and input schema into the
model's context on every request. This script starts the five offline servers of
``scripts/prepare-servers`` (everything, filesystem, memory, time, git), takes each one's
``tools/list`` answer as the client receives it, and counts its tokens; then it does the same for
the bridge configured with the same five servers (its ``tools/list`` is one tool, ``run_python``,
whatever is configured behind it), and the bridge's direct and both modes (``serve --tools``:
each proxied tool listed by itself as ``server__tool``, its definition kept).

    hatch run bench-tokens:python bench/token_overhead.py

Token counts use the legacy Claude tokenizer shipped in PyPI ``anthropic==0.34.2`` (offline; it
is not the tokenizer of current models, so read the figures as a close proxy, not exact billing).
Tools are serialised as compact JSON of ``{name, description, inputSchema}`` (plus any other field
the server sent), which is what clients forward to the model.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import anyio
from anthropic._tokenizers import sync_get_tokenizer
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
SERVERS_ENV = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"


def _server_paths() -> dict[str, str]:
    if not SERVERS_ENV.is_file():
        sys.exit(f"{SERVERS_ENV} is missing: run scripts/prepare-servers first")
    values = {}
    for line in SERVERS_ENV.read_text().splitlines():
        if line.startswith("export "):
            name, _, raw = line.removeprefix("export ").partition("=")
            values[name] = shlex.split(raw)[0]
    return values


def _servers(paths: dict[str, str], work: Path) -> dict[str, dict[str, Any]]:
    """The five servers with throwaway data under ``work``."""
    data = work / "data"
    data.mkdir()
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)  # mcp-server-git needs one
    return {
        "everything": {"command": paths["MCP_SERVER_EVERYTHING"], "args": ["stdio"]},
        "filesystem": {"command": paths["MCP_SERVER_FILESYSTEM"], "args": [str(data)]},
        "memory": {
            "command": paths["MCP_SERVER_MEMORY"],
            "env": {"MEMORY_FILE_PATH": str(work / "memory.jsonl")},
        },
        "time": {"command": paths["MCP_SERVER_TIME"], "args": ["--local-timezone", "UTC"]},
        "git": {"command": paths["MCP_SERVER_GIT"], "args": ["--repository", str(repo)]},
    }


async def _tools_json(command: str, args: list[str], env: dict[str, str], quiet: TextIO) -> str:
    """The server's ``tools/list`` answer as compact JSON, as a client forwards it."""
    params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
    with anyio.fail_after(120):
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
    tools = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed.tools]
    return json.dumps(tools, separators=(",", ":"), ensure_ascii=False)


async def main(quiet: TextIO) -> None:
    tokenizer = sync_get_tokenizer()

    def count(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    paths = _server_paths()
    with tempfile.TemporaryDirectory(prefix="token-overhead-") as tmp:
        work = Path(tmp)
        servers = _servers(paths, work)
        print(f"{'server':<14}{'tools':>6}{'bytes':>9}{'tokens':>9}")
        total_tokens = total_bytes = total_tools = 0
        for name, spec in servers.items():
            text = await _tools_json(
                spec["command"], spec.get("args", []), spec.get("env", {}), quiet
            )
            tools, tokens = len(json.loads(text)), count(text)
            total_tools, total_bytes, total_tokens = (
                total_tools + tools,
                total_bytes + len(text),
                total_tokens + tokens,
            )
            print(f"{name:<14}{tools:>6}{len(text):>9}{tokens:>9}")
        print(f"{'all five':<14}{total_tools:>6}{total_bytes:>9}{total_tokens:>9}")

        config = work / "servers.json"
        config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        bridge_env = {
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_CONFIG": str(config),
            "MCP_BRIDGE_STATE_DIR": str(work / "state"),
        }
        measured = {}
        for mode in ("code", "direct", "both"):
            text = await _tools_json(
                sys.executable, ["-m", "mcp_code_execution_mode", "--tools", mode], bridge_env,
                quiet,
            )  # fmt: skip
            measured[mode] = count(text)
            label = f"bridge {mode}"
            print(f"{label:<14}{len(json.loads(text)):>6}{len(text):>9}{measured[mode]:>9}")
        tokens = measured["code"]
        print(
            f"bridge / five servers: {tokens / total_tokens:.1%} of the tokens "
            f"({total_tokens - tokens} fewer per request)"
        )
        # More tools than the five list to this script: server-everything adds tools for a
        # client that declares sampling, elicitation and roots, which the bridge (relaying them)
        # does; and each direct tool gets a server__tool name and a title naming its server.
        direct = measured["direct"] / total_tokens
        print(f"bridge direct / five servers: {direct:.1%} of the tokens")


if __name__ == "__main__":
    # The servers' stderr banners would interleave with the table.
    with open(os.devnull, "w") as devnull:
        anyio.run(main, devnull)
