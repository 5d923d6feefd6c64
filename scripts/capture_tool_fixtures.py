"""Capture real MCP servers' tool lists as the search fixtures (run by hand; not a test).

    hatch run tests:python scripts/capture_tool_fixtures.py [--servers-dir DIR] [NAME ...]

Installs each server at its pinned version (npm packages into ``DIR/npm``, each PyPI server
into its own venv ``DIR/py-NAME``: they pin their own ``mcp``), starts it once over stdio with
the SDK client, and writes ``tools_NAME.json`` into
``packages/bridge-core/tests/catalog/fixtures``: the package and version it came from, the
server's own ``serverInfo``, and every tool as ``model_dump(by_alias=True, mode="json",
exclude_none=True)``. Every server here starts without credentials or network: state goes to
scratch files (an empty allowed directory, a fresh memory file, a scratch git repository and
SQLite file), and listing tools never reaches out. github gets a placeholder token because it
refuses to start without one; listing tools sends nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

FIXTURES = Path(__file__).resolve().parent.parent / "packages/bridge-core/tests/catalog/fixtures"


@dataclass(frozen=True)
class Server:
    """A server to capture: where it comes from and how it starts (``{scratch}`` is a fresh
    directory for its state)."""

    registry: str  # "npm" or "pypi"
    package: str
    version: str
    executable: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    pip_extra: tuple[str, ...] = ()  # extra pins for the server's own venv


SERVERS = {
    "everything": Server(
        "npm",
        "@modelcontextprotocol/server-everything",
        "2026.8.31",
        "mcp-server-everything",
        ("stdio",),
    ),
    "filesystem": Server(
        "npm",
        "@modelcontextprotocol/server-filesystem",
        "2026.8.31",
        "mcp-server-filesystem",
        ("{scratch}",),
    ),
    "memory": Server(
        "npm",
        "@modelcontextprotocol/server-memory",
        "2026.8.31",
        "mcp-server-memory",
        env={"MEMORY_FILE_PATH": "{scratch}/memory.jsonl"},
    ),
    "sequential-thinking": Server(
        "npm",
        "@modelcontextprotocol/server-sequential-thinking",
        "2026.8.31",
        "mcp-server-sequential-thinking",
    ),
    "playwright": Server("npm", "@playwright/mcp", "0.0.83", "playwright-mcp", ("--headless",)),
    "github": Server(
        "npm",
        "@modelcontextprotocol/server-github",
        "2025.4.8",
        "mcp-server-github",
        env={"GITHUB_PERSONAL_ACCESS_TOKEN": "placeholder-listing-only"},
    ),
    "time": Server(
        "pypi", "mcp-server-time", "2026.10.19", "mcp-server-time", ("--local-timezone", "UTC")
    ),
    "git": Server(
        "pypi", "mcp-server-git", "2026.10.19", "mcp-server-git", ("--repository", "{scratch}")
    ),
    "fetch": Server("pypi", "mcp-server-fetch", "2026.10.24", "mcp-server-fetch"),
    "sqlite": Server(
        "pypi",
        "mcp-server-sqlite",
        "2025.4.25",
        "mcp-server-sqlite",
        ("--db-path", "{scratch}/scratch.db"),
        pip_extra=("mcp<2",),
    ),
}


def install(servers_dir: Path, names: list[str]) -> None:
    npm = [f"{s.package}@{s.version}" for n in names if (s := SERVERS[n]).registry == "npm"]
    if npm:
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(servers_dir / "npm"),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *npm,
            ],
            check=True,
            env={**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"},
        )
    for name in names:
        server = SERVERS[name]
        if server.registry != "pypi":
            continue
        venv = servers_dir / f"py-{name}"
        if not (venv / "bin/python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin/python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                f"{server.package}=={server.version}",
                *server.pip_extra,
            ],
            check=True,
        )


def executable(servers_dir: Path, name: str) -> Path:
    server = SERVERS[name]
    if server.registry == "npm":
        return servers_dir / "npm/node_modules/.bin" / server.executable
    return servers_dir / f"py-{name}/bin" / server.executable


async def capture(servers_dir: Path, name: str, scratch: Path) -> None:
    server = SERVERS[name]
    if name == "git":
        await anyio.run_process(["git", "init", "-q", str(scratch)])
    params = StdioServerParameters(
        command=str(executable(servers_dir, name)),
        args=[a.format(scratch=scratch) for a in server.args],
        env={k: v.format(scratch=scratch) for k, v in server.env.items()} or None,
    )
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
    dump = {
        "package": f"{server.registry}:{server.package}@{server.version}",
        "server_info": init.server_info.model_dump(by_alias=True, mode="json", exclude_none=True),
        "tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools.tools],
    }
    output = FIXTURES / f"tools_{name}.json"
    output.write_text(json.dumps(dump, indent=1, sort_keys=True) + "\n")
    print(f"{output.name}: {len(tools.tools)} tools from {dump['package']}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"default: all of {', '.join(SERVERS)}")
    parser.add_argument("--servers-dir", type=Path, help="install dir (default: a temp dir)")
    parser.add_argument("--no-install", action="store_true", help="servers-dir is ready")
    args = parser.parse_args()
    names = args.names or list(SERVERS)
    if unknown := sorted(set(names) - set(SERVERS)):
        parser.error(f"unknown server(s) {unknown}: choose from {', '.join(SERVERS)}")
    servers_dir = args.servers_dir or Path(tempfile.mkdtemp(prefix="mcp-fixture-servers-"))
    if not args.no_install:
        install(servers_dir, names)
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"capture-{name}-") as scratch:
            anyio.run(capture, servers_dir, name, Path(scratch))


if __name__ == "__main__":
    main()
