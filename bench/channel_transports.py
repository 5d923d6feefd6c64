"""The two sandbox channels side by side: unix socket (bind-mounted dir) vs attached stdio.

    hatch run bench:python bench/channel_transports.py [--image IMAGE] [--rounds 300]
        [--calls 300] [--displays 10] [--remote]

For each channel, on real podman sandboxes through ``PodmanBackend`` (the same code the bridge
runs), with the host end of :class:`bridge_core.channel.Channel`:

* warm call: ``Execute("1+1")`` → ``Result`` round trip (µs p50/p99 over ``--rounds``);
* proxied call: sandbox code awaiting ``runtime.list_tools(...)`` ``--calls`` times in a loop,
  each a ``Request`` frame answered by the host with a ``Reply`` (µs per call, from the host);
* display frame: sandbox code sending one 4 MB ``Display`` frame, host receiving it whole
  (ms p50 over ``--displays``; MB/s).

``--remote`` adds the stdio channel over the ssh engine of ``scripts/prepare-remote``
(``.state/remote/env`` or the ``MCP_BRIDGE_RUNTIME_*`` variables), on this same machine: it
shows what the ssh hop costs, not a network.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from bridge_core.channel import Channel
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_image.names import DEFAULT_IMAGE
from bridge_protocol import Display, Execute, Reply, Request, Result

DISPLAY_BYTES = 4 * 1024 * 1024
PREPARED = Path(__file__).resolve().parents[1] / ".state" / "remote" / "env"


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def run(channel: Channel, execution_id: str, code: str) -> tuple[Result, int]:
    """Execute ``code``, answering its requests; the result and the display bytes received."""
    await channel.send(Execute(execution_id, code))
    shown = 0
    while True:
        message = await channel.receive()
        if isinstance(message, Request):
            await channel.send(Reply(call_id=message.call_id, value=["echo"]))
        elif isinstance(message, Display):
            shown += len(message.data)
        elif isinstance(message, Result) and message.execution_id == execution_id:
            assert message.status == "ok", message
            return message, shown


async def measure(backend: PodmanBackend, image: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = SandboxSpec(name=f"bench-{backend.channel}", image=image, connect_timeout=60)
    sandbox = await backend.start(spec)
    try:
        channel = Channel(sandbox.stream)
        await channel.handshake()
        warm = []
        for index in range(args.rounds):
            start = time.perf_counter()
            await run(channel, f"w{index}", "1+1")
            warm.append((time.perf_counter() - start) * 1e6)
        loop = f"for _ in range({args.calls}):\n    await runtime.list_tools('bench')\n"
        await run(channel, "p0", loop)  # warm-up
        start = time.perf_counter()
        await run(channel, "p1", loop)
        proxied = (time.perf_counter() - start) * 1e6 / args.calls
        make_png = f"png = b'\\x89PNG\\r\\n\\x1a\\n' + bytes({DISPLAY_BYTES - 8})"
        await run(channel, "d-setup", make_png)
        displays = []
        for index in range(args.displays):
            start = time.perf_counter()
            _, shown = await run(channel, f"d{index}", "runtime.display_image(png)")
            assert shown == DISPLAY_BYTES, shown
            displays.append((time.perf_counter() - start) * 1e3)
    finally:
        await backend.kill(sandbox)
    display_ms = statistics.median(displays)
    return {
        "warm p50 µs": statistics.median(warm),
        "warm p99 µs": percentile(warm, 0.99),
        "proxied µs/call": proxied,
        "4 MB display ms": display_ms,
        "display MB/s": DISPLAY_BYTES / 1e6 / (display_ms / 1e3),
    }


def remote_settings() -> dict[str, Any]:
    env = dict(os.environ)
    if not env.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://") and PREPARED.is_file():
        for line in PREPARED.read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = shlex.split(value)[0]
    if not env.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://"):
        raise SystemExit("--remote: run scripts/prepare-remote first")
    return {
        "url": env["MCP_BRIDGE_RUNTIME_URL"],
        "identity": Path(env["MCP_BRIDGE_RUNTIME_IDENTITY"]),
        "known_hosts": Path(env["MCP_BRIDGE_RUNTIME_KNOWN_HOSTS"]),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default=os.environ.get("MCP_BRIDGE_IMAGE") or DEFAULT_IMAGE)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--displays", type=int, default=10)
    parser.add_argument("--remote", action="store_true")
    args = parser.parse_args()
    setups: list[tuple[str, dict[str, Any]]] = [
        ("socket", {"channel": "socket"}),
        ("stdio", {"channel": "stdio"}),
    ]
    if args.remote:
        setups.append(("stdio over ssh", remote_settings()))
    columns: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-channels-") as state:
        for label, settings in setups:
            backend = await PodmanBackend.connect(state_dir=Path(state) / label, **settings)
            try:
                columns[label] = await measure(backend, args.image, args)
            finally:
                await backend.aclose()
    rows = next(iter(columns.values())).keys()
    print(f"{'':18}" + "".join(f"{label:>16}" for label in columns))
    for row in rows:
        print(f"{row:18}" + "".join(f"{columns[label][row]:>16.1f}" for label in columns))


if __name__ == "__main__":
    anyio.run(main)
