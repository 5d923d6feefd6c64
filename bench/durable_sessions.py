"""Durable sessions over a real runtime (podman): what saving and restoring cost.

1. a warm ``x = 1`` call, sessions not saved vs saved: p50/p99 time to the result (the snapshot
   runs after the result; the next call starts once it is on disk), and back to back (each call
   also waits for the previous call's snapshot); ``x = 1`` again leaves the state unchanged
   (announced, not written), so ``x = n`` measures a state that changes at every call; with the
   CPU this process (the bridge's session manager) spent per call;
2. the first call after a bridge restart (a new manager on the same state dir): a small session,
   one holding ~50 MB of numpy/pandas data, and ~50 MB of bytes (the transfer alone, nothing to
   import), against a new empty session; without a warm pool (the container start is part of
   it) and with one (how a restarted bridge serves its first call: the pool fills at start, the
   restore needs no container start), as a stdio bridge's pool (it imports what the saved
   sessions name), as an HTTP bridge's (it imports nothing ahead) and as an HTTP bridge's with
   ``MCP_BRIDGE_POOL_IMPORTS=numpy,pandas,pyarrow``;
3. disk per saved session, for both.

Usage: ``hatch run bench:python bench/durable_sessions.py [--warm N] [--image IMAGE]
[--restores N] [--compare IMAGE] [--back-to-back]`` (the image must contain cloudpickle and the
durable sandbox client; the 50 MB case needs the standard image's numpy and pandas).
``--compare`` measures the restores and the saved ~24 MB rows of a second image too (the restores
alternating the two, each figure a median of ``--restores`` runs), so a change is measured side
by side under the same load;
``--restores 0`` skips them, and ``--back-to-back`` keeps only the warm rows without pauses (many
rounds in little time). Prints figures side by side; asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

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
BYTES = "import os\nb = os.urandom(48 * 2**20)\nlen(b)"
"""~50 MB restored without a module to import: the transfer's floor."""
LARGE_ROUNDS = 20
"""Calls of the ~24 MB rows (each saved call takes a fraction of a second)."""
LARGE = "import numpy as np\nbig = np.arange(3_000_000)"
SMALL = "x = 1\ndef f(n):\n    return n + x\nimport json\nopen('/tmp/note', 'w').write('hi')"


def _manager(runtime: RuntimeBackend, state: Path, image: str, *, durable: bool, pool: int = 0,
             one_client: bool = True, imports: tuple[str, ...] = ()) -> SessionManager:  # fmt: skip
    # A stdio bridge (one client): its warm pool imports what the saved sessions' states name;
    # an HTTP bridge's pool does not (one_client False), only what its settings name (imports).
    config = SessionConfig(
        image=image, pool_size=pool, max_timeout=900.0, pool_preimport=one_client,
        pool_imports=imports,
    )  # fmt: skip
    store = SessionStore(state, StoreSettings(name="bench")) if durable else None
    return SessionManager(
        config, runtime=runtime, gateway=NullGateway(), state_dir=state, store=store
    )


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _warm(runtime: RuntimeBackend, state: Path, image: str, rounds: int, *, durable: bool,
                pause: bool, changing: bool, large: bool = False
                ) -> tuple[list[float], float]:  # fmt: skip
    """The time of each call, and the CPU this process (the bridge) spent per call; ``large``:
    the session also holds ~24 MB of numpy data (saved by a forked child: sent whole when it
    changed, announced as unchanged when its digest equals the last one sent)."""
    samples = []
    async with _manager(runtime, state, image, durable=durable) as manager:
        await manager.execute(SMALL + ("\n" + LARGE if large else ""), timeout=600)
        cpu = time.process_time()
        for n in range(rounds):
            if pause:
                await anyio.sleep(0.3)  # outside the measure: the snapshot is done by then
            began = time.perf_counter()
            result = await manager.execute(f"x = {n}" if changing else "x = 1")
            samples.append(time.perf_counter() - began)
            assert result.ok, result
        cpu = time.process_time() - cpu
    return samples, cpu / rounds


async def _save(runtime: RuntimeBackend, state: Path, image: str, code: str) -> int:
    """Save a session that ran ``code``; return its size on disk."""
    async with _manager(runtime, state, image, durable=True) as manager:
        made = await manager.execute(code, session="s", timeout=600)
        assert made.ok, made
        await manager.execute("1", session="s")  # the state of `code` is on disk once this runs
    return sum(p.stat().st_size for p in (state / "saved" / "bench").glob("*.state"))


async def _restore(runtime: RuntimeBackend, state: Path, image: str, check: str | None,
                   pool: Pool) -> float:  # fmt: skip
    """Time to the first result of a new bridge (manager): the saved session ``s`` restored
    (``check`` runs in it), or a new empty session (``check`` None, nothing saved)."""
    async with _manager(
        runtime, state, image, durable=check is not None, pool=pool.size,
        one_client=pool.one_client, imports=pool.imports,
    ) as manager:  # fmt: skip
        if pool.size:
            with anyio.fail_after(120):
                await manager.wait_warm()
            # A restarted bridge's first call comes after its client's initialize and tools/list
            # and the model's turn: the warm sandbox has finished what it does as it starts.
            await anyio.sleep(WARM_PAUSE)
        began = time.perf_counter()
        back = await manager.execute(check or "1", session="s", timeout=600)
        took = time.perf_counter() - began
        assert back.ok, back
    return took


class Pool(NamedTuple):
    label: str
    size: int
    one_client: bool = True
    """A stdio bridge's: its sandboxes import the modules its saved sessions' states name."""
    imports: tuple[str, ...] = ()
    """``MCP_BRIDGE_POOL_IMPORTS``."""


POOLS = (
    Pool("pool 0", 0),
    Pool("pool 1", 1),
    Pool("1 (HTTP)", 1, one_client=False),
    Pool("1 (HTTP+)", 1, one_client=False, imports=("numpy", "pandas", "pyarrow")),
)
"""No pool; a stdio bridge's; an HTTP bridge's (its sandboxes import nothing ahead); an HTTP
bridge's with ``MCP_BRIDGE_POOL_IMPORTS=numpy,pandas,pyarrow``."""
WARM_PAUSE = 2.0
"""Seconds between the warm pool's sandbox being connected and the first call (outside the
measure): the imports a one-client bridge's pool does for its saved sessions end meanwhile."""
SMALL_CHECK = "f(1), open('/tmp/note').read()"
BIG_CHECK = "len(df) + len(a)"
BYTES_CHECK = "len(b)"


async def _restores(runtime: RuntimeBackend, root: Path, images: list[str], rounds: int
                    ) -> None:  # fmt: skip
    """The first call after a restart, per image, alternating the images round by round."""
    cases = [("new empty session", None, None), ("small session restored", SMALL, SMALL_CHECK),
             ("~50 MB numpy/pandas session restored", BIG, BIG_CHECK),
             ("~50 MB of bytes restored (no imports)", BYTES, BYTES_CHECK)]  # fmt: skip
    sizes: dict[tuple[str, str], int] = {}
    for i, image in enumerate(images):
        for c, (label, code, _) in enumerate(cases):
            if code is not None:
                sizes[image, label] = await _save(runtime, root / f"r{i}-{c}", image, code)
    took: dict[tuple[str, str, int], list[float]] = {}
    fresh = itertools.count()
    for _ in range(rounds):
        for pool in POOLS:
            for i, image in enumerate(images):
                for c, (label, _, check) in enumerate(cases):
                    # A new empty session: a fresh state dir each time, nothing to restore.
                    state = root / (f"r{i}-{c}" if check else f"e{next(fresh)}")
                    took.setdefault((image, label, pool), []).append(
                        await _restore(runtime, state, image, check, pool)
                    )
    print(f"first call after a restart (median of {rounds})")
    header = "".join(f" {pool.label:>9}" for _ in images for pool in POOLS)
    print(f"  {'':42}{header} {'disk':>11}")
    for i, image in enumerate(images):
        print(f"  image {i + 1}: {image}")
    for label, _code, _ in cases:
        row = "".join(
            f" {statistics.median(took[image, label, pool]) * 1000:7.0f}ms"
            for image in images
            for pool in POOLS
        )
        size = sizes.get((images[0], label))
        disk = "-" if size is None else (
            f"{size / 2**20:.1f} MiB" if size > 2**20 else f"{size:,} B")  # fmt: skip
        print(f"  {label:42}{row} {disk:>11}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--warm", type=int, default=200, help="rounds of the warm measurement")
    parser.add_argument(
        "--restores", type=int, default=3, help="rounds of the restore measures (0: none)"
    )
    parser.add_argument(
        "--compare", help="a second image whose restores and saved ~24 MB rows are measured too"
    )
    parser.add_argument(
        "--back-to-back", action="store_true", help="only the back-to-back warm rows (no pauses)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
        root = Path(tmp)
        runtime = await PodmanBackend.connect(state_dir=root / "runtime")
        try:
            print(f"image {args.image}, {args.warm} warm rounds")
            print(f"{'warm call x = 1 (x = n: the state changes)':56} {'p50':>9} {'p99':>9} "
                  f"{'bridge CPU/call':>16}")  # fmt: skip
            images = [args.image] + ([args.compare] if args.compare else [])
            for label, durable, pause, changing in (
                ()
                if not args.warm
                else (
                    ("not saved", False, True, False),
                    ("saved, time to result", True, True, False),
                    ("not saved, back to back", False, False, False),
                    ("saved, back to back", True, False, False),
                    ("x = n saved, time to result", True, True, True),
                    ("x = n saved, back to back", True, False, True),
                    ("~24 MB state, not saved, back to back", False, False, False),
                    ("~24 MB state saved, back to back", True, False, False),
                    ("~24 MB state, x = n saved, back to back", True, False, True),
                )
            ):
                if pause and args.back_to_back:
                    continue
                large = label.startswith("~24 MB")
                rounds = min(args.warm, LARGE_ROUNDS) if large else args.warm
                # The large rows are the ones a change of saving moves: both images, if two.
                for number, image in enumerate(images if large and durable else images[:1]):
                    state = root / f"warm-{durable}-{pause}-{changing}-{number}"
                    state = state.with_name(state.name + ("-large" if large else ""))
                    samples, cpu = await _warm(
                        runtime, state, image, rounds,
                        durable=durable, pause=pause, changing=changing, large=large,
                    )  # fmt: skip
                    both = large and durable and len(images) > 1
                    shown = label + ((" (--compare)" if number else " (--image)") if both else "")
                    print(f"  {shown:54} {_p(samples, 0.5):7.2f}ms {_p(samples, 0.99):7.2f}ms "
                          f"{cpu * 1000:14.2f}ms")  # fmt: skip
            if args.restores:  # 0: the warm rows only
                await _restores(runtime, root, images, args.restores)
        finally:
            await runtime.aclose()


if __name__ == "__main__":
    anyio.run(main)
