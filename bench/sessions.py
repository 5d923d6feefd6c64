"""Session manager figures over a real runtime (podman by default).

1. warm execution of ``1+1`` in one session: p50/p99;
2. first execution of a new session, warm pool on vs off;
3. 16 concurrent new sessions: total start time and memory per idle container (from its cgroup);
4. 10 MB of output: time to the capped result, and the bridge's peak RSS during it.

Usage: ``hatch run bench:python bench/sessions.py [--runtime podman|local] [--warm N]
[--sessions N] [--image IMAGE]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from _scale import cgroup_memory  # bench/ is on sys.path when run as a script
from bridge_core.gateway import NullGateway
from bridge_core.runtime.base import OWNER_LABEL, RuntimeBackend
from bridge_core.sessions import SessionConfig, SessionManager
from bridge_image import names

DEFAULT_IMAGE = os.environ.get("MCP_BRIDGE_IMAGE", names.DEFAULT_IMAGE)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets VmHWM (peak RSS) to the current RSS (Linux >= 4.0).
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


async def _container_memory(label: str) -> list[int]:
    """Memory of each running container of ours, read from its cgroup."""
    listed = await anyio.run_process(
        ["podman", "ps", "--format={{.ID}}", f"--filter=label={OWNER_LABEL}={label}"]
    )
    usages = []
    for cid in listed.stdout.decode().split():
        pid = (await anyio.run_process(["podman", "inspect", "-f", "{{.State.Pid}}", cid])).stdout
        usage = await anyio.to_thread.run_sync(cgroup_memory, int(pid))
        if usage is not None:
            usages.append(usage)
    return usages


async def _runtime(kind: str, state: Path) -> tuple[RuntimeBackend, str | None]:
    if kind == "local":
        from bridge_core.runtime.local import LocalBackend

        return LocalBackend(state_dir=state), None
    from bridge_core.runtime.podman import PodmanBackend

    backend = await PodmanBackend.connect(state_dir=state)
    return backend, backend.owner.label


def _manager(
    runtime: RuntimeBackend, state: Path, image: str, **overrides: object
) -> SessionManager:
    config = SessionConfig(image=image, **overrides)  # type: ignore[arg-type]
    return SessionManager(config, runtime=runtime, gateway=NullGateway(), state_dir=state)


async def _timed(call: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def bench_warm(runtime: RuntimeBackend, state: Path, image: str, rounds: int) -> None:
    async with _manager(runtime, state, image, pool_size=0) as manager:
        await manager.execute("1+1")
        times = [await _timed(lambda: manager.execute("1+1")) for _ in range(rounds)]
    q = statistics.quantiles(times, n=100)
    print(f"warm `1+1` x{rounds}:             p50 {_ms(q[49])}   p99 {_ms(q[98])}")


async def bench_first(runtime: RuntimeBackend, state: Path, image: str) -> None:
    for pool in (1, 0):
        firsts = []
        async with _manager(runtime, state, image, pool_size=pool) as manager:
            for i in range(3):
                with anyio.fail_after(120):
                    await manager.wait_warm()
                firsts.append(await _timed(lambda i=i: manager.execute("1+1", session=f"n{i}")))
            hits = manager.stats.pool_hits
        label = "on " if pool else "off"
        print(
            f"first execution, pool {label}:     median {_ms(statistics.median(firsts))}"
            f"   (pool hits {hits}/3)"
        )


async def bench_concurrent(
    runtime: RuntimeBackend, state: Path, image: str, sessions: int, label: str | None
) -> None:
    async with _manager(runtime, state, image, pool_size=0, max_sessions=sessions) as manager:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                tg.start_soon(lambda i=i: manager.execute("x = 1", session=f"c{i}", timeout=300))
        total = time.perf_counter() - start
        print(f"{sessions} concurrent new sessions:   {total:8.2f} s total")
        if label is not None:
            usages = await _container_memory(label)
            if usages:
                median, most = statistics.median(usages) / 2**20, max(usages) / 2**20
                print(
                    f"idle container memory (cgroup): median {median:.1f} MiB, "
                    f"max {most:.1f} MiB over {len(usages)} containers"
                )


async def bench_output(runtime: RuntimeBackend, state: Path, image: str) -> None:
    async with _manager(runtime, state, image, pool_size=0) as manager:
        await manager.execute("1+1")
        code = "import sys\nsys.stdout.write('x' * (10 * 1024 * 1024))"
        _reset_peak_rss()
        before = _rss_kib("VmRSS")
        elapsed = await _timed(lambda: manager.execute(code, timeout=300))
        peak = _rss_kib("VmHWM")
        lines = await _timed(lambda: manager.execute("for i in range(200_000): print(i)"))
    print(f"10 MB of output -> capped result: {elapsed:8.2f} s")
    print(f"bridge RSS: {before / 1024:.1f} MiB before, peak {peak / 1024:.1f} MiB during")
    print(f"200k lines of output -> result:   {lines:8.2f} s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=["podman", "local"], default="podman")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--warm", type=int, default=300, help="rounds of the warm measurement")
    parser.add_argument("--sessions", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        state = Path(tmp)
        runtime, label = await _runtime(args.runtime, state)
        try:
            print(f"runtime {args.runtime}, image {args.image}")
            await bench_output(runtime, state, args.image)
            await bench_warm(runtime, state, args.image, args.warm)
            await bench_first(runtime, state, args.image)
            await bench_concurrent(runtime, state, args.image, args.sessions, label)
        finally:
            await runtime.aclose()


if __name__ == "__main__":
    anyio.run(main)
