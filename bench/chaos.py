"""Seeded chaos run: many ``run_python`` executions through a real MCP client, faults injected.

The bridge runs as a subprocess over stdio with the real container runtime, proxying the probe
server (``integration-tests/servers/probe_server.py``) and, when ``scripts/prepare-servers`` has
installed it, ``server-everything``. Executions are spread over 8 sessions that run
concurrently; a seeded plan mixes plain computations and tool calls with upstream crashes and
hangs, ``podman kill`` of sandbox containers from outside, and client-side cancels.

    hatch run chaos:run [--executions 1000] [--sessions 8] [--seed 7]

Prints the figures and exits 1 when any must-be-zero figure is not zero: wrong answers, bridge
crashes, calls that took longer than their timeout + 2 s, containers or processes left behind.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from _chaos_host import (
    bridge_pid,
    kill_container,
    marked_processes,
    owned_containers,
    peak_rss_kib,
)
from _chaos_plan import Outcome, Step, describe, judge, plan
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "integration-tests" / "servers" / "probe_server.py"
SERVERS_ENV = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"
SLACK = 2.0
"""A call may take its timeout plus this long (the issue's bound) before it counts as late."""
SHUTDOWN_TIMEOUT = 60.0
"""How long the bridge gets to exit and clean up after the client closes stdin."""
REMOVAL_TIMEOUT = 120.0
"""How long podman gets to auto-remove the sandboxes the bridge killed on its way out."""


@dataclass
class Tally:
    """Figures of the run."""

    answered: int = 0
    cancelled: int = 0
    wrong: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    transport_errors: int = 0
    kills: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    tool_errors: Counter[str] = field(default_factory=Counter)
    kill_windows: list[list[float]] = field(default_factory=list)
    """(start, end) of every ``podman kill``, to excuse executions that were hit."""


def _everything_command() -> str | None:
    if not SERVERS_ENV.is_file():
        return None
    for line in SERVERS_ENV.read_text().splitlines():
        if line.startswith("export MCP_SERVER_EVERYTHING="):
            path = shlex.split(line.partition("=")[2])[0]
            return path if Path(path).exists() else None
    return None


def _servers(marker: str) -> dict[str, Any]:
    env = {"CHAOS_RUN_MARKER": marker}
    servers: dict[str, Any] = {
        "probe": {"command": sys.executable, "args": [str(PROBE)], "env": env},
    }
    if everything := _everything_command():
        servers["everything"] = {"command": everything, "args": ["stdio"], "env": env}
    return servers


@asynccontextmanager
async def bridge(work: Path, servers: dict[str, Any]) -> AsyncIterator[ClientSession]:
    config = work / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    if image := os.environ.get("MCP_BRIDGE_IMAGE"):
        env["MCP_BRIDGE_IMAGE"] = image
    env.update(
        {
            "MCP_BRIDGE_CONFIG": str(config),
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_LOG_LEVEL": "warning",
            "MCP_BRIDGE_LOG_FILE": str(work / "bridge.log"),
            "MCP_BRIDGE_CALL_TIMEOUT": "10s",
        }
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(work / "state")],
        env=env,
    )
    with (work / "bridge.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(60):
                await session.initialize()
            yield session


async def _kill_one(pid: int, tally: Tally, rng: random.Random) -> None:
    running = await anyio.to_thread.run_sync(owned_containers, pid)
    names = sorted(name for name, state in running.items() if state == "running")
    if not names:
        return
    # The window opens before the kill is sent: the victim's answer can arrive before podman
    # returns, and it must already be excused then.
    window = [time.monotonic(), math.inf]
    tally.kill_windows.append(window)
    killed = await anyio.to_thread.run_sync(kill_container, rng.choice(names))
    window[1] = time.monotonic()
    tally.kills += killed


async def execute(
    session: ClientSession, step: Step, pid: int, tally: Tally, rng: random.Random
) -> None:
    arguments: dict[str, Any] = {"code": step.code, "session": step.session}
    read_timeout = step.timeout + 30.0
    if step.kind != "cancel":
        arguments["timeout"] = step.timeout
    else:
        read_timeout = step.timeout  # the SDK cancels the request when its read timeout passes
    started = time.monotonic()
    outcome = Outcome(status="transport")
    async with anyio.create_task_group() as faults:
        if step.kind == "kill":

            async def kill_later() -> None:
                await anyio.sleep(step.fault_delay)
                await _kill_one(pid, tally, rng)

            faults.start_soon(kill_later)
        try:
            result = await session.call_tool(
                "run_python", arguments, read_timeout_seconds=read_timeout
            )
            outcome = describe(result)
        except MCPError as exc:
            if step.kind == "cancel" and exc.error.code == -32001:
                outcome = Outcome(status="cancelled")
            else:
                outcome = Outcome(status="transport", error_type=f"{exc.error.code} {exc}")
    ended = time.monotonic()
    outcome.elapsed = ended - started
    outcome.killed_meanwhile = any(s <= ended and e >= started for s, e in tally.kill_windows)
    record(tally, step, outcome)


def record(tally: Tally, step: Step, outcome: Outcome) -> None:
    tally.kinds[step.kind] += 1
    tally.statuses[outcome.status] += 1
    if outcome.status == "cancelled":
        tally.cancelled += 1
    elif outcome.status == "transport":
        tally.transport_errors += 1
    else:
        tally.answered += 1
    for line in outcome.stdout.splitlines():
        if line.startswith("tool-error "):
            tally.tool_errors[line.removeprefix("tool-error ")] += 1
    if problem := judge(step, outcome):
        tally.wrong.append(f"#{step.index} {step.kind} in {step.session}: {problem}")
    # The timeout is the code's time: a sandbox start before it is bounded on its own.
    if outcome.elapsed - outcome.sandbox_start > step.timeout + SLACK:
        tally.late.append(
            f"#{step.index} {step.kind}: {outcome.elapsed:.1f} s for a {step.timeout:g} s timeout"
            f" ({outcome.sandbox_start:.1f} s of it starting a sandbox)"
        )


async def run(args: argparse.Namespace) -> int:
    marker = uuid.uuid4().hex
    servers = _servers(marker)
    steps = plan(args.seed, args.executions, args.sessions, tuple(servers))
    tally = Tally()
    rng = random.Random(args.seed + 1)
    peak = 0
    pid = None
    crashed_bridge = False
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        try:
            async with bridge(work, servers) as session:
                pid = bridge_pid(work / "state")
                assert pid is not None, "the bridge process was not found"
                async with anyio.create_task_group() as tg:
                    for lane in range(args.sessions):
                        lane_steps = steps[lane :: args.sessions]
                        tg.start_soon(_lane, session, lane_steps, pid, tally, rng)
                peak = peak_rss_kib(pid)
                crashed_bridge = bridge_pid(work / "state") != pid
        except Exception as exc:  # the report must still be printed
            print(f"the run ended early: {exc!r}", file=sys.stderr)
            crashed_bridge = True
        elapsed = time.monotonic() - started
        left_containers, left_processes = await _leftovers(work, pid, marker)
        log_tail = (work / "bridge.stderr").read_text(errors="replace")[-2000:]
    _report(args, tally, elapsed, peak, crashed_bridge, left_containers, left_processes)
    failed = bool(
        tally.wrong
        or tally.late
        or crashed_bridge
        or tally.transport_errors
        or left_containers
        or left_processes
    )
    if failed and log_tail.strip():
        print("\nbridge stderr (tail):\n" + log_tail)
    return 1 if failed else 0


async def _lane(
    session: ClientSession, steps: list[Step], pid: int, tally: Tally, rng: random.Random
) -> None:
    for step in steps:
        await execute(session, step, pid, tally, rng)


async def _leftovers(work: Path, pid: int | None, marker: str) -> tuple[list[str], list[int]]:
    """Once the bridge exited: its containers and the upstream processes still alive."""
    with anyio.move_on_after(SHUTDOWN_TIMEOUT):
        # The bridge is no child of ours once the SDK let go of it: no event to wait on.
        while bridge_pid(work / "state") is not None:  # noqa: ASYNC110
            await anyio.sleep(0.1)
    containers = list(await anyio.to_thread.run_sync(owned_containers, pid)) if pid else []
    with anyio.move_on_after(REMOVAL_TIMEOUT):
        # The bridge killed them on its way out; podman's auto-removal deletes them after it.
        while containers:
            await anyio.sleep(0.2)
            containers = list(await anyio.to_thread.run_sync(owned_containers, pid))
    return containers, marked_processes(marker)


def _report(
    args: argparse.Namespace,
    tally: Tally,
    elapsed: float,
    peak_kib: int,
    crashed_bridge: bool,
    left_containers: list[str],
    left_processes: list[int],
) -> None:
    total = args.executions
    print(f"chaos run: seed {args.seed}, {total} executions over {args.sessions} sessions")
    print(f"  wall time: {elapsed:.1f} s")
    print("  kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(tally.kinds.items())))
    print("  statuses: " + ", ".join(f"{k} {n}" for k, n in sorted(tally.statuses.items())))
    print(f"  containers killed from outside: {tally.kills}")
    if tally.tool_errors:
        print("  tool calls ended by a clear error: " + ", ".join(
            f"{k} {n}" for k, n in sorted(tally.tool_errors.items())
        ))  # fmt: skip
    print(f"executions answered: {tally.answered} (+ {tally.cancelled} cancelled by the client)")
    print(f"wrong answers: {len(tally.wrong)}")
    print(f"calls without an answer (transport errors): {tally.transport_errors}")
    print(f"bridge crashes: {int(crashed_bridge)}")
    print(f"calls over timeout + {SLACK:g} s: {len(tally.late)}")
    print(f"containers left afterwards: {len(left_containers)}")
    print(f"processes left afterwards: {len(left_processes)}")
    print(f"peak bridge RSS: {peak_kib / 1024:.1f} MiB")
    for line in (tally.wrong + tally.late)[:20]:
        print("  ! " + line)
    if left_containers:
        print("  ! containers: " + ", ".join(left_containers))
    if left_processes:
        print("  ! processes: " + ", ".join(map(str, left_processes)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    sys.exit(anyio.run(run, parser.parse_args()))
