"""Sandbox start and channel round-trip latency with real podman containers.

    hatch run bench:python bench/sandbox_roundtrip.py [--image IMAGE] [--starts 5] [--rounds 1000]

Measures, in one run against the same podman service:

* cold start: ``PodmanBackend.start`` (create, inspect-verify, start, channel connect) + protocol
  handshake + the first ``Execute("1+1")`` → ``Result`` (ms, each of ``--starts`` sandboxes);
* warm round trip: ``Execute("1+1")`` → ``Result`` over the channel of a running sandbox
  (µs p50/p99 over ``--rounds``);
* protocol ping: ``Ping`` → ``Pong`` over the same channel (the protocol's own cost, without
  running any code);
* raw round trip: 8 bytes echoed by a minimal Python loop in a container from the same image,
  over a unix socket in a bind-mounted directory, read with the same anyio stream stack: the
  floor the protocol adds to (goal: warm ≤ 2x raw).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from bridge_core.channel import Channel
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_image.names import DEFAULT_IMAGE
from bridge_protocol import Execute, Ping, Pong, Result

ECHO = (
    "import socket\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect('/run/bridge/echo.sock')\n"
    "while (data := s.recv(65536)):\n"
    "    s.sendall(data)\n"
)


async def execute(channel: Channel, execution_id: str, code: str) -> Result:
    await channel.send(Execute(execution_id, code))
    while True:
        message = await channel.receive()
        if isinstance(message, Result) and message.execution_id == execution_id:
            return message


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def cold_starts(backend: PodmanBackend, image: str, count: int) -> list[float]:
    timings = []
    for index in range(count):
        start = time.perf_counter()
        sandbox = await backend.start(SandboxSpec(name=f"bench-start-{index}", image=image))
        try:
            channel = Channel(sandbox.stream)
            await channel.handshake()
            result = await execute(channel, "first", "1+1")
            assert result.value == "2", result
            timings.append((time.perf_counter() - start) * 1e3)
        finally:
            await backend.kill(sandbox)
    return timings


async def ping(channel: Channel, nonce: int) -> None:
    await channel.send(Ping(nonce))
    while not (isinstance(message := await channel.receive(), Pong) and message.nonce == nonce):
        pass


async def warm_round_trips(
    backend: PodmanBackend, image: str, rounds: int
) -> tuple[list[float], list[float]]:
    """(execute 1+1 samples, ping samples) in µs, from one warm sandbox."""
    sandbox = await backend.start(SandboxSpec(name="bench-warm", image=image))
    try:
        channel = Channel(sandbox.stream)
        await channel.handshake()
        for warmup in range(50):
            await execute(channel, f"w{warmup}", "1+1")
            await ping(channel, 10**9 + warmup)
        executes, pings = [], []
        for index in range(rounds):
            start = time.perf_counter()
            await execute(channel, f"e{index}", "1+1")
            executes.append((time.perf_counter() - start) * 1e6)
            start = time.perf_counter()
            await ping(channel, index)
            pings.append((time.perf_counter() - start) * 1e6)
        return executes, pings
    finally:
        await backend.kill(sandbox)


async def raw_round_trips(image: str, rounds: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="mcp-bridge-bench-") as directory:
        os.chmod(directory, 0o755)
        socket_path = f"{directory}/echo.sock"
        listener = await anyio.create_unix_listener(socket_path, mode=0o666)
        name = f"mcp-bridge-bench-raw-{os.getpid()}"
        command = ["podman", "run", "--rm", "-d", "--name", name, "--network=none"]
        command += ["--user=65534:65534", "--cap-drop=ALL", "--read-only", "--init"]
        command += ["-v", f"{directory}:/run/bridge:ro", "--entrypoint", "python3"]
        await anyio.run_process([*command, image, "-c", ECHO])
        try:
            with anyio.fail_after(30):
                stream = await listener.accept()
            samples = []
            for index in range(rounds + 50):
                start = time.perf_counter()
                await stream.send(b"12345678")
                received = b""
                while len(received) < 8:
                    received += await stream.receive()
                if index >= 50:
                    samples.append((time.perf_counter() - start) * 1e6)
            await stream.aclose()
            return samples
        finally:
            await listener.aclose()
            await anyio.run_process(["podman", "rm", "--force", "--time=0", name], check=False)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", default=os.environ.get("MCP_BRIDGE_IMAGE", DEFAULT_IMAGE))
    parser.add_argument("--starts", type=int, default=5, help="cold starts to time")
    parser.add_argument("--rounds", type=int, default=1000, help="round trips to time")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mcp-bridge-bench-state-") as state:
        backend = await PodmanBackend.connect(state_dir=Path(state))
        try:
            info = await backend.info()
            starts = await cold_starts(backend, args.image, args.starts)
            warm, pings = await warm_round_trips(backend, args.image, args.rounds)
        finally:
            await backend.aclose()
    raw = await raw_round_trips(args.image, args.rounds)

    print(f"podman {info.version} ({'rootless' if info.rootless else 'rootful'}), {info.detail}")
    print(f"image {args.image}\n")
    print(f"{'measurement':<44}{'p50':>10}{'p99 / max':>12}")
    print(
        f"{'cold start → first result (ms)':<44}{statistics.median(starts):>10.1f}"
        f"{max(starts):>12.1f}"
    )
    print(
        f"{'warm execute 1+1 round trip (µs)':<44}{percentile(warm, 0.5):>10.0f}"
        f"{percentile(warm, 0.99):>12.0f}"
    )
    print(
        f"{'protocol ping → pong round trip (µs)':<44}{percentile(pings, 0.5):>10.0f}"
        f"{percentile(pings, 0.99):>12.0f}"
    )
    print(
        f"{'raw unix-socket round trip (µs)':<44}{percentile(raw, 0.5):>10.0f}"
        f"{percentile(raw, 0.99):>12.0f}"
    )
    ratio = percentile(warm, 0.5) / percentile(raw, 0.5)
    print(f"\nwarm / raw (p50): {ratio:.2f}x (goal ≤ 2x)")


if __name__ == "__main__":
    anyio.run(main)
