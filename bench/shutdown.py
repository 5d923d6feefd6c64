"""Bridge shutdown with many sessions, through the real MCP SDK stdio client and real podman.

For each session count (default 8, 32 and 128) the bridge is started, that many sessions are
opened (a sandbox each, plus the warm pool), and the client is closed the way the SDK closes
it: stdin closed, SIGTERM 2 s later if the bridge still runs, SIGKILL 2 s after that. Printed
side by side:

* shutdown: stdin closed -> bridge process gone (goal: <= 1.5 s at 128);
* ended by: itself, or the SIGTERM / SIGKILL it took;
* containers of the bridge still listed when it was gone, and the seconds until podman listed
  none (auto-removal works on after the bridge);
* containers left once podman had ``--removal-bound`` seconds.

    hatch run tests:python bench/shutdown.py [--counts 8,32,128] [--removal-bound 120]

Uses ``$MCP_BRIDGE_IMAGE`` (or the default image). The bridge runs under
``integration-tests/servers/unreaped_parent.py`` and this process adopts it (child subreaper):
the dead bridge stays an unreaped zombie while its containers are counted, so other bridges on
the host do not sweep them up as leftovers meanwhile, and its exit status tells a kill from a
clean exit. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from bridge_core._ownership import process_start_time
from bridge_core.runtime.base import OWNER_LABEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import PROCESS_TERMINATION_TIMEOUT, stdio_client

REPO = Path(__file__).resolve().parents[1]
UNREAPED_PARENT = REPO / "integration-tests" / "servers" / "unreaped_parent.py"
STARTS_AT_ONCE = 4
POLL = 0.2
_PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Figures:
    sessions: int
    open_seconds: float
    shutdown: float
    ended_by: str
    listed_at_exit: int
    gone_after: float | None
    left: int


def _subreaper(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _bridge_pid(state_dir: Path) -> int:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:3] == [b"-m", b"mcp_code_execution_mode"] and str(state_dir).encode() in argv:
            return int(entry.name)
    raise SystemExit(f"no bridge runs with state dir {state_dir}")


async def _listed(owner: str) -> int:
    found = await anyio.run_process(
        ["podman", "ps", "--all", "--quiet", f"--filter=label={OWNER_LABEL}={owner}"]
    )
    return len(found.stdout.split())


async def _record_exit(pidfd: int, exited: dict[str, float]) -> None:
    """Record when the process ends (its pidfd turns readable, child of ours or not)."""
    try:
        await anyio.wait_readable(pidfd)
        exited["at"] = time.perf_counter()
    finally:
        os.close(pidfd)


async def measure(work: Path, sessions: int, removal_bound: float) -> Figures:
    config = work / "servers.json"
    await anyio.Path(work).mkdir(parents=True)
    await anyio.Path(config).write_text(json.dumps({"mcpServers": {}}))
    state_dir = work / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    env.update(
        {
            "MCP_BRIDGE_CONFIG": str(config),
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_MAX_SESSIONS": str(sessions + 8),
            "MCP_BRIDGE_LOG_LEVEL": "warning",
        }
    )
    if image := os.environ.get("MCP_BRIDGE_IMAGE"):
        env["MCP_BRIDGE_IMAGE"] = image
    bridge = [sys.executable, "-m", "mcp_code_execution_mode", "--state-dir", str(state_dir)]
    params = StdioServerParameters(
        command=sys.executable, args=[str(UNREAPED_PARENT), *bridge], env=env
    )
    exited: dict[str, float] = {}
    async with (
        anyio.create_task_group() as watch,
        stdio_client(params) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        pid = _bridge_pid(state_dir)
        owner = f"{pid}:{process_start_time(pid)}"
        limiter = anyio.CapacityLimiter(STARTS_AT_ONCE)

        async def open_session(index: int) -> None:
            async with limiter:
                result = await client.call_tool(
                    "run_python",
                    {"code": "1", "session": f"s{index}"},
                    read_timeout_seconds=300,
                )
            if result.is_error:
                raise SystemExit(f"run_python failed: {result.content}")

        began = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for index in range(sessions):
                tasks.start_soon(open_session, index)
        opened = time.perf_counter() - began
        watch.start_soon(_record_exit, os.pidfd_open(pid), exited)
        closing = time.perf_counter()
        # Leaving this block runs the SDK's shutdown sequence.
    # Adopted once its stand-in parent exited; reaped only once its containers are counted.
    ended = await anyio.to_thread.run_sync(os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    assert ended is not None
    gone = exited.get("at", time.perf_counter())
    if ended.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        ended_by = signal.Signals(ended.si_status).name
    elif gone - closing > PROCESS_TERMINATION_TIMEOUT:
        ended_by = "SIGTERM"
    else:
        ended_by = "itself"
    asked = time.perf_counter()
    listed = left = await _listed(owner)
    with anyio.move_on_after(removal_bound):
        while left:
            await anyio.sleep(POLL)
            asked = time.perf_counter()
            left = await _listed(owner)
    # From the bridge's end to the first listing that showed none (asked before it ran).
    gone_after = None if left else max(0.0, asked - gone)
    await anyio.to_thread.run_sync(os.waitpid, pid, 0)
    return Figures(sessions, opened, gone - closing, ended_by, listed, gone_after, left)


async def main(counts: list[int], removal_bound: float) -> None:
    _subreaper(True)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-shutdown-") as tmp:
            for count in counts:
                figures = await measure(Path(tmp) / f"n{count}", count, removal_bound)
                print(
                    f"{count} sessions opened in {figures.open_seconds:.1f} s; "
                    f"shutdown {figures.shutdown:.2f} s",
                    flush=True,
                )
                results.append(figures)
    finally:
        _subreaper(False)
    print()
    width = 12
    rows = [
        ("sessions", lambda f: str(f.sessions)),
        ("shutdown", lambda f: f"{f.shutdown:.2f} s"),
        ("ended by", lambda f: f.ended_by),
        ("listed at exit", lambda f: str(f.listed_at_exit)),
        (
            "all removed",
            lambda f: "never" if f.gone_after is None else f"+{f.gone_after:.1f} s",
        ),
        (f"left +{removal_bound:g} s", lambda f: str(f.left)),
    ]
    for label, cell in rows:
        print(f"{label:<16}" + "".join(f"{cell(f):>{width}}" for f in results))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="8,32,128", help="session counts, comma-separated")
    parser.add_argument(
        "--removal-bound",
        type=float,
        default=120.0,
        help="seconds podman gets to remove the containers after the bridge is gone",
    )
    args = parser.parse_args()
    anyio.run(main, [int(n) for n in args.counts.split(",")], args.removal_bound)
