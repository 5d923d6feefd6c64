"""The bridge as a subprocess over stdio, driven by the official MCP SDK client.

``open_bridge`` starts ``python -m mcp_code_execution_mode`` with a servers file of our choosing
(client config discovery off, private state dir) and yields a connected :class:`BridgeClient`.
When the bridge exits, no container it owned may remain: checked after every test, once podman
had time to finish the auto-removal of the sandboxes the bridge killed (:func:`containers_left`).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
from bridge_core.runtime.base import OWNER_LABEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

# The shared conftest of integration-tests (a module named after its path under importlib mode).
_shared = importlib.import_module("integration-tests.conftest")

REPO = Path(__file__).resolve().parents[2]
CALL_TIMEOUT = 120.0
"""Bound on one call (the first one starts a sandbox and maybe upstream servers)."""


def real_servers(third_party: Mapping[str, str], work: Path) -> dict[str, Any]:
    """An ``mcpServers`` map of the real offline servers, with fresh data under ``work``."""
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    return {
        "filesystem": {"command": third_party["MCP_SERVER_FILESYSTEM"], "args": [str(data)]},
        "memory": {
            "command": third_party["MCP_SERVER_MEMORY"],
            "env": {"MEMORY_FILE_PATH": str(work / "memory.jsonl")},
        },
        "time": {"command": third_party["MCP_SERVER_TIME"], "args": ["--local-timezone", "UTC"]},
        "everything": {"command": third_party["MCP_SERVER_EVERYTHING"], "args": ["stdio"]},
    }


def owned_containers(pid: int) -> list[str]:
    """Names of containers (running or not) whose owner label names bridge process ``pid``."""
    listed = subprocess.run(
        [
            _shared.TEST_RUNTIME,
            "ps",
            "--all",
            "--filter",
            f"label={OWNER_LABEL}",
            "--format",
            f'{{{{.Names}}}}\t{{{{index .Labels "{OWNER_LABEL}"}}}}'
            if _shared.TEST_RUNTIME == "podman"
            else f'{{{{.Names}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}',
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rows = [line.split("\t") for line in listed.stdout.splitlines() if "\t" in line]
    return [name for name, owner in rows if owner.startswith(f"{pid}:")]


async def containers_left(pid: int, *, since: float) -> list[str]:
    """Containers of bridge ``pid`` that podman still has once it finished removing the ones
    the bridge killed; ``since``: a time before the bridge began to stop (or was killed)."""
    await _shared.wait_until_removed(owned_containers(pid), since=since)
    return owned_containers(pid)


def bridge_pids(state_dir: Path) -> list[int]:
    """Pids of bridge processes started with ``--state-dir state_dir`` (from /proc).

    A child the bridge has forked but not yet exec'd (a subprocess being started) shows the
    bridge's argv for a moment; it is not a bridge, so processes whose parent is one are left out.
    """
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if b"mcp_code_execution_mode" in argv and str(state_dir).encode() in argv:
            # The parent pid is the second field after the parenthesised command name.
            parents[int(entry.name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return sorted(pid for pid, parent in parents.items() if parent not in parents)


def _texts(result: Any) -> list[str]:
    return [block.text for block in result.content if getattr(block, "type", "") == "text"]


def _bridge_speaks(result: Any) -> bool:
    payload = result.structured_content or {}
    return payload.get("status") != "ok" or bool(payload.get("notices"))


def code_text(result: Any) -> str:
    """The code's block of a run_python result ("" when the code produced nothing)."""
    texts = _texts(result)
    if _bridge_speaks(result):
        texts = texts[:-1]
    return texts[0] if texts else ""


def bridge_text(result: Any) -> str:
    """The bridge's block of a run_python result ("" when the bridge had nothing to say)."""
    texts = _texts(result)
    return texts[-1] if texts and _bridge_speaks(result) else ""


@dataclass
class BridgeClient:
    session: ClientSession
    state_dir: Path

    async def run(self, code: str, **arguments: Any) -> Any:
        with anyio.fail_after(CALL_TIMEOUT + 10):
            return await self.session.call_tool(
                "run_python", {"code": code, **arguments}, read_timeout_seconds=CALL_TIMEOUT
            )


def bridge_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    # The image under test, and where its engine is (scripts/prepare-remote's settings).
    for name in ("MCP_BRIDGE_IMAGE", *_shared.REMOTE_VARIABLES):
        if value := os.environ.get(name):
            env[name] = value
    env.update({"MCP_BRIDGE_DISCOVER": "false", "MCP_BRIDGE_LOG_LEVEL": "info"})
    if _shared.TEST_RUNTIME != "podman":
        env["MCP_BRIDGE_RUNTIME"] = _shared.TEST_RUNTIME
    env.update(extra or {})
    return env


@asynccontextmanager
async def open_bridge(
    work: Path,
    *,
    servers: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    check_orphans: bool = True,
    client_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[BridgeClient]:
    """Start the bridge subprocess, yield a connected client; afterwards, assert no orphans.

    ``client_options`` go to the SDK's ``ClientSession``: ``elicitation_callback``,
    ``sampling_callback``, ``list_roots_callback``, ``logging_callback`` (a callback given
    declares the capability, as a real client with that feature does)."""
    config = work / "servers.json"
    text = json.dumps({"mcpServers": dict(servers or {})})
    await anyio.to_thread.run_sync(lambda: work.mkdir(parents=True, exist_ok=True))
    await anyio.to_thread.run_sync(lambda: config.write_text(text, encoding="utf-8"))
    state_dir = work / "state"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_code_execution_mode", "--state-dir", str(state_dir), *args],
        env=bridge_env({"MCP_BRIDGE_CONFIG": str(config), **(env or {})}),
    )
    pids: list[int] = []
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, **dict(client_options or {})) as session,
    ):
        with anyio.fail_after(60):
            await session.initialize()
        pids = bridge_pids(state_dir)
        yield BridgeClient(session, state_dir)
        closing = time.time()
    if check_orphans:
        for pid in pids:
            left = await containers_left(pid, since=closing)
            assert left == [], f"bridge {pid} left containers behind"


# --- the bridge over streamable HTTP -------------------------------------------------------------

HTTP_START_TIMEOUT = 60.0
"""Bound on the bridge process starting to serve HTTP (imports, discovery, binding)."""


class StreamLog:
    """Everything a process wrote to a pipe, read continuously (a full pipe would block it)."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._grew = anyio.Event()

    @property
    def text(self) -> str:
        if len(self._chunks) > 1:  # joined on demand: appending stays linear under a log flood
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    def append(self, chunk: bytes) -> None:
        self._chunks.append(chunk.decode(errors="replace"))
        self._grew.set()
        self._grew = anyio.Event()

    async def wait_for(self, needle: str, *, start: int = 0, within: float = 60.0) -> int:
        """Wait until ``needle`` appears at or after offset ``start``; return the offset past it."""
        with anyio.fail_after(within):
            while (found := self.text.find(needle, start)) < 0:
                await self._grew.wait()
        return found + len(needle)


@dataclass
class HttpBridge:
    """A bridge process serving streamable HTTP."""

    url: str
    pid: int
    state_dir: Path
    stderr: StreamLog
    """What the bridge logged (info level) so far."""

    def http(self, token: str | None = None) -> httpx2.AsyncClient:
        """An HTTP client for this bridge (with a bearer token if given), SDK-like timeouts."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        # The SDK's own timeouts: a response stream may stay open for minutes.
        return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))

    @asynccontextmanager
    async def session(
        self, token: str | None = None, *, client_options: Mapping[str, Any] | None = None
    ) -> AsyncIterator[BridgeClient]:
        """A connected, initialized SDK client session (the 2025 handshake, GET stream open);
        ``client_options`` as for :func:`open_bridge`."""
        async with (
            self.http(token) as http,
            streamable_http_client(self.url, http_client=http) as (read, write),
            ClientSession(read, write, **dict(client_options or {})) as session,
        ):
            with anyio.fail_after(60):
                await session.initialize()
            yield BridgeClient(session, self.state_dir)


@asynccontextmanager
async def open_http_bridge(
    work: Path,
    *,
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    servers: Mapping[str, Any] | None = None,
) -> AsyncIterator[HttpBridge]:
    """Start ``serve --http HOST:PORT``; yield once it serves; afterwards, assert no orphans."""
    config = work / "servers.json"
    text = json.dumps({"mcpServers": dict(servers or {})})
    await anyio.to_thread.run_sync(lambda: work.mkdir(parents=True, exist_ok=True))
    await anyio.to_thread.run_sync(lambda: config.write_text(text, encoding="utf-8"))
    state_dir = work / "state"
    argv = [
        sys.executable, "-m", "mcp_code_execution_mode", "serve",
        "--http", f"{host}:0", "--state-dir", str(state_dir),
    ]  # fmt: skip
    log, out = StreamLog(), StreamLog()
    process = await anyio.open_process(
        argv, env=bridge_env({"MCP_BRIDGE_CONFIG": str(config), **(env or {})})
    )
    assert process.stderr is not None
    assert process.stdout is not None
    streams = ((process.stderr, log), (process.stdout, out))

    async def drain(stream: anyio.abc.ByteReceiveStream, into: StreamLog) -> None:
        async for chunk in stream:
            into.append(chunk)

    async with process, anyio.create_task_group() as tg:
        for stream, into in streams:
            tg.start_soon(drain, stream, into)
        try:
            # `serve --http` prints its URL once it is ready (port 0: a free port is chosen).
            start = await out.wait_for("serving MCP at ", within=HTTP_START_TIMEOUT)
            end = await out.wait_for("\n", start=start)
            url = out.text[start : end - 1]
            yield HttpBridge(url, process.pid, state_dir, log)
        finally:
            stopping = time.time()
            process.terminate()
            with anyio.fail_after(30):
                await process.wait()
            tg.cancel_scope.cancel()
    left = await containers_left(process.pid, since=stopping)
    assert left == [], f"bridge {process.pid} left containers behind"
