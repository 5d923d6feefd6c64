"""End-to-end latency of the bridge through a real MCP stdio client.

Prints: bridge start → first result; warm ``run_python("1+1")`` p50/p99 over N calls; the same
call in a mode that starts a fresh container per call (what the older tools in this field do),
and the ratio of the two; ``tools/list`` bytes with 0/10/100 configured servers.

    hatch run tests:python bench/server_roundtrip.py [--calls 500] [--fresh-calls 20]

Uses ``$MCP_BRIDGE_IMAGE`` (or the default image) and the runtime auto-detection.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


@asynccontextmanager
async def bridge(work: Path, servers: int = 0, **env: str) -> AsyncIterator[ClientSession]:
    config = work / "servers.json"
    entries = {f"s{i}": {"command": "/nonexistent/server"} for i in range(servers)}

    def write_config() -> None:
        work.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({"mcpServers": entries}))

    await anyio.to_thread.run_sync(write_config)
    full_env = {
        **os.environ,
        "MCP_BRIDGE_CONFIG": str(config),
        "MCP_BRIDGE_DISCOVER": "false",
        "MCP_BRIDGE_STATE_DIR": str(work / "state"),
        **env,
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_code_execution_mode"], env=full_env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession) -> float:
    started = time.perf_counter()
    result = await session.call_tool("run_python", {"code": "1+1"}, read_timeout_seconds=120)
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise SystemExit(f"run_python failed: {result.content}")
    return elapsed


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main(calls: int, fresh_calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        async with bridge(work / "warm") as session:
            first = await call(session)
            ready = time.perf_counter() - started
            warm = [await call(session) for _ in range(calls)]
        print(f"bridge start -> first result: {ready * 1000:.0f} ms")
        print(f"  of which the first run_python: {first * 1000:.0f} ms")
        p50, p99 = statistics.median(warm), percentile(warm, 0.99)
        print(f"warm run_python('1+1') x{calls}: p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms")

        async with bridge(
            work / "fresh", MCP_BRIDGE_SESSION_PERSIST="false", MCP_BRIDGE_POOL_SIZE="0"
        ) as session:
            fresh = [await call(session) for _ in range(fresh_calls)]
        fresh_p50 = statistics.median(fresh)
        print(f"fresh container per call x{fresh_calls}: p50 {fresh_p50 * 1000:.0f} ms")
        print(f"ratio fresh/warm (p50): {fresh_p50 / p50:.0f}x (goal >= 100x)")

        for count in (0, 10, 100):
            async with bridge(work / f"list{count}", servers=count) as session:
                listed = await session.list_tools()
            size = len(listed.model_dump_json(by_alias=True, exclude_none=True).encode())
            print(f"tools/list with {count:3d} servers configured: {size} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--fresh-calls", type=int, default=20)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.fresh_calls)
