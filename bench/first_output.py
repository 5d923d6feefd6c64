"""Time to first output of a new session: a new session name -> its first ``print`` returned.

    hatch run tests:python bench/first_output.py [--iterations 100] [--pool N] [--gap S]
        [--baseline CHECKOUT] [--quick]

Side by side in one run, in alternating blocks of ``--block`` iterations (so the machine's load
moves every column alike):

* ``podman run``: the floor, a bare ``podman run --rm IMAGE python3 -c 'print(1)'`` (the
  image's entrypoint replaced by ``python3``), timed around the process;
* ``pool default``: the real bridge (SDK stdio client) with ``[sandbox] pool_size`` unset (1);
* ``no pool``: the same with ``pool_size = 0``;
* ``pool N`` (``--pool N``, default 4; 0: no such column): the same with ``pool_size = N``;
* ``pool default, before`` (``--baseline CHECKOUT``): the bridge of another checkout's packages
  (the code before a change) with the pool at its default.

Each bridge iteration is ``run_python(code="print(1)", session="n<i>")`` with a name never used
before, ``--gap`` seconds after the previous answer (0: back to back). ``[sessions] max`` is set
above the number of sessions so that no session hibernates during the run (that is density.py's
subject). Prints p50/p95/p99 of each column and its ratio to the floor; writes
``bench/results/first_output.json`` and ``docs/first-output.svg``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from _scale import (
    DOCS,
    IMAGE,
    conditions,
    progress,
    quantiles,
    remove_left,
    save,
    stdio_bridge,
)
from mcp import ClientSession

NAME_PREFIX = f"bench-first-output-{os.getpid()}-"
GOALS = {"no pool": 1.0, "pool": 0.25}
"""Goals as ratios to the floor's p50 (issue 39)."""


def bare_run(index: int) -> float:
    argv = [
        "podman", "run", "--rm", "--name", f"{NAME_PREFIX}{index}",
        "--entrypoint", "python3", IMAGE, "-c", "print(1)",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stdout.strip() != "1":
        raise SystemExit(f"podman run failed: {done.stderr.strip()}")
    return elapsed


async def first_output(session: ClientSession, name: str) -> float:
    started = time.perf_counter()
    result = await session.call_tool(
        "run_python", {"code": "print(1)", "session": name}, read_timeout_seconds=120
    )
    elapsed = time.perf_counter() - started
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error or "1" not in text:
        raise SystemExit(f"run_python in a new session failed: {text}")
    return elapsed


def draw(figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = figures["columns"]
    names = list(columns)
    floor = columns["podman run"]["p50"]
    fig, ax = plt.subplots(figsize=(8.5, 4.2))
    width = 0.26
    for offset, (key, colour) in enumerate(
        (("p50", "#2f6db5"), ("p95", "#7fa6d6"), ("p99", "#c3d3ea"))
    ):
        for index, name in enumerate(names):
            value = columns[name][key] * 1000
            x = index + (offset - 1) * width
            ax.bar(x, value, width, color=colour, label=key if index == 0 else None)
            if key == "p50":
                ax.annotate(
                    f"{columns[name]['p50'] / floor:.2f}x",
                    (x, value),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                )
    for index, name in enumerate(names):
        goal = GOALS["no pool"] if name == "no pool" else GOALS["pool"] if "pool" in name else None
        if goal is not None:
            ax.hlines(goal * floor * 1000, index - 0.45, index + 0.45, colors="#c0392b",
                      linestyles="dashed", label="goal (p50)" if index == 1 else None)  # fmt: skip
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("new session -> first output (ms)")
    cond = figures["conditions"]
    ax.set_title(
        f"Time to first output of a new session, {columns[names[0]]['n']} each, same run\n"
        f"({cond['cpus']} cores, load {cond['load_average'][0]:.1f}; x = p50 / podman run p50)",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


async def main(opts: argparse.Namespace) -> None:
    sessions_max = opts.iterations + opts.pool + 8
    modes: dict[str, str] = {"pool default": ""}
    if opts.baseline is not None:
        modes["pool default, before"] = ""
    modes["no pool"] = "[sandbox]\npool_size = 0\n"
    if opts.pool:
        modes[f"pool {opts.pool}"] = f"[sandbox]\npool_size = {opts.pool}\n"
    samples: dict[str, list[float]] = {"podman run": [], **{name: [] for name in modes}}
    pids: list[int] = []
    before = conditions()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-first-") as tmp:
            async with AsyncExitStack() as stack:
                bridges: dict[str, ClientSession] = {}
                for index, (name, settings) in enumerate(modes.items()):
                    session, pid = await stack.enter_async_context(
                        stdio_bridge(
                            Path(tmp) / f"b{index}",
                            f"{settings}[sessions]\nmax = {sessions_max}\n",
                            code=opts.baseline if name.endswith(", before") else None,
                        )
                    )
                    bridges[name] = session
                    pids.append(pid)
                    # A session of its own first: the bridge's one-time costs are not a new
                    # session's.
                    await first_output(session, "warmup")
                await anyio.to_thread.run_sync(bare_run, -1)
                # Let every pool fill before the first timed block.
                await anyio.sleep(opts.settle)
                done = 0
                while done < opts.iterations:
                    block = range(done, min(done + opts.block, opts.iterations))
                    for index in block:
                        samples["podman run"].append(
                            await anyio.to_thread.run_sync(bare_run, index)
                        )
                        await anyio.sleep(opts.gap)
                    for name, session in bridges.items():
                        for index in block:
                            samples[name].append(await first_output(session, f"n{index}"))
                            await anyio.sleep(opts.gap)
                        # The next column starts on a refilled pool, as the first did.
                        await anyio.sleep(opts.settle)
                    done = block.stop
                    progress(
                        f"{done}/{opts.iterations}: "
                        + ", ".join(
                            f"{name} p50 {quantiles(s)['p50'] * 1000:.0f} ms"
                            for name, s in samples.items()
                        )
                    )
    finally:
        left = remove_left(pids, NAME_PREFIX)
    columns = {name: quantiles(s) for name, s in samples.items()}
    floor = columns["podman run"]["p50"]
    figures = {
        "benchmark": "first_output",
        "conditions": {**before, "load_average_after": [round(v, 2) for v in os.getloadavg()]},
        "settings": {
            "iterations": opts.iterations,
            "block": opts.block,
            "gap_s": opts.gap,
            "settle_s": opts.settle,
            "sessions_max": sessions_max,
        },
        "columns": columns,
        "ratios_p50": {name: c["p50"] / floor for name, c in columns.items()},
        "goals_p50": {"no pool": GOALS["no pool"], "pool": GOALS["pool"]},
        "fast": {
            name: sum(1 for v in s if v <= GOALS["pool"] * floor) for name, s in samples.items()
        },
        "containers_left": left,
        "samples_s": samples,
    }
    print(f"time to first output of a new session, {opts.iterations} each (ms):")
    for name, c in columns.items():
        print(
            f"  {name:14s} p50 {c['p50'] * 1000:6.0f}  p95 {c['p95'] * 1000:6.0f}  "
            f"p99 {c['p99'] * 1000:6.0f}   p50 {c['p50'] / floor:.2f}x podman run   "
            f"{figures['fast'][name]} under {GOALS['pool']}x"
        )
    print("  goals: no pool <= 1.0x, with the pool <= 0.25x (p50)")
    print(f"  containers left and removed: {left}")
    print(f"results: {save('first_output', figures)}")
    if not opts.without_chart:
        out = DOCS / "first-output.svg"
        draw(figures, out)
        print(f"chart: {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--block", type=int, default=10, help="iterations per alternating block")
    parser.add_argument("--pool", type=int, default=4, help="one more column with this pool")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between new sessions")
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds for the pools to refill between blocks"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of the code before a change: one more column, its bridge with the pool "
        "at its default, in the same alternating blocks",
    )
    parser.add_argument("--quick", action="store_true", help="20 iterations")
    parser.add_argument("--without-chart", action="store_true")
    options = parser.parse_args()
    if options.quick:
        options.iterations, options.block = 20, 5
    anyio.run(main, options)
