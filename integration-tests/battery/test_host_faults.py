"""Faults on the host side, through the real bridge subprocess (stdio, MCP SDK client) and real
podman: misbehaving upstream servers, a container killed from outside, the podman API service
restarted, a client that cancels, disconnects or sends junk, and a SIGKILLed bridge.

Each fault must reach sandbox code (or the client) as a clear, specific error, keep the output
already produced, and leave the bridge healthy for the next call.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from ast import literal_eval
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.shared.exceptions import MCPError

from .conftest import (
    TEST_RUNTIME,
    bridge_env,
    bridge_pids,
    code_text,
    containers_left,
    open_bridge,
    owned_containers,
)

pytestmark = [pytest.mark.container, pytest.mark.engine]

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
EXIT_TIMEOUT = 60.0
"""Bound on a bridge (or a server) exiting after its input closed: teardown removes containers."""


def _probe(mode: str = "normal") -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(PROBE), "--mode", mode]}


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


CATCH = """
from mcp import mcp_servers, ToolError
print("before the call", flush=True)
try:
    await mcp_servers[{server!r}].{call}
except ToolError as exc:
    caught = [type(exc).__name__, exc.server, str(exc)]
caught
"""


def _caught(result: types.CallToolResult) -> list[str]:
    """The ``[class name, server, message]`` the CATCH snippet returns."""
    assert result.is_error is False, result.structured_content
    printed, _, shown = code_text(result).partition("\n[result] ")
    assert printed == "before the call"
    value = literal_eval(shown)  # a list literal rendered by repr()
    assert isinstance(value, list)
    return value


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def _wait_gone(pid: int) -> None:
    """Return once ``pid`` exited (pidfd readability is the kernel's exit event)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)


# --- upstream servers -------------------------------------------------------------------------


async def test_upstream_crash_mid_call_is_upstream_unavailable_naming_server_and_it_restarts(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, servers={"probe": _probe()}) as bridge:
        caught = await bridge.run(
            CATCH.format(server="probe", call="crash(status=7, message='probe is dying')")
        )
        uncaught = await bridge.run(
            "print('kept', flush=True)\n"
            "await mcp_servers['probe'].crash(status=9, message='dying again')"
        )
        after = await bridge.run("await mcp_servers['probe'].echo(text='back')")
    kind, server, message = _caught(caught)
    assert (kind, server) == ("UpstreamUnavailable", "probe")
    assert "'probe'" in message
    assert "status 7" in message
    assert "probe is dying" in message  # the stderr tail
    assert uncaught.is_error is True
    assert code_text(uncaught).startswith("kept\n[traceback]\n")
    assert uncaught.structured_content["error"]["type"].endswith("UpstreamUnavailable")
    assert "'probe'" in uncaught.structured_content["error"]["message"]
    assert after.is_error is False
    assert _text(after).endswith("'back'")


async def test_hanging_upstream_call_is_tool_timeout_naming_server_and_next_call_works(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_CALL_TIMEOUT": "2s"}
    async with open_bridge(tmp_path, servers={"probe": _probe()}, env=env) as bridge:
        hung = await bridge.run(CATCH.format(server="probe", call="hang()"))
        after = await bridge.run("await mcp_servers['probe'].echo(text='still here')")
    kind, server, message = _caught(hung)
    assert (kind, server) == ("ToolTimeout", "probe")
    assert "probe.hang" in message
    assert _text(after).endswith("'still here'")


async def test_server_that_never_answers_initialize_is_unavailable_and_others_still_work(
    tmp_path: Path, sandbox_image: str
) -> None:
    servers = {"mute": _probe("no-init"), "probe": _probe()}
    # The working server must start within it too: 3 s was too short for a Python MCP server on
    # a loaded 2-core machine (two engine runs at once in CI).
    env = {"MCP_BRIDGE_SERVER_START_TIMEOUT": "10s"}
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        mute = await bridge.run(CATCH.format(server="mute", call="echo(text='hi')"))
        other = await bridge.run("await mcp_servers['probe'].echo(text='fine')")
        health = await bridge.run("6 * 7")
    kind, server, message = _caught(mute)
    assert (kind, server) == ("UpstreamUnavailable", "mute")
    assert "'mute'" in message
    assert "initialize" in message
    assert _text(other).endswith("'fine'")
    assert _text(health).endswith("42")


async def test_junk_on_stdout_before_json_rpc_does_not_stop_the_server_from_answering(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, servers={"noisy": _probe("junk-stdout")}) as bridge:
        result = await bridge.run("await mcp_servers['noisy'].echo(text='clean')")
    assert result.is_error is False, result.structured_content
    assert _text(result).endswith("'clean'")


async def test_enormous_upstream_result_is_a_clear_error_or_exact_and_bridge_stays_healthy(
    tmp_path: Path, sandbox_image: str
) -> None:
    # 4 MiB fits a frame and must arrive exactly; 20 MiB exceeds the 16 MiB frame limit and must
    # be refused by the host with an error naming the server, not end the session.
    code = (
        "from mcp import ToolError\n"
        "size = len(await mcp_servers['probe'].huge(size=4 * 1024 * 1024))\n"
        "try:\n"
        "    await mcp_servers['probe'].huge(size=20 * 1024 * 1024)\n"
        "    outcome = 'returned'\n"
        "except ToolError as exc:\n"
        "    outcome = [type(exc).__name__, exc.server, str(exc)[:300]]\n"
        "[size, outcome]"
    )
    async with open_bridge(tmp_path, servers={"probe": _probe()}) as bridge:
        result = await bridge.run(code)
        after = await bridge.run("await mcp_servers['probe'].echo(text='ok')")
    assert result.is_error is False, result.structured_content
    size, outcome = literal_eval(code_text(result))
    assert size == 4 * 1024 * 1024
    assert outcome[1] == "probe", outcome
    assert "probe.huge" in outcome[2]  # the message names the server and tool
    assert "exceeds the maximum" in outcome[2]
    assert _text(after).endswith("'ok'")


async def test_server_missing_from_path_is_unavailable_naming_server_and_command(
    tmp_path: Path, sandbox_image: str
) -> None:
    servers = {"ghost": {"command": "mcp-server-that-is-not-installed"}, "probe": _probe()}
    async with open_bridge(tmp_path, servers=servers) as bridge:
        ghost = await bridge.run(CATCH.format(server="ghost", call="anything()"))
        other = await bridge.run("await mcp_servers['probe'].echo(text='fine')")
    kind, server, message = _caught(ghost)
    assert (kind, server) == ("UpstreamUnavailable", "ghost")
    assert "'ghost'" in message
    assert "mcp-server-that-is-not-installed" in message
    assert _text(other).endswith("'fine'")


# --- the runtime ------------------------------------------------------------------------------


async def test_container_killed_from_outside_keeps_output_and_next_call_gets_a_new_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "started":
            started.set()

    result: types.CallToolResult | None = None

    async def run_slow(bridge: Any) -> None:
        nonlocal result
        result = await bridge.session.call_tool(
            "run_python",
            {"code": "import time\nprint('started', flush=True)\ntime.sleep(120)"},
            read_timeout_seconds=120,
            progress_callback=on_progress,
        )

    async with open_bridge(tmp_path, env={"MCP_BRIDGE_POOL_SIZE": "0"}) as bridge:
        await bridge.run("before = 1")
        (pid,) = bridge_pids(bridge.state_dir)
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_slow, bridge)
            with anyio.fail_after(60):
                await started.wait()
            for name in owned_containers(pid):
                await anyio.run_process([TEST_RUNTIME, "kill", name], check=False)
        after = await bridge.run("'before' in globals()")
    assert result is not None
    assert result.is_error is True
    assert result.structured_content["status"] == "crashed"
    assert code_text(result) == "started"
    assert after.is_error is False
    # A new sandbox, restored to the state after the last successful execution, and it says so.
    assert _text(after).endswith("True")
    assert any("restored" in notice for notice in after.structured_content["notices"])


class _PodmanService:
    """A ``podman system service`` on a private socket, started the way scripts/prepare-host
    starts the machine's shared one (``--time=0``, its own session)."""

    def __init__(self, socket: Path) -> None:
        self.socket = anyio.Path(socket)
        self.process: Process | None = None

    async def start(self) -> None:
        await self.socket.unlink(missing_ok=True)  # a dead service's socket blocks the bind
        self.process = await anyio.open_process(
            ["podman", "system", "service", "--time=0", f"unix://{self.socket}"],
            stdin=None,
            stdout=None,
            stderr=None,
            start_new_session=True,
        )
        with anyio.fail_after(60):
            # The service signals readiness only by creating its socket.
            while not await self.socket.exists():  # noqa: ASYNC110
                await anyio.sleep(0.05)

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            with anyio.fail_after(30, shield=True):
                await self.process.wait()


@pytest.mark.skipif(
    TEST_RUNTIME != "podman",
    reason="podman's API service; a docker daemon that stops answering: "
    "runtime/test_docker_faults.py",
)
@pytest.mark.skipif(
    bool(os.environ.get("MCP_BRIDGE_RUNTIME_URL")),
    reason="a private podman service on this machine; an engine over ssh whose link (and so its "
    "API) drops: battery/test_remote_engine.py",
)
async def test_podman_api_service_restarted_mid_session_keeps_session_and_new_ones_start(
    sandbox_image: str, tmp_path: Path
) -> None:
    # A private service, not the machine's shared one that other test runs use at the same time;
    # a short directory because unix socket paths are limited to 107 bytes.
    short = Path(tempfile.mkdtemp(prefix="svc", dir="/tmp"))
    service = _PodmanService(short / "podman.sock")
    await service.start()
    try:
        env = {"CONTAINER_HOST": f"unix://{service.socket}", "MCP_BRIDGE_POOL_SIZE": "0"}
        async with open_bridge(tmp_path, env=env) as bridge:
            await bridge.run("kept = 'value'")
            await service.kill()
            during = await bridge.run("kept")  # the channel does not go through the API
            down = await bridge.run("1", session="while-down")
            await service.start()
            fresh = await bridge.run("2 + 2", session="after-restart")
            still = await bridge.run("kept")
    finally:
        await service.kill()  # whatever happened, the service started here is stopped
        await service.socket.unlink(missing_ok=True)
        await anyio.to_thread.run_sync(short.rmdir)
    assert _text(during).endswith("'value'")
    assert down.is_error is True
    assert f"podman at unix://{service.socket}" in _text(down)  # names the API that failed
    assert _text(fresh).endswith("4")
    assert _text(still).endswith("'value'")


# --- the client -------------------------------------------------------------------------------


async def test_client_cancel_mid_tool_call_cancels_it_upstream_and_bridge_stays_healthy(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, servers={"probe": _probe()}) as bridge:
        await bridge.run("await mcp_servers['probe'].echo(text='warm')")
        with anyio.fail_after(60), pytest.raises(MCPError):
            # The SDK client sends notifications/cancelled when its read timeout passes.
            await bridge.session.call_tool(
                "run_python",
                {"code": "await mcp_servers['probe'].hang()"},
                read_timeout_seconds=3,
            )
        seen = await bridge.run("await mcp_servers['probe'].wait_cancelled(count=1)")
        after = await bridge.run("6 * 7")
    assert seen.is_error is False, seen.structured_content
    assert int(literal_eval(code_text(seen))) >= 1
    assert _text(after).endswith("42")


class RawBridge:
    """The bridge subprocess spoken to in raw JSON-RPC lines (no SDK client in between)."""

    def __init__(self, process: Process, state_dir: Path) -> None:
        self.process = process
        self.state_dir = state_dir
        assert process.stdout is not None
        self._lines = BufferedByteReceiveStream(process.stdout)

    async def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.process.stdin.send(raw + b"\n")

    async def receive(self) -> dict[str, Any]:
        line = await self._lines.receive_until(b"\n", 64 * 1024 * 1024)
        value = json.loads(line)
        assert isinstance(value, dict)
        return value

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """The response to ``request_id`` (notifications and other responses are skipped)."""
        while True:
            message = await self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message

    async def initialize(self) -> None:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test-client", "version": "0"},
                },
            }
        )
        with anyio.fail_after(60):
            reply = await self.answer("init")
        assert "result" in reply, reply
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def run_request(self, request_id: Any, code: str, **meta: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": "run_python", "arguments": {"code": code}}
        if meta:
            params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@asynccontextmanager
async def _raw_bridge(work: Path, servers: dict[str, Any]) -> AsyncIterator[RawBridge]:
    await anyio.Path(work).mkdir(parents=True, exist_ok=True)
    config = work / "servers.json"
    await anyio.Path(config).write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    state_dir = work / "state"
    command = [sys.executable, "-m", "mcp_code_execution_mode", "--state-dir", str(state_dir)]
    process = await anyio.open_process(
        command, env=bridge_env({"MCP_BRIDGE_CONFIG": str(config)}), stderr=None
    )
    started = time.time()
    try:
        yield RawBridge(process, state_dir)
    finally:
        if process.returncode is None:
            process.terminate()
            with anyio.fail_after(EXIT_TIMEOUT, shield=True):
                await process.wait()
        assert await containers_left(process.pid, since=started) == []


async def test_client_disconnect_mid_call_ends_bridge_cleanly_without_containers_or_servers(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with _raw_bridge(tmp_path, {"probe": _probe()}) as bridge:
        await bridge.initialize()
        await bridge.send(bridge.run_request(1, "await mcp_servers['probe'].env()"))
        with anyio.fail_after(120):
            reply = await bridge.answer(1)
        server_pid = literal_eval(reply["result"]["content"][0]["text"])["pid"]
        code = "print('waiting', flush=True)\nawait mcp_servers['probe'].hang()"
        await bridge.send(bridge.run_request(2, code, progressToken="p2"))
        with anyio.fail_after(60):
            while (await bridge.receive()).get("params", {}).get("message") != "waiting":
                pass
        assert bridge.process.stdin is not None
        closed = time.time()
        await bridge.process.stdin.aclose()  # the client goes away mid-call
        with anyio.fail_after(EXIT_TIMEOUT):
            status = await bridge.process.wait()
        assert status == 0
        assert await containers_left(bridge.process.pid, since=closed) == []
        assert not _alive(server_pid)


async def test_malformed_json_rpc_gets_error_answers_and_bridge_keeps_serving(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with _raw_bridge(tmp_path, {}) as bridge:
        await bridge.initialize()
        await bridge.send(b"{this is not json")
        await bridge.send(b"\xff\xfe\x00 binary junk")
        await bridge.send({"jsonrpc": "2.0", "id": "types", "method": "tools/call", "params": 5})
        await bridge.send(
            {
                "jsonrpc": "2.0",
                "id": "args",
                "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": 12}},
            }
        )
        await bridge.send({"jsonrpc": "2.0", "id": "unknown", "method": "no/such/method"})
        await bridge.send(
            {
                "jsonrpc": "2.0",
                "id": "huge",
                "method": "ping",
                "params": {"pad": "x" * (8 * 1024 * 1024)},
            }
        )
        await bridge.send(b"[" * 100_000)  # deep nesting as one line
        await bridge.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        answers: dict[str, dict[str, Any]] = {}
        unnamed: list[dict[str, Any]] = []
        with anyio.fail_after(60):
            while "list" not in answers:
                message = await bridge.receive()
                if isinstance(message.get("id"), str):
                    answers[message["id"]] = message
                elif "id" in message and message["id"] is None:
                    unnamed.append(message)
        await bridge.send(bridge.run_request("run", "6 * 7"))
        with anyio.fail_after(120):
            run = await bridge.answer("run")
    # Not JSON (bad text, binary, nesting past the parser's depth): parse errors, id null.
    assert [m["error"]["code"] for m in unnamed] == [-32700, -32700, -32700]
    assert answers["types"]["error"]["code"] == -32600  # JSON, but not a valid request
    assert answers["unknown"]["error"]["code"] == -32601
    assert answers["huge"]["result"] == {}
    assert answers["args"]["result"]["isError"] is True  # a tool-level error naming `code`
    assert [t["name"] for t in answers["list"]["result"]["tools"]] == ["run_python"]
    assert run["result"]["content"] == [{"type": "text", "text": "42"}]


async def test_sigkilled_bridge_leaves_no_upstream_server_process_after_next_start(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(
        tmp_path / "first", servers={"probe": _probe()}, check_orphans=False
    ) as bridge:
        info = await bridge.run("await mcp_servers['probe'].env()")
        child = await bridge.run("await mcp_servers['probe'].spawn_child()")
        server_pid = literal_eval(code_text(info))["pid"]
        child_pid = int(literal_eval(code_text(child)))
        (killed,) = bridge_pids(bridge.state_dir)
        assert _alive(server_pid)
        assert _alive(child_pid)
        killed_at = time.time()
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(MCPError):
            await bridge.run("1")
    # The next bridge on the same state dir ends what the killed one left.
    async with open_bridge(tmp_path / "first", servers={"probe": _probe()}) as bridge:
        await bridge.run("1 + 1")
        with anyio.fail_after(EXIT_TIMEOUT):
            await _wait_gone(server_pid)
            await _wait_gone(child_pid)
        assert await containers_left(killed, since=killed_at) == []


async def test_sigterm_while_the_client_keeps_stdin_open_exits_promptly_without_containers(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A supervisor stopping the bridge does not close its stdin first; the stdin reader used to
    # block in a thread that cancellation cannot stop, so the bridge cleaned up and never exited.
    async with _raw_bridge(tmp_path, {}) as bridge:
        await bridge.initialize()
        await bridge.send(bridge.run_request(1, "x = 1"))
        with anyio.fail_after(120):
            await bridge.answer(1)
        assert owned_containers(bridge.process.pid)
        terminated = time.time()
        bridge.process.terminate()
        with anyio.fail_after(EXIT_TIMEOUT):
            status = await bridge.process.wait()
        assert status == 0
        assert await containers_left(bridge.process.pid, since=terminated) == []
