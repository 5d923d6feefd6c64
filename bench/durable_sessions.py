"""Durable sessions over a real runtime (podman): what saving and restoring cost.

1. a warm ``x = 1`` call, sessions not saved vs saved: p50/p99 time to the result (the snapshot
   runs after the result; the next call starts once it is on disk), and back to back (each call
   also waits for the previous call's snapshot); ``x = 1`` again leaves the state unchanged
   (announced, not written), so ``x = n`` measures a state that changes at every call;
2. the first call after a bridge restart (a new manager on the same state dir, no warm pool): a
   small session, and one holding ~50 MB of numpy/pandas data, against a new empty session;
3. disk per saved session, for both.

Usage: ``hatch run bench:python bench/durable_sessions.py [--warm N] [--image IMAGE]`` (the
image must contain cloudpickle and the durable sandbox client; the 50 MB case needs the standard
image's numpy and pandas). Prints figures side by side; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from bridge_core.gateway import NullGateway
from bridge_core.runtime.base import RuntimeBackend
from bridge_core.runtime.podman import PodmanBackend
from bridge_core.sessions import SessionConfig, SessionManager, SessionStore, StoreSettings

DEFAULT_IMAGE = os.environ.get("MCP_BRIDGE_IMAGE", "localhost/mcp-bridge-sandbox:0.1.0")
BIG = (
    "import numpy as np, pandas as pd\n"
    "rng = np.random.default_rng(0)\n"
    "a = rng.random(2_000_000)\n"
    "df = pd.DataFrame({'i': np.arange(2_000_000), 'v': rng.random(2_000_000)})\n"
    "round(a.nbytes / 2**20 + df.memory_usage().sum() / 2**20)"
)
SMALL = "x = 1\ndef f(n):\n    return n + x\nimport json\nopen('/tmp/note', 'w').write('hi')"


def _manager(runtime: RuntimeBackend, state: Path, image: str, *, durable: bool) -> SessionManager:
    config = SessionConfig(image=image, pool_size=0, max_timeout=900.0)
    store = SessionStore(state, StoreSettings(name="bench")) if durable else None
    return SessionManager(
        config, runtime=runtime, gateway=NullGateway(), state_dir=state, store=store
    )


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _warm(runtime: RuntimeBackend, state: Path, image: str, rounds: int, *, durable: bool,
                pause: bool, changing: bool) -> list[float]:  # fmt: skip
    samples = []
    async with _manager(runtime, state, image, durable=durable) as manager:
        await manager.execute(SMALL)
        for n in range(rounds):
            if pause:
                await anyio.sleep(0.3)  # outside the measure: the snapshot is done by then
            began = time.perf_counter()
            result = await manager.execute(f"x = {n}" if changing else "x = 1")
            samples.append(time.perf_counter() - began)
            assert result.ok, result
    return samples


async def _restore(runtime: RuntimeBackend, state: Path, image: str, code: str, check: str
                   ) -> tuple[float, int, str]:  # fmt: skip
    async with _manager(runtime, state, image, durable=True) as manager:
        made = await manager.execute(code, session="s", timeout=600)
        assert made.ok, made
        await manager.execute("1", session="s")  # the state of `code` is on disk once this runs
    size = sum(p.stat().st_size for p in (state / "saved" / "bench").glob("*.state"))
    async with _manager(runtime, state, image, durable=True) as manager:
        began = time.perf_counter()
        back = await manager.execute(check, session="s", timeout=600)
        took = time.perf_counter() - began
        assert back.ok, back
    return took, size, back.value or ""


async def _fresh(runtime: RuntimeBackend, state: Path, image: str) -> float:
    async with _manager(runtime, state, image, durable=False) as manager:
        began = time.perf_counter()
        await manager.execute("1")
        return time.perf_counter() - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--warm", type=int, default=200, help="rounds of the warm measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
        root = Path(tmp)
        runtime = await PodmanBackend.connect(state_dir=root / "runtime")
        try:
            print(f"image {args.image}, {args.warm} warm rounds")
            print(f"{'warm call x = 1 (x = n: the state changes)':44} {'p50':>9} {'p99':>9}")
            for label, durable, pause, changing in (
                ("not saved", False, True, False),
                ("saved, time to result", True, True, False),
                ("not saved, back to back", False, False, False),
                ("saved, back to back", True, False, False),
                ("x = n saved, time to result", True, True, True),
                ("x = n saved, back to back", True, False, True),
            ):
                state = root / f"warm-{durable}-{pause}-{changing}"
                samples = await _warm(runtime, state, args.image, args.warm, durable=durable,
                                      pause=pause, changing=changing)  # fmt: skip
                print(f"  {label:42} {_p(samples, 0.5):7.2f}ms {_p(samples, 0.99):7.2f}ms")
            fresh = statistics.median([await _fresh(runtime, root / f"f{i}", args.image)
                                       for i in range(3)])  # fmt: skip
            small = await _restore(runtime, root / "small", args.image, SMALL,
                                   "f(1), open('/tmp/note').read()")  # fmt: skip
            big = await _restore(runtime, root / "big", args.image, BIG, "len(df) + len(a)")
            print(f"{'first call after a restart':44} {'time':>9} {'disk':>11}")
            print(f"  {'new empty session (container start)':42} {fresh * 1000:7.0f}ms {'-':>11}")
            print(f"  {'small session restored':42} {small[0] * 1000:7.0f}ms {small[1]:>9,} B")
            print(f"  {'~50 MB numpy/pandas session restored':42} {big[0] * 1000:7.0f}ms "
                  f"{big[1] / 2**20:>8.1f} MiB")  # fmt: skip
        finally:
            await runtime.aclose()


if __name__ == "__main__":
    anyio.run(main)
