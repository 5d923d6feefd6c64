"""What the check before running adds to a warm ``run_python``, end to end, side by side.

Three bridges (``[check] mode = "off"``, ``"nested"`` and ``"all"``) with the real
server-everything, one real MCP stdio client each; the same ordinary cell (20 lines: pandas, two
nested calls) is called warm on each, in turn, N times. Prints p50/p99 of each and what each
check adds to the p50 of ``off`` (the goal: at most 150 ms). ``nested`` runs the type check (ty)
beside the cell, ``all`` before it.

    hatch run tests:python bench/check_cost.py [--calls 40]

Needs the servers of ``scripts/prepare-servers`` (``.cache/servers/env``) and the sandbox image
(``$MCP_BRIDGE_IMAGE`` or the default).
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

REPO = Path(__file__).resolve().parents[1]
SERVERS_ENV = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"

CELL = """\
import pandas as pd
from mcp import mcp_servers

everything = mcp_servers["everything"]
first = await everything.echo(message="alpha")
second = await everything.get_sum(a=2, b=3)
rows = [
    {"name": "alpha", "score": 3},
    {"name": "beta", "score": 5},
    {"name": "gamma", "score": 8},
]
frame = pd.DataFrame(rows)
frame["double"] = frame["score"] * 2
best = frame.sort_values("score", ascending=False).head(2)
summary = {
    "echo": str(first)[:20],
    "sum": str(second)[:20],
    "best": best["name"].tolist(),
}
print(summary)
"""


def _everything() -> str:
    for line in SERVERS_ENV.read_text(encoding="utf-8").splitlines():
        if line.startswith("export MCP_SERVER_EVERYTHING="):
            return line.split("=", 1)[1]
    raise SystemExit(f"no MCP_SERVER_EVERYTHING in {SERVERS_ENV}: run scripts/prepare-servers")


def _write_files(work: Path, config: Path, mode: str) -> None:
    work.mkdir(parents=True, exist_ok=True)
    servers = {"everything": {"command": _everything(), "args": ["stdio"]}}
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    (work / "bridge.toml").write_text(f'[check]\nmode = "{mode}"\n', encoding="utf-8")


@asynccontextmanager
async def bridge(work: Path, mode: str) -> AsyncIterator[ClientSession]:
    config = work / "servers.json"
    await anyio.to_thread.run_sync(_write_files, work, config, mode)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    if image := os.environ.get("MCP_BRIDGE_IMAGE"):
        env["MCP_BRIDGE_IMAGE"] = image
    env["MCP_BRIDGE_CONFIG"] = str(config)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(work / "state")],
        env=env,
        cwd=str(work),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession) -> float:
    started = time.perf_counter()
    result = await session.call_tool("run_python", {"code": CELL}, read_timeout_seconds=120)
    elapsed = time.perf_counter() - started
    if result.is_error or (result.structured_content or {}).get("notices"):
        raise SystemExit(f"the cell did not run cleanly: {result.content}")
    return elapsed


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


MODES = ("off", "nested", "all")
"""off: no check; nested: the literal nested calls block, ty runs beside the cell (warnings);
all: the literal nested calls and ty both run before the cell, and a type error blocks it."""


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="check-cost-") as scratch:
        root = Path(scratch)
        async with (
            bridge(root / "off", "off") as off,
            bridge(root / "nested", "nested") as nested,
            bridge(root / "all", "all") as every,
        ):
            sessions = {"off": off, "nested": nested, "all": every}
            for session in sessions.values():  # warm: sandbox, imports, the server's tool list
                for _ in range(3):
                    await call(session)
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            for _ in range(calls):  # alternately, so that load beside the bench hits all alike
                for mode in MODES:
                    times[mode].append(await call(sessions[mode]))
    print(f"warm run_python, 20-line pandas cell with two nested calls, {calls} calls each:")
    off_p50, _ = _ms(times["off"])
    for mode in MODES:
        p50, p99 = _ms(times[mode])
        added = "" if mode == "off" else f", adds {p50 - off_p50:+.1f} ms at p50 (goal: <= 150)"
        print(f"  check {mode + ':':7} p50 {p50:.1f} ms, p99 {p99:.1f} ms{added}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    anyio.run(main, parser.parse_args().calls)
