"""Each latency and size figure of the bridge next to its floor, measured in the same run.

The floor of a call is the same real server reached by a plain MCP SDK client (the Node
``server-everything`` ``echo``); the floor of start-up is a plain SDK server (``mcp-server-time``
when ``scripts/prepare-servers`` installed it, and a minimal low-level SDK server script run by
this Python); the floor of a result is the output cap. Bridge and floor are measured in
alternating blocks, so that the load of a shared machine weighs on both alike.

    hatch run tests:python bench/floor.py [--calls 1000] [--starts 5] [--json FILE]
                                          [--baseline CHECKOUT [--baseline-image IMAGE]]
                                          [--without-saving]

Figures (all through the real MCP stdio client of the SDK, real podman, real servers):

- warm ``run_python("1+1")`` p50 vs a direct ``echo`` call p50 (goal <= 2x);
- the bridge's CPU per warm call, from /proc (goal <= 0.35 ms);
- ``echo`` called from sandbox code (timed inside the sandbox) p50 vs direct (goal <= 1.3x);
- bridge spawn + ``initialize`` vs a plain SDK server's (goal <= 1.1x);
- bytes of the result of ``print('y'*10_000_000)`` vs the output cap (goal <= cap + 1 KiB).

``--baseline CHECKOUT`` measures a second bridge, run from the packages of another checkout (the
code before a change), in the same run and the same alternating blocks: on a shared machine that
is the only before/after comparison worth reading. ``--json FILE`` writes the figures for
``bench/floor_chart.py`` (the before/after bar chart). Asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import fcntl
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from bridge_core.sessions.types import OUTPUT_CAP  # the default MCP_BRIDGE_OUTPUT_CAP
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
SERVERS_ENV = Path(os.environ.get("MCP_TEST_SERVERS_DIR", REPO / ".cache" / "servers")) / "env"

BLOCK = 100  # calls per alternating block
TICK = os.sysconf("SC_CLK_TCK")

MINIMAL_SERVER = '''
"""A plain low-level SDK server with one tool: the start-up floor in this very environment."""
import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[])


async def main():
    server = Server("minimal", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
'''

SANDBOX_ECHO = """
import time
_echo = mcp_servers["everything"].echo
await _echo(message="ping")
_samples = []
for _ in range({n}):
    _t = time.perf_counter()
    await _echo(message="ping")
    _samples.append(time.perf_counter() - _t)
_samples
"""


def server_paths() -> dict[str, str]:
    if not SERVERS_ENV.is_file():
        sys.exit(f"{SERVERS_ENV} is missing: run scripts/prepare-servers first")
    values = {}
    for line in SERVERS_ENV.read_text().splitlines():
        if line.startswith("export "):
            name, _, raw = line.removeprefix("export ").partition("=")
            values[name] = shlex.split(raw)[0]
    return values


@asynccontextmanager
async def connect(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 (opening /dev/null never blocks)
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def bridge_params(
    work: Path, everything: str, code: Path | None = None, image: str | None = None
) -> StdioServerParameters:
    """The bridge proxying ``everything``; ``code``: run the packages of that checkout instead;
    ``image``: with that sandbox image."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "servers.json"
    config.write_text(
        json.dumps({"mcpServers": {"everything": {"command": everything, "args": ["stdio"]}}})
    )
    env = {
        **os.environ,
        "MCP_BRIDGE_CONFIG": str(config),
        "MCP_BRIDGE_DISCOVER": "false",
        "MCP_BRIDGE_STATE_DIR": str(work / "state"),
    }
    if image is not None:
        env["MCP_BRIDGE_IMAGE"] = image
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in sorted(code.glob("packages/*/src")))
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_code_execution_mode"], env=env
    )


def compile_sources(checkout: Path) -> None:
    """Byte-compile the bridge's packages of ``checkout``, as an install has them.

    The floors start from installed packages, whose bytecode the installer wrote; the bridge runs
    from the checkout's sources, whose bytecode only an import writes, and not at all under
    ``PYTHONDONTWRITEBYTECODE`` (set on some machines): its start-ups would then compile some
    forty modules each time (measured 1.17-1.21x against 1.03x with the bytecode there), a cost
    no installed bridge pays after its first start."""
    for src in sorted(checkout.glob("packages/*/src")):
        if not compileall.compile_dir(src, quiet=1):
            raise SystemExit(f"cannot byte-compile {src}: see the errors above")


def hold_session_store(work: Path) -> int:
    """Take the bridge's default session store (``<state>/sessions/saved/default``) before the
    bridge does: a store held by another process makes the bridge keep sessions in memory only,
    so no snapshot follows an execution (what ``--without-saving`` measures). The lock lasts as
    long as the returned descriptor stays open (this process's life)."""
    state = work / "state"
    store = state / "sessions" / "saved" / "default"
    store.mkdir(parents=True, exist_ok=True)
    for directory in (state, state / "sessions", store.parent, store):
        directory.chmod(0o700)  # the bridge refuses a state directory others can read
    fd = os.open(store / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def bridge_pid(known: set[int]) -> int:
    """A bridge this process spawned (a direct child running the server module) not in
    ``known``."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in known:
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"mcp_code_execution_mode" in cmdline:
            return int(entry.name)
    raise SystemExit("the bridge process was not found among this process's children")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


async def timed_block(n: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def run_code(bridge: ClientSession, code: str) -> Any:
    result = await bridge.call_tool("run_python", {"code": code}, read_timeout_seconds=600)
    if result.is_error:
        raise SystemExit(f"run_python failed: {result.content}")
    return result


async def start_once(params: StdioServerParameters) -> float:
    start = time.perf_counter()
    async with connect(params):
        return time.perf_counter() - start


async def measure(opts: argparse.Namespace) -> dict[str, Any]:
    paths = server_paths()
    everything = paths["MCP_SERVER_EVERYTHING"]
    direct_params = StdioServerParameters(command=everything, args=["stdio"])
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
        work = Path(tmp)
        bridges = {"bridge": bridge_params(work / "bridge", everything)}
        if opts.without_saving:
            for name in ("bridge", "baseline"):
                hold_session_store(work / name)
        if opts.baseline is not None:
            bridges["baseline"] = bridge_params(
                work / "baseline", everything, opts.baseline, opts.baseline_image
            )

        # --- start-up: spawn -> initialize answered, alternating -------------------------------
        for checkout in (REPO, opts.baseline):
            if checkout is not None:
                compile_sources(checkout)
        minimal = work / "minimal_server.py"
        minimal.write_text(MINIMAL_SERVER)
        floors = {
            "minimal SDK server": StdioServerParameters(command=sys.executable, args=[str(minimal)])
        }
        if "MCP_SERVER_TIME" in paths:
            floors["mcp-server-time"] = StdioServerParameters(
                command=paths["MCP_SERVER_TIME"], args=["--local-timezone", "UTC"]
            )
        contenders = {**bridges, **floors}
        starts: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(opts.starts):
            for name, params in contenders.items():
                starts[name].append(await start_once(params))
        figures["start"] = {name: statistics.median(s) for name, s in starts.items()}

        async with AsyncExitStack() as stack:
            sessions: dict[str, ClientSession] = {}
            pids: dict[str, int] = {}
            for name, params in bridges.items():
                sessions[name] = await stack.enter_async_context(connect(params))
                pids[name] = bridge_pid(set(pids.values()))
                await run_code(sessions[name], "1+1")  # the session's sandbox is up
            direct = await stack.enter_async_context(connect(direct_params))
            await direct.call_tool("echo", {"message": "ping"})

            async def echo() -> object:
                return await direct.call_tool("echo", {"message": "ping"})

            # --- warm run_python vs direct echo, alternating blocks ------------------------------
            warm: dict[str, list[float]] = {name: [] for name in [*bridges, "floor"]}
            cpu = dict.fromkeys(bridges, 0.0)
            for _ in range(max(1, opts.calls // BLOCK)):
                for name, session in sessions.items():
                    before = cpu_seconds(pids[name])
                    warm[name] += await timed_block(BLOCK, partial(run_code, session, "1+1"))
                    cpu[name] += cpu_seconds(pids[name]) - before
                warm["floor"] += await timed_block(BLOCK, echo)
            figures["warm"] = {name: statistics.median(s) for name, s in warm.items()}
            figures["cpu_per_call"] = {name: cpu[name] / len(warm[name]) for name in bridges}

            # --- echo from sandbox code vs direct, alternating blocks ----------------------------
            proxied: dict[str, list[float]] = {name: [] for name in [*bridges, "floor"]}
            for _ in range(max(1, opts.calls // BLOCK)):
                for name, session in sessions.items():
                    result = await run_code(session, SANDBOX_ECHO.format(n=BLOCK))
                    proxied[name] += ast.literal_eval(result.content[0].text)
                proxied["floor"] += await timed_block(BLOCK, echo)
            figures["proxied"] = {name: statistics.median(s) for name, s in proxied.items()}

            # --- result size -------------------------------------------------------------------
            figures["result_bytes"] = {"floor": OUTPUT_CAP}
            for name, session in sessions.items():
                result = await run_code(session, "print('y' * 10_000_000)")
                size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode())
                figures["result_bytes"][name] = size
    return figures


def report(figures: dict[str, Any]) -> None:
    start = dict(figures["start"])
    floor_name = "mcp-server-time" if "mcp-server-time" in start else "minimal SDK server"
    start["floor"] = start[floor_name]
    rows = [
        ("warm run_python('1+1') p50", figures["warm"], "direct echo p50", "ms", 2.0),
        ("echo from sandbox code p50", figures["proxied"], "direct echo p50", "ms", 1.3),
        ("spawn + initialize", start, floor_name, "ms", 1.1),
        (
            "result of print('y'*10_000_000)",
            figures["result_bytes"],
            "output cap",
            "B",
            (OUTPUT_CAP + 1024) / OUTPUT_CAP,
        ),
    ]
    names = [name for name in ("baseline", "bridge") if name in figures["warm"]]
    print(f"{'figure':<34} {'':<9} {'value':>12} {'floor':>12}  {'ratio':>6}  goal    floor is")
    for label, pair, floor_label, unit, goal in rows:
        scale = 1e3 if unit == "ms" else 1
        floor = pair["floor"] * scale
        for name in names:
            value = pair[name] * scale
            ratio = value / floor
            mark = "ok" if ratio <= goal else "over"
            fmt = "{:>9.2f} ms" if unit == "ms" else "{:>10,.0f} B"
            print(
                f"{label:<34} {name:<9} {fmt.format(value)} {fmt.format(floor)}  {ratio:5.2f}x  "
                f"<={goal:.2f}x {mark:<4} {floor_label}"
            )
    for name in names:
        cpu = figures["cpu_per_call"][name] * 1e3
        print(f"{'bridge CPU per warm call':<34} {name:<9} {cpu:>9.3f} ms   goal <= 0.35 ms")
    others = ", ".join(f"{name} {value * 1e3:.0f} ms" for name, value in figures["start"].items())
    print(f"start-up medians: {others}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000, help="warm and proxied calls each")
    parser.add_argument("--starts", type=int, default=5, help="start-ups of each server")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of the code to compare with (e.g. `git worktree add DIR main`): its "
        "bridge is measured in the same run, in the same alternating blocks",
    )
    parser.add_argument(
        "--baseline-image",
        help="the sandbox image the baseline bridge uses (default: MCP_BRIDGE_IMAGE, as the "
        "bridge under test): needed when the change is in code that runs inside the sandbox",
    )
    parser.add_argument(
        "--without-saving",
        action="store_true",
        help="hold the bridges' session stores, so that no durable snapshot follows an "
        "execution: the warm call without the cost of saving the session",
    )
    opts = parser.parse_args()
    figures = anyio.run(measure, opts)
    report(figures)
    if opts.json:
        opts.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
