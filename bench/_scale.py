"""Helpers shared by the scale benchmarks (``first_output.py``, ``team.py``, ``density.py``):
the bridge over stdio with a settings file, percentiles, the machine's conditions, results and
cgroup/proc memory readings, and removing what a run left behind."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
DOCS = REPO / "docs"
IMAGE = os.environ.get("MCP_BRIDGE_IMAGE", "localhost/mcp-bridge-sandbox:0.1.0")
LABEL = "io.github.mcp-code-execution-mode"
OWNER = f"{LABEL}.owner"
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def everything() -> str | None:
    """The Node ``server-everything`` of ``scripts/prepare-servers``, if installed."""
    env_file = REPO / ".cache" / "servers" / "env"
    if not env_file.is_file():
        return None
    for line in env_file.read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if name == "MCP_SERVER_EVERYTHING":
            return shlex.split(value)[0]
    return None


def write_config(work: Path, servers: Mapping[str, Any], settings: str) -> Path:
    """``servers.json`` and the ``bridge.toml`` beside it; returns the servers file."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "servers.json"
    config.write_text(json.dumps({"mcpServers": dict(servers)}))
    (work / "bridge.toml").write_text(settings)
    return config


def bridge_env(config: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "MCP_BRIDGE_CONFIG": str(config),
        "MCP_BRIDGE_DISCOVER": "false",
        "MCP_BRIDGE_IMAGE": IMAGE,
        **extra,
    }


def sources(checkout: Path) -> str:
    """A PYTHONPATH that runs the packages of ``checkout``."""
    return os.pathsep.join(str(p) for p in sorted(checkout.glob("packages/*/src")))


@asynccontextmanager
async def stdio_bridge(
    work: Path,
    settings: str,
    servers: Mapping[str, Any] | None = None,
    code: Path | None = None,
) -> AsyncIterator[tuple[ClientSession, int]]:
    """The real bridge through the SDK's stdio client; yields the session and the bridge's pid.
    ``code``: run the packages of that checkout instead (the code before a change)."""
    config = write_config(work, servers or {}, settings)
    state = work / "state"
    extra = {} if code is None else {"PYTHONPATH": sources(code)}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(state)],
        env=bridge_env(config, **extra),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session, bridge_pid(state)


def bridge_pid(state_dir: Path) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"mcp_code_execution_mode" in argv and str(state_dir).encode() in argv:
                return int(entry.name)
    raise SystemExit("bridge process not found")


def quantiles(samples: list[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest rank) and the count of ``samples``, in the samples' unit."""
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}

    def rank(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]

    return {"n": len(ordered), "p50": rank(0.5), "p95": rank(0.95), "p99": rank(0.99)}


def conditions() -> dict[str, Any]:
    """What the figures were measured on (the machine is shared: the load is part of a result)."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PHYS_PAGES") * PAGE / 2**30, 1),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "python": sys.version.split()[0],
        "image": IMAGE,
    }


def save(name: str, figures: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def proc_memory(pid: int) -> dict[str, int]:
    """Bytes of ``Rss`` and ``Pss`` of one process (``smaps_rollup``)."""
    found = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            found[key.lower()] = int(rest.split()[0]) * 1024
    return found


def cgroup_memory(pid: int) -> int | None:
    """Bytes charged to the memory cgroup of ``pid`` (v1 ``usage_in_bytes`` or v2 ``current``)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "memory":
            return int(Path(f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes").read_text())
        current = Path(f"/sys/fs/cgroup{path}/memory.current")
        if controllers == "" and current.exists():
            return int(current.read_text())
    return None


def containers_of(pid: int) -> list[dict[str, Any]]:
    """The containers (running or not) whose owner label names bridge ``pid``."""
    listed = subprocess.run(
        ["podman", "ps", "-a", "--format", "json", "--filter", f"label={LABEL}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return [
        c
        for c in json.loads(listed.stdout or "[]")
        if str((c.get("Labels") or {}).get(OWNER, "")).startswith(f"{pid}:")
    ]


def remove_left(pids: list[int], name_prefix: str | None = None) -> int:
    """Force-remove containers a run left behind (of these bridges, or named with the prefix);
    returns how many there were. A bench must leave nothing, even after Ctrl-C or a failure."""
    ids = [c["Id"] for pid in pids for c in containers_of(pid)]
    if name_prefix is not None:
        named = subprocess.run(
            ["podman", "ps", "-a", "-q", "--filter", f"name=^{name_prefix}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        ids += named.stdout.split()
    if ids:
        subprocess.run(["podman", "rm", "-f", "-t", "0", *ids], capture_output=True, check=False)
    return len(ids)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
