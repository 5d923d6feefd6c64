"""Tool calls made FROM SANDBOX CODE vs the same calls from a host-side SDK client.

For each upstream (our probe server; the Node ``server-everything`` when
``scripts/prepare-servers`` ran), in one run:

1. N sequential ``echo`` calls written in sandbox code (``await mcp_servers[...].echo(...)`` in a
   real podman sandbox, timed inside the sandbox) vs N calls from a plain host-side
   ``ClientSession`` straight to another instance of the same server — the ratio is what the
   bridge adds per call (goal <= 1.3x);
2. M calls with ``asyncio.gather`` vs M sequential, from sandbox code: with ``echo`` (server-bound)
   and, on the probe server, with a 50 ms ``sleep`` tool (latency-bound, like a real web API);
   goal >= 5x faster.

Usage: ``hatch run bench:python bench/sandbox_calls.py [--calls 1000] [--parallel 100]``.
Prints figures and bars; asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _echo_targets import echo_targets  # bench/ is on sys.path when run as a script
from bridge_core.proxy import open_proxy
from bridge_core.runtime import detect_runtime
from bridge_core.servers import ServerSpec
from bridge_core.sessions import SessionConfig, SessionManager
from bridge_image.names import DEFAULT_IMAGE
from mcp import ClientSession, StdioServerParameters, stdio_client

IMAGE = os.environ.get("MCP_BRIDGE_IMAGE", DEFAULT_IMAGE)

SANDBOX_SEQUENTIAL = """
import time
_tool = mcp_servers[{server!r}][{tool!r}]
await _tool(**{args!r})  # warm
_t = time.perf_counter()
for _ in range({n}):
    await _tool(**{args!r})
(time.perf_counter() - _t) / {n}
"""

SANDBOX_PARALLEL = """
import asyncio, time
_tool = mcp_servers[{server!r}][{tool!r}]
_t = time.perf_counter()
for _ in range({n}):
    await _tool(**{args!r})
_seq = time.perf_counter() - _t
_t = time.perf_counter()
await asyncio.gather(*[_tool(**{args!r}) for _ in range({n})])
(_seq, time.perf_counter() - _t)
"""


def bar(label: str, value: float, scale: float, unit: str) -> None:
    width = max(1, round(40 * value / scale)) if scale else 1
    print(f"  {label:<28} {'█' * width:<40} {value:9.3f} {unit}")


async def direct_mean(spec: ServerSpec, tool: str, args: dict[str, Any], n: int) -> float:
    assert spec.command is not None
    params = StdioServerParameters(command=spec.command, args=list(spec.args))
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 (opening /dev/null never blocks)
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool(tool, args)  # warm
            start = time.perf_counter()
            for _ in range(n):
                await session.call_tool(tool, args)
            return (time.perf_counter() - start) / n


async def in_sandbox(manager: SessionManager, code: str) -> Any:
    result = await manager.execute(code, timeout=600)
    if not result.ok or result.value is None:
        raise SystemExit(f"sandbox code failed: {result.status} {result.error} {result.stderr}")
    return ast.literal_eval(result.value)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=100)
    opts = parser.parse_args()
    targets = echo_targets()
    specs = [spec for spec, _, _ in targets]

    with tempfile.TemporaryDirectory(prefix="bench-sandbox-calls-") as tmp:
        state = Path(tmp)
        config = SessionConfig(image=IMAGE, pool_size=0, max_timeout=900)
        async with (
            open_proxy(specs) as gateway,
            SessionManager(
                config,
                runtime=lambda: detect_runtime(None, state_dir=state),
                gateway=gateway,
                state_dir=state,
            ) as manager,
        ):
            for spec, tool, args in targets:
                n = opts.calls
                print(f"\n{spec.name}: {n} sequential {tool!r} calls")
                sandbox = await in_sandbox(
                    manager,
                    SANDBOX_SEQUENTIAL.format(server=spec.name, tool=tool, args=args, n=n),
                )
                direct = await direct_mean(spec, tool, args, n)
                scale = max(sandbox, direct) * 1e3
                bar("host SDK client, direct", direct * 1e3, scale, "ms/call")
                bar("sandbox code via bridge", sandbox * 1e3, scale, "ms/call")
                print(f"  ratio sandbox / direct: {sandbox / direct:.2f}x (goal <= 1.3x)")

                parallel_cases = [(tool, args)]
                if spec.name == "probe":
                    parallel_cases.append(("sleep", {"seconds": 0.05}))
                for p_tool, p_args in parallel_cases:
                    seq, par = await in_sandbox(
                        manager,
                        SANDBOX_PARALLEL.format(
                            server=spec.name, tool=p_tool, args=p_args, n=opts.parallel
                        ),
                    )
                    print(f"  {opts.parallel} x {p_tool!r} {p_args} from sandbox code:")
                    bar("sequential", seq * 1e3, seq * 1e3, "ms")
                    bar("asyncio.gather", par * 1e3, seq * 1e3, "ms")
                    print(f"  parallel speed-up: {seq / par:.1f}x (goal >= 5x)")


if __name__ == "__main__":
    anyio.run(main)
