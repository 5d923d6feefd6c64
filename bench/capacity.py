"""Capacity figures for planning a fleet (docs/scale-out.md): what one bridge core serves and
what one idle sandbox holds.

    hatch run tests:python bench/capacity.py [--calls 500] [--runs 200]

Starts the real bridge over stdio (the MCP SDK client, ``$MCP_BRIDGE_IMAGE``, runtime
auto-detection, or the ``MCP_BRIDGE_RUNTIME_*`` settings in the environment) proxying the real
``server-everything`` (``scripts/prepare-servers``), then measures:

* proxied calls per second per bridge core: sandbox code awaiting ``echo`` ``--calls`` times,
  divided by the CPU seconds the bridge process spent (user + system, from /proc; the upstream
  server's own CPU is not counted);
* ``run_python`` calls per second per bridge core: ``--runs`` warm ``1+1`` calls, likewise;
* memory of one idle sandbox: the container's cgroup usage (``podman stats``) and its conmon's
  resident memory on the engine's machine, after a call, with nothing running.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _scale import bridge_pid  # bench/ is on sys.path when run as a script
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def everything() -> str:
    env_file = REPO / ".cache" / "servers" / "env"
    for line in env_file.read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if name == "MCP_SERVER_EVERYTHING":
            return shlex.split(value)[0]
    raise SystemExit("run scripts/prepare-servers first (server-everything)")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def idle_memory(pid: int) -> tuple[float, float]:
    """(cgroup MiB, conmon RSS MiB) of the bridge's one sandbox."""
    listed = subprocess.run(
        ["podman", "ps", "--format", "json", "--filter", "label=io.github.mcp-code-execution-mode"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    owner = "io.github.mcp-code-execution-mode.owner"
    names = [
        c["Names"][0]
        for c in json.loads(listed.stdout or "[]")
        if str((c.get("Labels") or {}).get(owner, "")).startswith(f"{pid}:")
    ]
    name = names[0]
    stats = subprocess.run(
        ["podman", "stats", "--no-stream", "--format", "json", name],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    usage = json.loads(stats.stdout)[0]["mem_usage"].split("/")[0].strip()
    value, unit = float(usage[:-2]), usage[-2:]
    cgroup_mib = value * {"kB": 1 / 1024, "MB": 1000**2 / 1024**2, "GB": 1000**3 / 1024**2}[unit]
    conmon = subprocess.run(
        ["podman", "inspect", "--format", "{{.State.ConmonPid}}", name],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    rss_kib = next(
        int(line.split()[1])
        for line in Path(f"/proc/{conmon}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    return cgroup_mib, rss_kib / 1024


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        work = Path(tmp)
        config = work / "servers.json"
        config.write_text(
            json.dumps({"mcpServers": {"everything": {"command": everything(), "args": ["stdio"]}}})
        )
        env = {
            **os.environ,
            "MCP_BRIDGE_CONFIG": str(config),
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_POOL_SIZE": "0",
        }
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "mcp_code_execution_mode", "--state-dir", str(work / "state")],
            env=env,
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            pid = bridge_pid(work / "state")
            loop = (
                f"for _ in range({args.calls}):\n"
                "    await mcp_servers['everything'].echo(message='x')\n"
            )
            await session.call_tool("run_python", {"code": loop})  # warm-up (server start)
            cpu, wall = cpu_seconds(pid), time.perf_counter()
            await session.call_tool("run_python", {"code": loop})
            proxied_cpu, proxied_wall = cpu_seconds(pid) - cpu, time.perf_counter() - wall
            cpu, wall = cpu_seconds(pid), time.perf_counter()
            for _ in range(args.runs):
                await session.call_tool("run_python", {"code": "1+1"})
            runs_cpu, runs_wall = cpu_seconds(pid) - cpu, time.perf_counter() - wall
            cgroup_mib, conmon_mib = await anyio.to_thread.run_sync(idle_memory, pid)
    print(f"proxied calls: {args.calls / proxied_cpu:,.0f}/s per bridge core "
          f"({proxied_cpu * 1e3 / args.calls:.2f} ms CPU each; {args.calls / proxied_wall:,.0f}/s "
          "wall, one sandbox)")  # fmt: skip
    print(
        f"run_python 1+1: {args.runs / runs_cpu:,.0f}/s per bridge core "
        f"({runs_cpu * 1e3 / args.runs:.2f} ms CPU each; {args.runs / runs_wall:,.0f}/s wall)"
    )
    print(f"idle sandbox: {cgroup_mib:.1f} MiB in its cgroup + {conmon_mib:.1f} MiB conmon RSS")


if __name__ == "__main__":
    anyio.run(main)
