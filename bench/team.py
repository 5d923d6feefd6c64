"""A team on one bridge: concurrent SDK clients on ``serve --http`` with bearer tokens.

    hatch run tests:python bench/team.py [--clients 20,50] [--seconds 60] [--quick]

Each client is a real MCP SDK client (``streamable_http_client`` + ``ClientSession``) with a
bearer token of its own (one principal each), which alternates a warm ``run_python("1+1")`` in
its session and a proxied ``everything__echo`` (a direct tool: ``[tools] mode = "both"``, the
bridge's gateway to the real ``server-everything``), back to back, for ``--seconds``. For each
client count, in the same run (the first two in ``--slices`` alternating slices of the time):

* ``bridge``: the real bridge (``serve --http``, tokens, ``[sessions] max`` above the clients);
* ``plain SDK``: the same clients against a plain SDK streamable-HTTP server with the same two
  tools answering at once (``bench/_plain_http_server.py``): the floor of the HTTP transport;
* ``stdio direct``: the same number of clients each calling ``echo`` on its own stdio
  connection to ``server-everything`` (no HTTP, no bridge): the floor of the upstream.

Before them, one client alone for ``--idle-seconds``: the bridge's CPU per call when idle.
Figures per column: calls/s, p50/p99 of all calls, errors (exceptions and error results), and
for the bridge the CPU seconds of the bridge process (user + system from /proc; the upstream
server, the sandboxes and the clients are not counted) per call, and the same of the plain
server's process in its column. Writes
``bench/results/team.json`` and ``docs/team-load.svg`` (with ``--check MODE``,
``team-check-MODE.json`` and ``team-load-check-MODE.svg``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from _scale import (
    DOCS,
    REPO,
    bridge_env,
    conditions,
    cpu_seconds,
    everything,
    progress,
    quantiles,
    remove_left,
    save,
    write_config,
)
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_code_execution_mode._tokens import add_token

ECHO = "everything__echo"
CONNECT_LIMIT = 8
"""Clients connecting at once (50 at once on 2 cores only measure the start-up storm)."""


@dataclass
class Column:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    cpu: float | None = None

    def add(self, other: Column) -> None:
        """Fold another slice of the same column in."""
        self.latencies += other.latencies
        self.errors += other.errors
        self.wall += other.wall
        self.cpu = (self.cpu or 0.0) + (other.cpu or 0.0)

    def figures(self) -> dict[str, Any]:
        calls = len(self.latencies) + len(self.errors)
        q = quantiles(self.latencies)
        return {
            "calls": calls,
            "calls_per_s": calls / self.wall if self.wall else 0.0,
            "p50_ms": q.get("p50", 0) * 1000,
            "p99_ms": q.get("p99", 0) * 1000,
            "errors": len(self.errors),
            "error_examples": sorted(set(self.errors))[:5],
            # The bridge's process, or the plain SDK server's in its column.
            "bridge_cpu_ms_per_call": self.cpu * 1000 / calls if self.cpu and calls else None,
        }


Call = Callable[[ClientSession, int], Awaitable[None]]


async def bridge_call(session: ClientSession, index: int) -> None:
    if index % 2 == 0:
        result = await session.call_tool("run_python", {"code": "1+1"}, read_timeout_seconds=120)
    else:
        result = await session.call_tool(ECHO, {"message": "x"}, read_timeout_seconds=120)
    if result.is_error:
        raise RuntimeError(" ".join(getattr(b, "text", "") for b in result.content)[:200])


async def echo_call(session: ClientSession, index: int) -> None:
    result = await session.call_tool("echo", {"message": "x"}, read_timeout_seconds=120)
    if result.is_error:
        raise RuntimeError(" ".join(getattr(b, "text", "") for b in result.content)[:200])


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def stdio_session(command: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=["stdio"])
    # Its start-up banner, once per client, silenced (opening /dev/null does not block).
    with open(os.devnull, "w") as quiet:  # noqa: ASYNC230
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def drive(
    opens: list[Callable[[], Any]], call: Call, seconds: float, pid: int | None
) -> Column:
    """Open every client (a few at a time), warm each up, then let all call for ``seconds``."""
    column = Column()
    ready, go, limit = [0], anyio.Event(), anyio.Semaphore(CONNECT_LIMIT)
    window: dict[str, float] = {}

    async def client(open_session: Callable[[], Any]) -> None:
        async with limit:
            stack = open_session()
            session = await stack.__aenter__()
        try:
            await call(session, 0)  # its session's sandbox started, the upstream warm
            await call(session, 1)
            ready[0] += 1
            if ready[0] == len(opens):
                window["cpu"] = cpu_seconds(pid) if pid else 0.0
                window["start"] = time.perf_counter()
                window["end"] = window["start"] + seconds
                go.set()
            await go.wait()
            index = 0
            while time.perf_counter() < window["end"]:
                started = time.perf_counter()
                try:
                    await call(session, index)
                except Exception as exc:  # an error is a figure of the run, not its end
                    column.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                else:
                    column.latencies.append(time.perf_counter() - started)
                index += 1
        finally:
            await stack.__aexit__(None, None, None)

    async with anyio.create_task_group() as tg:
        for open_session in opens:
            tg.start_soon(client, open_session)
        await go.wait()
        await anyio.sleep(seconds)
        if pid:
            column.cpu = cpu_seconds(pid) - window["cpu"]
    column.wall = time.perf_counter() - window["start"]
    return column


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def process(argv: list[str], env: dict[str, str], ready: str) -> AsyncIterator[Any]:
    """A child process; yields it (and what it printed, once ``ready`` appeared on stdout)."""
    proc = await anyio.open_process(argv, env=env, stderr=sys.stderr)
    assert proc.stdout is not None
    out = b""
    try:
        with anyio.fail_after(120):
            while ready.encode() not in out:
                chunk = await proc.stdout.receive()
                out += chunk
        async with anyio.create_task_group() as tg:

            async def drain() -> None:
                async for _ in proc.stdout:  # type: ignore[union-attr]
                    pass

            tg.start_soon(drain)
            yield proc, out.decode()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            proc.terminate()
            with anyio.move_on_after(30):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


@asynccontextmanager
async def http_bridge(
    work: Path, clients: int, upstream: str, check: str | None
) -> AsyncIterator[tuple[str, int]]:
    settings = (
        f'[sessions]\nmax = {clients + 8}\n\n[tools]\nmode = "both"\n\n'
        f"[http]\nconnections_per_client = 16\n"
    )
    if check is not None:
        settings += f'\n[check]\nmode = "{check}"\n'

    config = write_config(work, {"everything": {"command": upstream, "args": ["stdio"]}}, settings)
    argv = [
        sys.executable, "-m", "mcp_code_execution_mode", "serve",
        "--http", "127.0.0.1:0", "--state-dir", str(work / "state"),
    ]  # fmt: skip
    env = bridge_env(config, MCP_BRIDGE_HTTP_TOKEN_FILE=str(work / "tokens"))
    async with process(argv, env, "serving MCP at ") as (proc, out):
        start = out.index("serving MCP at ") + len("serving MCP at ")
        url = out[start:].split()[0]
        try:
            yield url, proc.pid
        finally:
            remove_left([proc.pid])


@asynccontextmanager
async def plain_server() -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    argv = [sys.executable, "-u", str(REPO / "bench" / "_plain_http_server.py"), str(port)]
    async with process(argv, dict(os.environ), "") as (proc, _):
        with anyio.fail_after(60):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    await anyio.sleep(0.1)
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp", proc.pid


def draw(figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = figures["runs"]
    fig, ax = plt.subplots(figsize=(9, 4.4))
    labels: list[str] = []
    colours = {"bridge": "#2f6db5", "plain SDK": "#b0b7c3", "stdio direct": "#6b8e23"}
    x = 0.0
    ticks = []
    for count, columns in runs.items():
        start = x
        for name, c in columns.items():
            ax.bar(x, c["p99_ms"], 0.8, color=colours[name], alpha=0.45)
            ax.bar(x, c["p50_ms"], 0.8, color=colours[name])
            ax.annotate(
                f"{c['calls_per_s']:.0f}/s\n{c['errors']} err",
                (x, c["p99_ms"]),
                ha="center",
                va="bottom",
                fontsize=7,
            )
            labels.append(name)
            ticks.append(x)
            x += 1
        bridge, plain = columns["bridge"], columns["plain SDK"]
        ax.text(
            (start + x - 1) / 2,
            -0.2,
            f"{count} clients: p99 {bridge['p99_ms'] / plain['p99_ms']:.2f}x plain SDK",
            transform=ax.get_xaxis_transform(),
            ha="center",
            fontsize=9,
        )
        x += 0.8
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel("ms per call (solid p50, pale p99)")
    cond = figures["conditions"]
    ax.set_title(
        f"Clients alternating run_python and a proxied echo, {figures['settings']['seconds']:.0f}"
        f" s each\n({cond['cpus']} cores, load {cond['load_average'][0]:.1f}; calls/s above)",
        fontsize=10,
    )
    fig.subplots_adjust(bottom=0.22)
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


async def main(opts: argparse.Namespace) -> None:
    upstream = everything()
    if upstream is None:
        raise SystemExit("run scripts/prepare-servers first (server-everything)")
    counts = [int(c) for c in opts.clients.split(",")]
    before = conditions()
    runs: dict[str, dict[str, Any]] = {}
    idle: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        work = Path(tmp)
        tokens = [add_token(work / "tokens", f"client{i}") for i in range(max(counts) + 1)]
        async with (
            http_bridge(work, max(counts) + 1, upstream, opts.check) as (url, pid),
            plain_server() as (plain_url, plain_pid),
        ):
            progress(f"bridge {pid} at {url}; idle: 1 client, {opts.idle_seconds:g} s")
            one = [lambda: http_session(url, tokens[-1])]
            idle = (await drive(one, bridge_call, opts.idle_seconds, pid)).figures()
            progress(f"  idle: {idle['bridge_cpu_ms_per_call']:.2f} ms bridge CPU per call")
            share = opts.seconds / opts.slices
            for count in counts:
                columns = {"bridge": Column(), "plain SDK": Column()}
                targets = {"bridge": (url, pid), "plain SDK": (plain_url, plain_pid)}
                # Alternating slices: the machine's load moves both columns alike.
                for part in range(opts.slices):
                    for name, (target, server) in targets.items():
                        progress(f"{count} clients, {name}, slice {part + 1}/{opts.slices}")
                        opens = [
                            lambda i=i, t=target: http_session(t, tokens[i]) for i in range(count)
                        ]
                        columns[name].add(await drive(opens, bridge_call, share, server))
                runs[str(count)] = {name: c.figures() for name, c in columns.items()}
                for name in columns:
                    progress(f"  {name}: {runs[str(count)][name]}")
        for count in counts:
            progress(f"{count} clients each on its own stdio server-everything, {opts.seconds:g} s")
            opens = [lambda: stdio_session(upstream) for _ in range(count)]
            column = await drive(opens, echo_call, opts.seconds, None)
            runs[str(count)]["stdio direct"] = column.figures()
            progress(f"  {runs[str(count)]['stdio direct']}")
    figures = {
        "benchmark": "team",
        "conditions": {**before, "load_average_after": [round(v, 2) for v in os.getloadavg()]},
        "settings": {
            "clients": counts,
            "seconds": opts.seconds,
            "slices": opts.slices,
            "idle_seconds": opts.idle_seconds,
            "check_mode": opts.check or "the bridge's default",
        },
        "idle": idle,
        "runs": runs,
        "goals_at_50": {"errors": 0, "p99_vs_plain": 1.5, "cpu_vs_idle": 1.5},
    }
    print("calls/s, p50/p99 ms, errors, bridge CPU per call:")
    print(f"  idle (1 client): {idle['calls_per_s']:.0f}/s, p50 {idle['p50_ms']:.1f}, "
          f"p99 {idle['p99_ms']:.1f}, {idle['bridge_cpu_ms_per_call']:.2f} ms CPU")  # fmt: skip
    for count, columns in runs.items():
        for name, c in columns.items():
            cpu = c["bridge_cpu_ms_per_call"]
            print(
                f"  {count:>3} clients, {name:12s} {c['calls_per_s']:6.0f}/s  "
                f"p50 {c['p50_ms']:6.1f}"
                f"  p99 {c['p99_ms']:6.1f}  errors {c['errors']}"
                + (
                    f"  {cpu:.2f} ms CPU ({cpu / idle['bridge_cpu_ms_per_call']:.2f}x bridge idle)"
                    if cpu
                    else ""
                )
            )
        bridge, plain = columns["bridge"], columns["plain SDK"]
        print(
            f"  {count:>3} clients: bridge p99 {bridge['p99_ms'] / plain['p99_ms']:.2f}x plain SDK"
        )
    print("  goals at 50 clients: 0 errors, p99 <= 1.5x plain SDK, CPU per call <= 1.5x idle")
    suffix = "" if opts.check is None else f"-check-{opts.check}"
    print(f"results: {save('team' + suffix, figures)}")
    if not opts.without_chart:
        out = DOCS / f"team-load{suffix}.svg"
        draw(figures, out)
        print(f"chart: {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="20,50", help="client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--idle-seconds", type=float, default=15.0)
    parser.add_argument(
        "--slices", type=int, default=4, help="alternating slices of bridge and plain server"
    )
    parser.add_argument(
        "--check", help="the bridge's [check] mode (default: its own default); off: no check"
    )
    parser.add_argument("--quick", action="store_true", help="5 and 10 clients, 8 s each")
    parser.add_argument("--without-chart", action="store_true")
    options = parser.parse_args()
    if options.quick:
        options.clients, options.seconds, options.idle_seconds, options.slices = "5,10", 8.0, 5.0, 2
    anyio.run(main, options)
