"""No container outlives its bridge, whatever the number of sessions and however the bridge ends.

Through the real bridge (stdio, the official MCP SDK client) and real podman. Closing the client
runs the SDK's own shutdown sequence: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL. A bridge killed
outright gets no say at all: its sandboxes must end by themselves (their channel hits EOF) and
podman's auto-removal deletes them, without a next bridge start to sweep them up. A bridge the
client closes waits (a bounded time) for the engine to remove what it killed: once it has
exited, nothing of it is listed any more.

Containers are counted by THIS bridge's owner label only: other bridges run on this host, and
each one removes the containers of dead bridges when it starts. So the bridge runs under
``servers/unreaped_parent.py`` and stays an unreaped zombie (its pid and start time, hence its
ownership, still valid) until the test has looked: only the sandboxes and podman can have removed
its containers.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from bridge_core._ownership import process_start_time
from bridge_core.runtime.base import OWNER_LABEL
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from .conftest import (
    CALL_TIMEOUT,
    TEST_RUNTIME,
    BridgeClient,
    bridge_env,
    code_text,
    containers_left,
    owned_containers,
)

pytestmark = [pytest.mark.container, pytest.mark.engine]

UNREAPED_PARENT = Path(__file__).resolve().parents[1] / "servers" / "unreaped_parent.py"
_PR_SET_CHILD_SUBREAPER = 36
SESSIONS = 120
"""As many as in the report: 120 sandboxes start in ~75-90 s on a loaded 2-core VM."""
CLOSED_WITH = 12
"""Sessions of the bridge whose close must leave nothing listed: as many as podman removes
within the bridge's wait (``REMOVAL_WAIT``) on a loaded 2-core VM, with the warm pool's."""
STARTS_AT_ONCE = 4
LISTED_AFTER_EXIT = 1.0
"""How long the engine may still list a container once the bridge has exited (its removal was
answered before the bridge exited; a listing may be served just before the commit)."""
GONE_AFTER_SIGKILL = 5.0
"""Issue 34 point 11: within 5 s of a SIGKILL of the bridge, by whatever reaps it (here the
sandboxes themselves, which exit when their channel hits EOF, and podman's auto-removal)."""
SIGKILLED_WITH = 8
"""Sessions of the bridge that is SIGKILLed (with a warm pool of two): podman removes about 20
exited containers a second on a 2-core VM, 120 at once in 6-9 s (docs/performance.md)."""
CLIENT_PATIENCE = 4.0
"""The MCP SDK's stdio client SIGKILLs a server 4 s after closing its stdin (2 s, SIGTERM, 2 s)."""
STUBBORN = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("stubborn", flush=True)
while True:
    try:
        pass
    except BaseException:
        pass
"""
THREAD_LEFT_RUNNING = """
import threading
threading.Thread(target=lambda: [None for _ in iter(int, 1)]).start()
"""


def _set_child_subreaper(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _bridge_pid(state_dir: Path) -> int:
    """The bridge itself (``python -m mcp_code_execution_mode``), not its stand-in parent."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:3] == [b"-m", b"mcp_code_execution_mode"] and str(state_dir).encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no bridge runs with state dir {state_dir}")


@asynccontextmanager
async def _unreaped_bridge(
    work: Path, env: dict[str, str]
) -> AsyncIterator[tuple[BridgeClient, int]]:
    """The bridge under the SDK's stdio client, as the child of ``unreaped_parent.py``; yields
    the client and the bridge's pid. Leave the outer :func:`_adopting` block to reap it."""
    config = work / "servers.json"
    await anyio.Path(work).mkdir(parents=True, exist_ok=True)
    await anyio.Path(config).write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    state_dir = work / "state"
    command = [sys.executable, "-m", "mcp_code_execution_mode", "--state-dir", str(state_dir)]
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(UNREAPED_PARENT), *command],
        env=bridge_env({"MCP_BRIDGE_CONFIG": str(config), **env}),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
        yield BridgeClient(session, state_dir), _bridge_pid(state_dir)


@asynccontextmanager
async def _adopting() -> AsyncIterator[list[int]]:
    """This process adopts orphans (child subreaper) inside the block; afterwards the pids put
    in the yielded list are killed if still running and reaped."""
    adopted: list[int] = []
    _set_child_subreaper(True)
    try:
        yield adopted
    finally:
        _set_child_subreaper(False)
        for pid in adopted:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # not ours: its stand-in still runs
                with anyio.fail_after(CALL_TIMEOUT):
                    await anyio.to_thread.run_sync(os.waitpid, pid, 0)


@pytest.mark.timeout(900)
async def test_client_closing_a_bridge_with_120_sessions_leaves_no_container(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_MAX_SESSIONS": str(SESSIONS + 8)}
    async with _adopting() as adopted:
        async with _unreaped_bridge(tmp_path, env) as (bridge, pid):
            adopted.append(pid)
            await _open_sessions(bridge, SESSIONS)
            assert len(owned_containers(pid)) >= SESSIONS
            closing = time.time()
        # The client closed: stdin, then SIGTERM, then SIGKILL if the bridge still ran.
        assert await containers_left(pid, since=closing) == []


async def _open_sessions(bridge: BridgeClient, count: int) -> None:
    limiter = anyio.CapacityLimiter(STARTS_AT_ONCE)

    async def open_session(index: int) -> None:
        async with limiter:
            result = await bridge.run(f"n = {index}\nn", session=f"s{index}")
        assert code_text(result) == str(index)

    async with anyio.create_task_group() as sessions:
        for index in range(count):
            sessions.start_soon(open_session, index)


async def _listed_after_exit(pid: int, bound: float = LISTED_AFTER_EXIT) -> list[str]:
    """Containers of the exited bridge ``pid`` the engine still lists, asked until none is or
    ``bound`` seconds passed (no sleeps: each listing is a runtime command)."""
    with anyio.move_on_after(bound):
        while left := await anyio.to_thread.run_sync(owned_containers, pid):
            await anyio.lowlevel.checkpoint()
        return []
    return left


async def test_client_closing_a_bridge_leaves_nothing_listed_once_it_exited_even_a_pool_refill(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Every session keeps its container (none hibernates to make room under the default of 8).
    env = {"MCP_BRIDGE_POOL_SIZE": "2", "MCP_BRIDGE_MAX_SESSIONS": str(CLOSED_WITH + 4)}
    async with _adopting() as adopted:
        async with _unreaped_bridge(tmp_path, env) as (bridge, pid):
            adopted.append(pid)
            await _open_sessions(bridge, CLOSED_WITH)
            # Closed at once: the warm pool's refills after the last takes are under way.
            assert len(owned_containers(pid)) >= CLOSED_WITH
            closing = time.monotonic()
        # The client closed (stdin, then SIGTERM, then SIGKILL if the bridge still ran) and the
        # bridge has exited: nothing it started may still be listed, not even being removed.
        took = time.monotonic() - closing
        left = await _listed_after_exit(pid)
        assert left == [], f"{len(left)} container(s) still listed after the bridge exited"
        assert took < CLIENT_PATIENCE, f"the bridge took {took:.1f} s: the client killed it"


async def _running_count(owner: str) -> int:
    listed = await anyio.run_process(
        [TEST_RUNTIME, "ps", "--quiet", f"--filter=label={OWNER_LABEL}={owner}"]
    )
    return len(listed.stdout.split())


async def _wait_running(owner: str, count: int) -> None:
    """Return once ``count`` containers of ``owner`` run (the runtime's start events, no
    sleeps; ``podman events`` ends when podman rotates its event log, then it starts again)."""
    command = [
        TEST_RUNTIME,
        "events",
        f"--since={int(time.time()) - 60}",
        "--filter=event=start",
        f"--filter=label={OWNER_LABEL}={owner}",
        "--format=x",
    ]
    with anyio.fail_after(CALL_TIMEOUT):
        while await _running_count(owner) < count:
            async with await anyio.open_process(command, stderr=subprocess.DEVNULL) as events:
                assert events.stdout is not None
                async for _ in events.stdout:
                    if await _running_count(owner) >= count:
                        break
                with contextlib.suppress(ProcessLookupError):
                    events.kill()


async def test_sigkilled_bridge_leaves_no_sandbox_even_busy_or_warm_and_no_restart_needed(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with _adopting() as adopted:
        await _kill_a_bridge_with_busy_idle_and_warm_sandboxes(tmp_path, adopted)


async def _kill_a_bridge_with_busy_idle_and_warm_sandboxes(work: Path, adopted: list[int]) -> None:
    async with _unreaped_bridge(work, {"MCP_BRIDGE_POOL_SIZE": "2"}) as (bridge, pid):
        adopted.append(pid)
        start_time = process_start_time(pid)
        assert start_time is not None
        owner = f"{pid}:{start_time}"
        await bridge.run("x = 1", session="idle")
        await bridge.run(THREAD_LEFT_RUNNING, session="thread")
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message == "stubborn":
                started.set()

        async def run_stubborn() -> None:
            # Code that ignores interrupts, still running when the bridge dies.
            with pytest.raises(MCPError):
                await bridge.session.call_tool(
                    "run_python",
                    {"code": STUBBORN, "session": "stubborn", "timeout": 600},
                    read_timeout_seconds=CALL_TIMEOUT,
                    progress_callback=on_progress,
                )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run_stubborn)
            with anyio.fail_after(CALL_TIMEOUT):
                await started.wait()
            # Three sessions and a full warm pool of two, all running.
            await _wait_running(owner, 5)
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(MCPError):
            await bridge.run("1")
    # No bridge was started again, and the dead one still owns its containers (unreaped): only
    # the sandboxes themselves and podman can have removed them.
    assert await containers_left(pid, since=killed_at) == []


async def test_sigkilled_bridge_with_several_sessions_has_none_listed_within_five_seconds(
    tmp_path: Path, sandbox_image: str
) -> None:
    if os.environ.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://"):
        # Over ssh a sandbox hears its channel close only when the engine's attach over the
        # link ends: a CI run saw one listed at 5.0 s. The 5 s promise is the local engine's.
        pytest.skip("the 5 s bound after a SIGKILL is measured on a local engine, not over ssh")
    pool = {"MCP_BRIDGE_POOL_SIZE": "2"}
    async with _adopting() as adopted, _unreaped_bridge(tmp_path, pool) as (bridge, pid):
        adopted.append(pid)
        await _open_sessions(bridge, SIGKILLED_WITH)
        assert len(owned_containers(pid)) >= SIGKILLED_WITH
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        # Nothing sweeps them up: no bridge starts again, and the dead one (unreaped) still owns
        # them; only the sandboxes and podman can remove them.
        left = await _listed_after_exit(pid, GONE_AFTER_SIGKILL)
        took = time.monotonic() - killed
        with pytest.raises(MCPError):
            await bridge.run("1")
    assert left == [], f"{len(left)} container(s) still listed {took:.1f} s after the SIGKILL"
