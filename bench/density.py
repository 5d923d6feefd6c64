"""Density: live idle sessions one bridge holds, the memory of each, hibernation and shutdown.

    hatch run tests:python bench/density.py [--sessions 300] [--extra 20] [--quick]

The real bridge through the SDK's stdio client, no pool, ``[sessions] max = --sessions``. Then:

1. **Open**: ``run_python("x = <i>", session="s<i>")`` for ``--sessions`` new sessions,
   ``--concurrency`` at a time (stops early when the machine's MemAvailable falls under
   ``--reserve-gib``).
2. **Memory of the idle sessions**, after ``--settle`` seconds with nothing running. Counted:

   * every sandbox container's memory cgroup (cgroup v1 ``memory.usage_in_bytes``, v2
     ``memory.current``: the container's processes, page cache and kernel memory charged to it),
     and its anonymous part (v1 ``total_rss``, v2 ``anon``);
   * every container's ``conmon`` (the engine's per-container monitor, outside the cgroup): its
     PSS from ``smaps_rollup`` (shared pages divided among the conmons that map them);
   * the bridge process: its PSS growth from before the first session to now;
   * the engine's API service (``podman system service``, shared with anything else on the
     machine): its RSS growth over the same time, reported beside, not in the per-session sum.

   Per session = (cgroups + conmons + the bridge's growth) / sessions; and the slope of the
   same sum from the first measurement on (one more session, without the bridge's one-time
   growth).
3. **All answering**: ``print(x)`` in every session, each must print its own ``i``.
4. **Hibernate/restore**: ``--extra`` more new sessions past the maximum (each makes the least
   recently used idle one hibernate: saved to disk, its container stopped), then a call to each
   hibernated session (restored from disk, its ``x`` still there; each restore hibernates
   another). Times of both, live containers after, disk used by the saved states.
5. **Shutdown**: the client closes the bridge's stdin; seconds until the bridge is gone and until
   podman lists none of its containers (goal: all gone within 10 s).

Writes ``bench/results/density.json`` and ``docs/density.svg``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _scale import (
    DOCS,
    conditions,
    containers_of,
    proc_memory,
    progress,
    quantiles,
    remove_left,
    save,
    stdio_bridge,
)
from mcp import ClientSession

MIB = 2**20


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def engine_rss() -> int:
    """RSS of the podman API service processes (``podman system service``) on this machine."""
    total = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if argv[:3] == [b"podman", b"system", b"service"] or (
                    len(argv) > 2
                    and argv[0].endswith(b"/podman")
                    and argv[1:3] == [b"system", b"service"]
                ):
                    total += proc_memory(int(entry.name)).get("rss", 0)
            except OSError:
                continue
    return total


def cgroup_figures(pid: int) -> tuple[int, int] | None:
    """(charged bytes, anonymous bytes) of the memory cgroup of ``pid``."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "memory":
            base = Path(f"/sys/fs/cgroup/memory{path}")
            stat = dict(line.split() for line in (base / "memory.stat").read_text().splitlines())
            return int((base / "memory.usage_in_bytes").read_text()), int(stat["total_rss"])
        base = Path(f"/sys/fs/cgroup{path}")
        if controllers == "" and (base / "memory.current").exists():
            stat = dict(line.split() for line in (base / "memory.stat").read_text().splitlines())
            return int((base / "memory.current").read_text()), int(stat["anon"])
    return None


def measure(bridge: int, bridge_pss_before: int, engine_before: int) -> dict[str, Any]:
    """Memory of the bridge's live sandboxes, as the module's docstring says."""
    ids = [c["Id"] for c in containers_of(bridge) if c.get("State") == "running"]
    pids: list[tuple[int, int]] = []
    for start in range(0, len(ids), 100):
        inspected = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Pid}} {{.State.ConmonPid}}",
             *ids[start : start + 100]],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        for line in inspected.stdout.splitlines():
            sandbox, conmon = line.split()
            pids.append((int(sandbox), int(conmon)))
    cgroups, anon, conmons = [], [], []
    for sandbox, conmon in pids:
        try:
            figures = cgroup_figures(sandbox)
            conmon_pss = proc_memory(conmon)["pss"]
        except (OSError, KeyError):
            continue  # ended meanwhile
        if figures is not None:
            cgroups.append(figures[0])
            anon.append(figures[1])
            conmons.append(conmon_pss)
    bridge_now = proc_memory(bridge)
    bridge_growth = bridge_now["pss"] - bridge_pss_before
    n = len(cgroups)
    total = sum(cgroups) + sum(conmons) + bridge_growth
    return {
        "sandboxes": n,
        "cgroup_mib": quantiles([c / MIB for c in cgroups]),
        "cgroup_anon_mib": quantiles([a / MIB for a in anon]),
        "conmon_pss_mib": quantiles([c / MIB for c in conmons]),
        "bridge_pss_mib": bridge_now["pss"] / MIB,
        "bridge_rss_mib": bridge_now["rss"] / MIB,
        "bridge_growth_mib": bridge_growth / MIB,
        "bridge_growth_per_session_kib": bridge_growth / 1024 / n if n else None,
        "engine_rss_growth_mib": (engine_rss() - engine_before) / MIB,
        "total_mib": total / MIB,
        "per_session_mib": total / MIB / n if n else None,
    }


LISTING_INTERVAL = 0.5
"""Seconds between two listings while podman removes the containers: each listing is a podman
process (~50 ms of CPU) that takes the engine's database lock like the removals it measures;
ten a second took a quarter of this 2-core machine from them."""


def watch_shutdown(pid: int, since: float, bound: float) -> tuple[float | None, float | None]:
    """Seconds from ``since`` until bridge ``pid`` is gone, and until none of its containers
    is listed (``None``: not within ``bound``); the bridge is checked every 0.1 s, podman's
    listing every :data:`LISTING_INTERVAL`."""
    gone_bridge = None
    listed_at = 0.0
    while (now := time.perf_counter() - since) < bound:
        if gone_bridge is None and not os.path.exists(f"/proc/{pid}"):
            gone_bridge = now
        if now - listed_at >= LISTING_INTERVAL or listed_at == 0.0:
            listed_at = now
            if not containers_of(pid):
                return gone_bridge if gone_bridge is not None else now, now
        time.sleep(0.1)
    return gone_bridge, None


async def timed_run(session: ClientSession, code: str, name: str) -> tuple[float, str]:
    started = time.perf_counter()
    result = await session.call_tool(
        "run_python", {"code": code, "session": name}, read_timeout_seconds=300
    )
    elapsed = time.perf_counter() - started
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        raise RuntimeError(f"{name}: {text[:300]}")
    return elapsed, text


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def draw(figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    growth = figures["growth"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), width_ratios=(3, 2))
    counts = [g["sandboxes"] for g in growth]
    left.plot(counts, [g["total_mib"] for g in growth], marker="o", color="#2f6db5",
              label="bridge growth + cgroups + conmons")  # fmt: skip
    left.plot(counts, [12 * c for c in counts], linestyle="dashed", color="#c0392b",
              label="goal: 12 MiB per session")  # fmt: skip
    left.set_xlabel("live idle sessions")
    left.set_ylabel("MiB")
    left.legend(fontsize=8)
    idle = figures["idle"]
    left.set_title(
        f"{idle['sandboxes']} idle sessions: {idle['per_session_mib']:.1f} MiB each", fontsize=10
    )
    parts = {
        "cgroup": idle["cgroup_mib"]["p50"],
        "conmon PSS": idle["conmon_pss_mib"]["p50"],
        "bridge": (idle["bridge_growth_per_session_kib"] or 0) / 1024,
    }
    bottom = 0.0
    for (name, value), colour in zip(parts.items(), ("#2f6db5", "#7fa6d6", "#b0b7c3"), strict=True):
        right.bar(0, value, 0.6, bottom=bottom, color=colour, label=f"{name} {value:.1f}")
        bottom += value
    right.axhline(12, color="#c0392b", linestyle="dashed", label="goal 12 MiB")
    right.set_xticks([0], ["one idle session (p50 parts)"])
    right.set_ylabel("MiB")
    right.legend(fontsize=8)
    cycle = figures["hibernation"]
    if cycle:
        right.set_title(
            f"p50: new past the max (one hibernates) {cycle['new_past_max_s']['p50'] * 1000:.0f} "
            f"ms,\nrestore {cycle['restore_s']['p50'] * 1000:.0f} ms; all gone "
            f"{figures['shutdown']['containers_gone_s'] or 0:.1f} s after close",
            fontsize=10,
        )
    cond = figures["conditions"]
    fig.suptitle(
        f"Density on one bridge ({cond['cpus']} cores, {cond['memory_gib']} GiB, "
        f"load {cond['load_average'][0]:.1f})",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


async def main(opts: argparse.Namespace) -> None:
    before = conditions()
    figures: dict[str, Any] = {"benchmark": "density", "settings": vars(opts).copy()}
    pid = 0
    try:
        with tempfile.TemporaryDirectory(prefix="bench-density-") as tmp:
            work = Path(tmp)
            settings = f"[sandbox]\npool_size = 0\n\n[sessions]\nmax = {opts.sessions}\n"
            async with stdio_bridge(work, settings) as (session, pid):
                bridge_before = proc_memory(pid)["pss"]
                engine_before, available_before = engine_rss(), mem_available()
                opened: list[float] = []
                growth: list[dict[str, Any]] = []
                limit = anyio.Semaphore(opts.concurrency)
                stop = [False]

                async def open_one(index: int) -> None:
                    async with limit:
                        if stop[0]:
                            return
                        elapsed, _ = await timed_run(session, f"x = {index}", f"s{index}")
                        opened.append(elapsed)

                started = time.perf_counter()
                for chunk in range(0, opts.sessions, opts.step):
                    async with anyio.create_task_group() as tg:
                        for index in range(chunk, min(chunk + opts.step, opts.sessions)):
                            tg.start_soon(open_one, index)
                    await anyio.sleep(opts.settle / 2)
                    point = await anyio.to_thread.run_sync(
                        measure, pid, bridge_before, engine_before
                    )
                    growth.append(point)
                    progress(
                        f"{len(opened)} sessions open ({time.perf_counter() - started:.0f} s): "
                        f"{point['per_session_mib']:.1f} MiB each; MemAvailable "
                        f"{mem_available() / 2**30:.1f} GiB"
                    )
                    if mem_available() < opts.reserve_gib * 2**30:
                        stop[0] = True
                        progress("MemAvailable under the reserve: no more sessions")
                        break
                count = len(opened)
                await anyio.sleep(opts.settle)
                idle = await anyio.to_thread.run_sync(measure, pid, bridge_before, engine_before)
                idle["mem_available_drop_mib"] = (available_before - mem_available()) / MIB
                if len(growth) > 1:
                    # What one more session costs, without the bridge's one-time growth (its
                    # first sessions' imports and buffers): the slope from the first point on.
                    first, last = growth[0], idle
                    idle["marginal_per_session_mib"] = (last["total_mib"] - first["total_mib"]) / (
                        last["sandboxes"] - first["sandboxes"]
                    )
                progress(f"idle: {idle}")
                answers, wrong = [], 0
                for index in range(count):
                    elapsed, text = await timed_run(session, "print(x)", f"s{index}")
                    answers.append(elapsed)
                    wrong += str(index) not in text
                progress(f"all answering: {count - wrong}/{count}")
                hibernation: dict[str, Any] = {}
                if opts.extra and count == opts.sessions:
                    past, restored, wrong_restored = [], [], 0
                    for index in range(count, count + opts.extra):
                        past.append((await timed_run(session, f"x = {index}", f"s{index}"))[0])
                    live_after_past = len(containers_of(pid))
                    saved = disk_bytes(work / "state")
                    # s0..s{extra-1} were the least recently used: hibernated now.
                    for index in range(opts.extra):
                        elapsed, text = await timed_run(session, "print(x)", f"s{index}")
                        restored.append(elapsed)
                        wrong_restored += str(index) not in text
                    hibernation = {
                        "new_past_max_s": quantiles(past),
                        "restore_s": quantiles(restored),
                        "restored_wrong": wrong_restored,
                        "live_containers_after": live_after_past,
                        "state_dir_mib": saved / MIB,
                        "state_dir_per_hibernated_kib": saved / 1024 / opts.extra,
                    }
                    progress(f"hibernation: {hibernation}")
                load_at_close = os.getloadavg()
                closing = time.perf_counter()
            closed = time.perf_counter() - closing
            gone_bridge, gone_all = await anyio.to_thread.run_sync(
                watch_shutdown, pid, closing, opts.removal_bound
            )
            shutdown = {
                "client_close_s": closed,
                "bridge_gone_s": gone_bridge,
                "containers_gone_s": gone_all,
                "containers_left_after_bound": len(containers_of(pid)),
                "load_average_at_close": [round(v, 2) for v in load_at_close],
            }
            progress(f"shutdown: {shutdown}")
    finally:
        left = remove_left([pid]) if pid else 0
    figures.update(
        {
            "conditions": {**before, "load_average_after": [round(v, 2) for v in os.getloadavg()]},
            "sessions_opened": count,
            "open_s": quantiles(opened),
            "growth": growth,
            "idle": idle,
            "answering": {"answered": count - wrong, "of": count, "call_s": quantiles(answers)},
            "hibernation": hibernation,
            "shutdown": shutdown,
            "containers_removed_by_the_bench": left,
            "goals": {"sessions": 300, "per_session_mib": 12, "gone_within_s": 10},
        }
    )
    print(f"live idle sessions: {count} ({count - wrong} answering), opened in p50 "
          f"{figures['open_s']['p50'] * 1000:.0f} ms each")  # fmt: skip
    print(
        f"memory per idle session: {idle['per_session_mib']:.1f} MiB (goal <= 12 MiB): cgroup p50 "
        f"{idle['cgroup_mib']['p50']:.1f} (anon {idle['cgroup_anon_mib']['p50']:.1f}), conmon PSS "
        f"{idle['conmon_pss_mib']['p50']:.2f}, bridge "
        f"{idle['bridge_growth_per_session_kib']:.0f} KiB"
        f"; engine service +{idle['engine_rss_growth_mib']:.0f} MiB in all; MemAvailable "
        f"-{idle['mem_available_drop_mib']:.0f} MiB in all"
    )
    if "marginal_per_session_mib" in idle:
        print(
            f"  one more session (slope from {growth[0]['sandboxes']} on): "
            f"{idle['marginal_per_session_mib']:.1f} MiB"
        )
    if hibernation:
        print(
            f"hibernate/restore: a new session past the max p50 "
            f"{hibernation['new_past_max_s']['p50'] * 1000:.0f} ms, a restore p50 "
            f"{hibernation['restore_s']['p50'] * 1000:.0f} ms ({hibernation['restored_wrong']} "
            f"wrong), {hibernation['state_dir_per_hibernated_kib']:.0f} KiB of disk each"
        )
    print(
        f"shutdown: bridge gone {shutdown['bridge_gone_s']} s, containers gone "
        f"{shutdown['containers_gone_s']} s after the client closed (goal <= 10 s)"
    )
    print(f"results: {save('density', figures)}")
    if not opts.without_chart:
        out = DOCS / "density.svg"
        draw(figures, out)
        print(f"chart: {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--step", type=int, default=50, help="sessions between two measurements")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--extra", type=int, default=20, help="new sessions past the maximum")
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--reserve-gib", type=float, default=3.0)
    parser.add_argument("--removal-bound", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true", help="30 sessions, 5 past the maximum")
    parser.add_argument("--without-chart", action="store_true")
    options = parser.parse_args()
    if options.quick:
        options.sessions, options.step, options.extra, options.settle = 30, 10, 5, 3.0
    anyio.run(main, options)
