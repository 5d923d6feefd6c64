"""Cost of the upstream pool over a plain SDK client, and what concurrency buys.

Runs against our probe server (Python SDK) and, when ``scripts/prepare-servers`` ran, the Node
``server-everything``:

1. N sequential ``echo`` calls through :class:`UpstreamPool` vs the same N from a host-side
   ``ClientSession`` straight to another instance of the same server;
2. M calls in parallel vs M sequential, through the pool.

Usage: ``hatch run bench:python bench/proxy_calls.py [--calls 1000] [--parallel 100]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

import anyio
from _echo_targets import echo_targets  # bench/ is on sys.path when run as a script
from bridge_core.proxy import UpstreamPool
from bridge_core.servers import ServerSpec
from mcp import ClientSession, StdioServerParameters, stdio_client


def _devnull() -> TextIO:
    return open(os.devnull, "w")  # closed by the caller


async def _timed(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


def _describe(label: str, samples: list[float]) -> float:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2] * 1e3
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3
    mean = statistics.fmean(samples) * 1e3
    print(f"  {label:<34} mean {mean:7.3f} ms  p50 {p50:7.3f} ms  p99 {p99:7.3f} ms")
    return mean


async def _bench(
    spec: ServerSpec, tool: str, args: dict[str, Any], calls: int, parallel: int
) -> None:
    print(f"\n{spec.name} ({spec.command}): {calls} sequential {tool!r} calls")
    assert spec.command is not None
    params = StdioServerParameters(command=spec.command, args=list(spec.args))
    devnull = _devnull()  # keeps the server's log lines out of the report
    async with (
        stdio_client(params, errlog=devnull) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.call_tool(tool, args)  # warm
        direct = _describe(
            "direct SDK ClientSession", await _timed(calls, lambda: session.call_tool(tool, args))
        )

    devnull.close()

    async with UpstreamPool([spec]) as pool:
        await pool.call_tool(spec.name, tool, args)  # start + warm
        pooled = _describe(
            "through UpstreamPool",
            await _timed(calls, lambda: pool.call_tool(spec.name, tool, args)),
        )
        print(
            f"  pool / direct: {pooled / direct:.2f}x  (+{(pooled - direct) * 1e3:.1f} µs per call)"
        )

        start = time.perf_counter()
        for _ in range(parallel):
            await pool.call_tool(spec.name, tool, args)
        sequential = time.perf_counter() - start

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(parallel):
                tg.start_soon(pool.call_tool, spec.name, tool, args)
        concurrent = time.perf_counter() - start
        print(
            f"  {parallel} calls: sequential {sequential * 1e3:.1f} ms, "
            f"parallel {concurrent * 1e3:.1f} ms ({sequential / concurrent:.2f}x faster)"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=100)
    opts = parser.parse_args()
    for spec, tool, args in echo_targets():
        await _bench(spec, tool, args, opts.calls, opts.parallel)


if __name__ == "__main__":
    anyio.run(main)
