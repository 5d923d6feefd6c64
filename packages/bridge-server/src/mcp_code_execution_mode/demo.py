"""``mcp-code-execution-mode demo``: the bridge against real MCP servers, driven like an LLM would.

It writes a config of the real offline servers that ``scripts/prepare-servers`` installs (or,
without the repository, whatever ``npx``/``uvx`` can start), starts the bridge as a subprocess
over stdio with the MCP SDK client, and prints every request and response: discover → search →
query docs → call tools in a loop → a second call proving persistence → multi-server calls.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from bridge_core.runtime.base import IMAGE_BUILD_COMMAND
from bridge_core.sessions import visible
from bridge_image.names import DEFAULT_IMAGE, SLIM_IMAGE
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_code_execution_mode._demo_steps import SALES, DemoStep, steps
from mcp_code_execution_mode._logging import log_to_file_only
from mcp_code_execution_mode.settings import Settings

__all__ = ["demo_servers", "run_demo"]

CALL_TIMEOUT = 180.0
"""Bound on one demo call: the first one may start the sandbox and every upstream server."""
RULE = "─" * 72


def _executable(path: Path) -> str | None:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def demo_servers(
    servers_dir: Path, data_dir: Path, work_dir: Path
) -> tuple[dict[str, Any], list[str]]:
    """The ``mcpServers`` entries the demo proxies, and a note for each server it cannot start.

    Prefers the pinned installs of ``scripts/prepare-servers``; falls back to ``npx``/``uvx``.
    """
    npm_bin = servers_dir / "npm" / "node_modules" / ".bin"
    py_bin = servers_dir / "py" / "bin"
    npx, uvx = shutil.which("npx"), shutil.which("uvx")
    wanted: dict[str, tuple[Path, str, list[str], dict[str, str]]] = {
        "filesystem": (npm_bin / "mcp-server-filesystem", "npm", [str(data_dir)], {}),
        "time": (py_bin / "mcp-server-time", "py", ["--local-timezone", "UTC"], {}),
        "memory": (npm_bin / "mcp-server-memory", "npm", [],
                   {"MEMORY_FILE_PATH": str(work_dir / "memory.jsonl")}),
        "everything": (npm_bin / "mcp-server-everything", "npm", ["stdio"], {}),
    }  # fmt: skip
    packages = {
        "filesystem": "@modelcontextprotocol/server-filesystem",
        "memory": "@modelcontextprotocol/server-memory",
        "everything": "@modelcontextprotocol/server-everything",
        "time": "mcp-server-time",
    }
    servers: dict[str, Any] = {}
    missing: list[str] = []
    for name, (path, kind, args, env) in wanted.items():
        local = _executable(path)
        entry: dict[str, Any] | None = None
        if local is not None:
            entry = {"command": local, "args": args}
        elif kind == "npm" and npx is not None:
            entry = {"command": npx, "args": ["-y", packages[name], *args]}
        elif kind == "py" and uvx is not None:
            entry = {"command": uvx, "args": [packages[name], *args]}
        if entry is None:
            tool = "npx (Node.js)" if kind == "npm" else "uvx (uv)"
            missing.append(
                f"{name}: no {path}, and no {tool} to fetch {packages[name]}; "
                "run scripts/prepare-servers from the repository"
            )
            continue
        if env:
            entry["env"] = env
        servers[name] = entry
    return servers, missing


def _image_ready(settings: Settings) -> str | None:
    """None when the sandbox image is there (building it when we can), else what to do."""
    if settings.runtime == "local":
        return None
    cli = shutil.which("podman" if settings.runtime != "docker" else "docker")
    if cli is None:
        return None  # the bridge itself reports the missing runtime on the first call
    probe = [cli, "image", "exists" if cli.endswith("podman") else "inspect", settings.image]
    if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return None
    if settings.image not in (DEFAULT_IMAGE, SLIM_IMAGE):
        return (
            f"the sandbox image {settings.image} is missing: build it, or leave MCP_BRIDGE_IMAGE "
            f"unset to use the standard image ({IMAGE_BUILD_COMMAND} builds it)"
        )
    print(f"building the sandbox image {settings.image} (first run only) ...", flush=True)
    variant = [] if settings.image == DEFAULT_IMAGE else ["--slim"]
    build = subprocess.run(
        [sys.executable, "-m", "bridge_image", "build", "--if-stale", *variant], check=False
    )
    if build.returncode != 0:
        return f"building the image failed (output above); fix it, then {IMAGE_BUILD_COMMAND}"
    return None


def _clone_of_package() -> Path | None:
    """The repository clone this package runs from (an editable install), if any."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "scripts" / "prepare-servers").is_file():
            return parent
    return None


def servers_dir_candidates(explicit: str | None) -> list[Path]:
    """Where the pinned demo servers may be, in order: ``--servers-dir``,
    ``$MCP_TEST_SERVERS_DIR``, ``.cache/servers`` here, then in the clone this package runs from."""
    if explicit:
        return [Path(explicit)]
    found = [Path(p) for p in [os.environ.get("MCP_TEST_SERVERS_DIR")] if p]
    found.append(Path(".cache/servers"))
    clone = _clone_of_package()
    if clone is not None:
        found.append(clone / ".cache" / "servers")
    return found


def _pick_servers_dir(explicit: str | None) -> Path:
    candidates = servers_dir_candidates(explicit)
    return next((c for c in candidates if (c / "env").is_file()), candidates[0])


NOT_INSTALLED = "not installed"
FAILED = "failed to start"
"""The two reasons a demo server is unavailable, as the demo's lines start."""


async def _startable(servers: dict[str, Any], settings: Settings) -> dict[str, str]:
    """Start every demo server once; the ones that fail, with the reason (outside a clone they
    come from npx/uvx, which need the network)."""
    from bridge_core.discovery import discover

    from mcp_code_execution_mode._compose import proxy_options
    from mcp_code_execution_mode._probe import probe_servers

    with tempfile.TemporaryDirectory(prefix="mcp-demo-probe-") as tmp:
        config = Path(tmp) / "servers.json"
        config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        specs = discover(explicit=config, clients=False).servers.values()
        results = await probe_servers(specs, proxy_options(settings))
    return {name: outcome for name, outcome in results.items() if isinstance(outcome, str)}


def failure_lines(name: str, reason: str, *, fetched: bool) -> list[str]:
    """How the demo says that a server it has did not start: the whole reason, as ``doctor``
    gives it (the error, then the server's stderr tail, one indented line each)."""
    first, *tail = reason.splitlines() or [""]
    lines = [f"{FAILED}: {name}: {first}"]
    lines += [f"    {line}" for line in tail]
    if fetched:
        lines.append(
            "    (fetched by npx/uvx, which needs the network; scripts/prepare-servers installs "
            "the demo's servers offline, from a clone: --servers-dir DIR)"
        )
    return [visible(line, single_line=True) for line in lines]


async def _drop_failed(
    servers: dict[str, Any], settings: Settings, fetched: set[str]
) -> dict[str, str]:
    """Start each server once; print why each failing one failed, remove it from ``servers`` and
    return ``{name: FAILED}`` for them."""
    failed: dict[str, str] = {}
    for name, reason in (await _startable(dict(servers), settings)).items():
        del servers[name]
        failed[name] = FAILED
        for line in failure_lines(name, reason, fetched=name in fetched):
            print(line)
    return failed


def _show(label: str, text: str) -> None:
    print(f"{label}:")
    for line in text.rstrip("\n").splitlines() or [""]:
        print(f"    {line}")


def _render(result: types.CallToolResult) -> str:
    parts = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(f"<image {block.mime_type}, {len(block.data) * 3 // 4} bytes>")
    return "\n".join(parts)


def skip_note(step: DemoStep, available: set[str], unavailable: Mapping[str, str]) -> str | None:
    """Why ``step`` is skipped (each server it lacks, and whether that one is not installed or
    failed to start), or None when it runs."""
    lacking = [s for s in step.needs if s not in available]
    if not lacking:
        return None
    phrase = {NOT_INSTALLED: "is not installed", FAILED: "failed to start (see above)"}
    why = "; ".join(f"{s}, which {phrase[unavailable.get(s, NOT_INSTALLED)]}" for s in lacking)
    return f"(skipped: needs {why})"


async def _run_steps(
    session: ClientSession,
    plan: list[DemoStep],
    available: set[str],
    unavailable: Mapping[str, str],
) -> int:
    failures = 0
    for number, step in enumerate(plan, 1):
        print(f"\n{RULE}\nstep {number}: {step.title}\n{RULE}")
        note = skip_note(step, available, unavailable)
        if note is not None:
            print(note)
            continue
        arguments: dict[str, Any] = {"code": step.code}
        if step.session is not None:
            arguments["session"] = step.session
        _show("request  tools/call run_python", step.code)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            shown = f"{progress:g}/{total:g}" if total else f"{progress:g}"
            print(f"  progress {shown} {message or ''}", flush=True)

        started = time.perf_counter()
        result = await session.call_tool(
            "run_python", arguments, read_timeout_seconds=CALL_TIMEOUT, progress_callback=progress
        )
        elapsed = (time.perf_counter() - started) * 1000
        _show(f"response isError={result.is_error} ({elapsed:.0f} ms)", _render(result))
        failures += bool(result.is_error)
    return failures


def _prepare(base: Path, work: Path) -> tuple[Path, Path, dict[str, Any], list[str]]:
    """Write the demo's data files and servers config; return (data dir, config, servers,
    missing notes)."""
    data = work / "data"
    data.mkdir()
    for name, text in SALES.items():
        (data / name).write_text(text, encoding="utf-8")
    servers, missing = demo_servers(base.resolve(), data, work)
    config = work / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}, indent=2), encoding="utf-8")
    return data, config, servers, missing


async def run_demo(
    settings: Settings, servers_dir: str | None, forward: Mapping[str, str] | None = None
) -> int:
    """Run the demo; returns 0 when every step succeeded. ``forward``: settings as env vars."""
    # Only the demo's own lines: a server that fails to start is one of them, with its cause;
    # the log records behind it go to the log file.
    log_to_file_only()
    problem = await anyio.to_thread.run_sync(_image_ready, settings)
    if problem is not None:
        print(f"demo: {problem}", file=sys.stderr)
        return 1
    base = _pick_servers_dir(servers_dir)
    with tempfile.TemporaryDirectory(prefix="mcp-demo-") as tmp:
        work = Path(tmp)
        data, config, servers, missing = await anyio.to_thread.run_sync(_prepare, base, work)
        print(f"demo config ({config}):\n{json.dumps({'mcpServers': servers}, indent=2)}")
        for note in missing:
            print(f"{NOT_INSTALLED}: {note}")
        installed = str(base.resolve())
        fetched = {n for n, e in servers.items() if not str(e["command"]).startswith(installed)}
        unavailable = {name.split(":", 1)[0]: NOT_INSTALLED for name in missing}
        unavailable.update(await _drop_failed(servers, settings, fetched))
        if not servers:
            print("demo: no MCP server could be started: nothing to show", file=sys.stderr)
            return 1
        config.write_text(json.dumps({"mcpServers": servers}, indent=2), encoding="utf-8")
        log_file = settings.resolved_log_file
        env = {
            **os.environ,
            # The bridge logs where this command does (its state dir below is temporary).
            "MCP_BRIDGE_LOG_FILE": str(log_file) if log_file is not None else "off",
            **(forward or {}),
            "MCP_BRIDGE_CONFIG": str(config),
            "MCP_BRIDGE_DISCOVER": "false",
            "MCP_BRIDGE_STATE_DIR": str(work / "state"),
        }
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_code_execution_mode", "serve"], env=env
        )
        started = time.perf_counter()
        # The bridge's stderr holds its log records, raw (they reach its log file too): kept
        # aside, and shown only if the bridge itself fails.
        stderr_file = work / "bridge-stderr.txt"
        with open(stderr_file, "w", encoding="utf-8") as errlog:  # noqa: ASYNC230 - a local file
            try:
                failures = await _drive(params, errlog, data, servers, unavailable, started)
            except Exception as exc:  # top level of the command: say what failed, and why
                errlog.flush()
                print(f"demo: the bridge failed: {exc!r}; the end of its stderr:")
                tail = stderr_file.read_text(encoding="utf-8", errors="replace").splitlines()
                for line in tail[-20:]:
                    print(visible(f"    {line}", single_line=True))
                return 1
    outcome = f"{failures} step(s) failed" if failures else "all steps ok"
    print(f"\n{RULE}\ndemo finished: {outcome}")
    if log_file is not None:
        print(f"log: {log_file}")
    return 1 if failures else 0


async def _drive(
    params: StdioServerParameters,
    errlog: Any,
    data: Path,
    servers: dict[str, Any],
    unavailable: Mapping[str, str],
    started: float,
) -> int:
    """Start the bridge, list its tool and run every step; the number of steps that failed."""
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        info = init.server_info
        ready = time.perf_counter() - started
        print(f"\nbridge started: {info.name} {info.version}, protocol {init.protocol_version}")
        print(f"(start to initialized: {ready:.2f} s)")
        listed = await session.list_tools()
        wire = listed.model_dump_json(by_alias=True, exclude_none=True)
        _show(f"tools/list ({len(wire.encode())} bytes)", wire)
        return await _run_steps(session, steps(str(data)), set(servers), unavailable)
