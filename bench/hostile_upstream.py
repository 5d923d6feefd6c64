"""What hostile upstream servers cost the real bridge (stdio, MCP SDK client, real podman).

1. ``flood``: a server writes one 120 MB JSON-RPC line with no newline. Figures: time until the
   call answers, the bridge's peak RSS growth and the CPU it spends (until the server is gone or
   40 s passed), and the slowest answer of a sibling session meanwhile.
2. ``catalog``: a server lists 100,000 tools. Figures: time of the first ``search_tool_docs``,
   the bridge's peak RSS growth, the slowest answer of a sibling session meanwhile. With
   ``--admit`` the bridge's bounds are raised so the catalog is accepted (the cost of indexing
   it then shows).

Usage: ``hatch run bench:python bench/hostile_upstream.py [flood|catalog] [--admit]``. Prints
figures; asserts nothing. Servers: ``integration-tests/servers/{hostile,probe}_server.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from _scale import bridge_pid  # bench/ is on sys.path when run as a script
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVERS = Path(__file__).resolve().parents[1] / "integration-tests" / "servers"
FLOOD_BYTES = 120 * 1024 * 1024
CATALOG_TOOLS = 100_000
WATCH_SECONDS = 40.0


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@asynccontextmanager
async def _bridge(work: Path, servers: dict[str, Any], env: dict[str, str]) -> AsyncIterator[Any]:
    config = work / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    base = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    if image := os.environ.get("MCP_BRIDGE_IMAGE"):
        base["MCP_BRIDGE_IMAGE"] = image
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(work / "state")],
        env={**base, "MCP_BRIDGE_DISCOVER": "false", "MCP_BRIDGE_CONFIG": str(config), **env},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _run(session: Any, code: str, name: str = "default") -> Any:
    return await session.call_tool(
        "run_python", {"code": code, "session": name}, read_timeout_seconds=300
    )


async def _sibling(session: Any, done: anyio.Event, slowest: list[float]) -> None:
    while not done.is_set():
        started = time.perf_counter()
        await _run(session, "1", "sibling")
        slowest.append(time.perf_counter() - started)


async def flood(work: Path, admit: bool) -> None:
    servers = {
        "hostile": {"command": sys.executable, "args": [str(SERVERS / "hostile_server.py")]},
        "probe": {"command": sys.executable, "args": [str(SERVERS / "probe_server.py")]},
    }
    async with _bridge(work, servers, {"MCP_BRIDGE_CALL_TIMEOUT": "30s"}) as session:
        pid = bridge_pid(work / "state")
        await _run(session, "await mcp_servers['hostile'].echo(text='warm')")
        await _run(session, "1", "sibling")
        peak, cpu = _status_kib(pid, "VmHWM"), _cpu(pid)
        done, slowest = anyio.Event(), [0.0]
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_sibling, session, done, slowest)
            result = await _run(
                session,
                "from mcp import ToolError\ntry:\n"
                f"    await mcp_servers['hostile'].flood(size={FLOOD_BYTES})\n"
                "except ToolError as exc:\n    print(type(exc).__name__, str(exc)[:160])",
            )
            answered = time.perf_counter() - started
            deadline = started + WATCH_SECONDS
            # No event tells a foreign process's exit without its pid: poll /proc.
            while time.perf_counter() < deadline and _server_alive("hostile_server.py", pid):  # noqa: ASYNC110
                await anyio.sleep(0.2)
            done.set()
        watched = time.perf_counter() - started
        print(f"flood answer: {result.structured_content['stdout'].strip()}")
        print(f"answered after {answered:.1f} s; watched {watched:.1f} s")
        print(f"bridge peak RSS +{(_status_kib(pid, 'VmHWM') - peak) / 1024:.0f} MiB")
        print(f"bridge CPU {_cpu(pid) - cpu:.1f} s; sibling slowest {max(slowest):.2f} s")
        print(f"server still running: {_server_alive('hostile_server.py', pid)}")


def _server_alive(script: str, bridge: int) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if script.encode() in argv and state != "Z":
                return True
    return False


async def catalog(work: Path, admit: bool) -> None:
    hostile = [str(SERVERS / "hostile_server.py"), "--tools", str(CATALOG_TOOLS)]
    servers = {
        "huge": {"command": sys.executable, "args": hostile},
        "probe": {"command": sys.executable, "args": [str(SERVERS / "probe_server.py")]},
    }
    env = {"MCP_BRIDGE_MAX_SERVER_TOOLS": "200000", "MCP_BRIDGE_MAX_TOOL_LIST_SIZE": "64m"}
    async with _bridge(work, servers, env if admit else {}) as session:
        pid = bridge_pid(work / "state")
        await _run(session, "1")
        await _run(session, "1", "sibling")
        peak = _status_kib(pid, "VmHWM")
        done, slowest = anyio.Event(), [0.0]
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_sibling, session, done, slowest)
            result = await _run(
                session, "len(await runtime.search_tool_docs('generated tool number 4242'))"
            )
            searched = time.perf_counter() - started
            done.set()
        print(f"search answered {result.structured_content['result']} hits in {searched:.1f} s")
        print(f"bridge peak RSS +{(_status_kib(pid, 'VmHWM') - peak) / 1024:.0f} MiB")
        print(f"sibling slowest {max(slowest):.2f} s")
        started = time.perf_counter()
        await _run(session, "len(await runtime.search_tool_docs('generated tool number 77'))")
        print(f"second search {time.perf_counter() - started:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("case", choices=["flood", "catalog"])
    parser.add_argument("--admit", action="store_true", help="raise the bounds (catalog)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as work:
        anyio.run({"flood": flood, "catalog": catalog}[opts.case], Path(work), opts.admit)


if __name__ == "__main__":
    main()
