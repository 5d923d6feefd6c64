"""Hostile upstream MCP servers, bounded like hostile sandbox code: through the real bridge
(stdio, MCP SDK client), real podman and real server processes
(``integration-tests/servers/hostile_server.py``, plain JSON-RPC, stdlib only).

- a JSON-RPC line that never ends: the connection is cut at the line bound, the call fails at
  once naming the server and the setting, memory stays bounded, the server is stopped and a
  sibling session keeps answering;
- a malformed tool result, or one past the sandbox's frame limit: an error naming what was
  wrong reaches sandbox code, the server keeps serving;
- a catalog of 100,000 tools: refused naming the setting, memory stays bounded, search still
  answers from the other servers and a sibling session answers meanwhile;
- a daemon started by a server (fork, setsid, fork): gone when the server exits, when the
  bridge exits, when the bridge is SIGKILLed, and (where the bridge can make a cgroup per
  server) when the bridge and the server's supervisor are both SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import sys
from ast import literal_eval
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from .conftest import bridge_pids, code_text, open_bridge, text_of

pytestmark = pytest.mark.container

SERVERS = Path(__file__).resolve().parents[1] / "servers"
HOSTILE = SERVERS / "hostile_server.py"
PROBE = SERVERS / "probe_server.py"
GONE_TIMEOUT = 30.0
"""Bound on a process exiting once the bridge stopped it (stdin close, SIGTERM, SIGKILL: ~7 s)."""
FLOOD_BYTES = 120 * 1024 * 1024
RSS_BOUND_MIB = 64
"""Peak RSS growth allowed while a hostile server floods the bridge: the 32 MiB line bound plus
reading slack, far below what is sent (measured before the bounds: +102 MiB for the 120 MB line,
+751 MiB for the 100,000 tools; after: +32 and +21 MiB)."""


def _hostile(*args: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(HOSTILE), *args]}


def _probe() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(PROBE)]}


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise LookupError(f"no {field} for {pid}")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def _wait_gone(pid: int, seconds: float = GONE_TIMEOUT) -> None:
    """Return once ``pid`` exited (pidfd readability is the kernel's exit event); fail after
    ``seconds``. A zombie (exited, not yet reaped) counts as gone."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with anyio.fail_after(seconds):
            await anyio.wait_readable(fd)
    except TimeoutError:
        raise AssertionError(f"process {pid} is still running {seconds:g}s later") from None
    finally:
        os.close(fd)


CATCH = """
from mcp import mcp_servers, runtime, ToolError
try:
    value = await {call}
    caught = ["returned", str(value)[:200]]
except ToolError as exc:
    caught = [type(exc).__name__, exc.server, str(exc)]
caught
"""


def _value(result: Any) -> Any:
    """The value the code returned (its block holds only the repr: nothing is printed)."""
    assert result.is_error is False, result.content
    return literal_eval(code_text(result))


def _caught(result: Any) -> list[str]:
    value = _value(result)
    assert isinstance(value, list)
    return value


def _json_result(result: Any) -> dict[str, Any]:
    value = _value(result)  # the sandbox decoded the tool's JSON text
    assert isinstance(value, dict), value
    return value


# --- an endless line ----------------------------------------------------------------------------


async def test_an_endless_json_rpc_line_is_cut_at_the_bound_and_the_server_is_stopped(
    tmp_path: Path, sandbox_image: str
) -> None:
    servers = {"hostile": _hostile(), "probe": _probe()}
    env = {"MCP_BRIDGE_CALL_TIMEOUT": "60s"}
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        (pid,) = bridge_pids(bridge.state_dir)
        who = _json_result(await bridge.run("await mcp_servers['hostile'].whoami()"))
        await bridge.run("await mcp_servers['probe'].echo(text='warm')", session="sibling")
        peak_before, cpu_before = _status_kib(pid, "VmHWM"), _cpu_seconds(pid)
        flood = f"mcp_servers['hostile'].flood(size={FLOOD_BYTES})"
        flooded = await bridge.run(CATCH.format(call=flood))
        sibling = await bridge.run(
            "await mcp_servers['probe'].echo(text='still here')", session="sibling"
        )
        peak_after, cpu_after = _status_kib(pid, "VmHWM"), _cpu_seconds(pid)
        growth = (peak_after - peak_before) / 1024
        print(
            f"bridge peak RSS +{growth:.0f} MiB, CPU {cpu_after - cpu_before:.1f} s for a "
            f"{FLOOD_BYTES // 2**20} MiB line; answer: {code_text(flooded)[:200]}"
        )
        await _wait_gone(who["server"])
        again = await bridge.run("await mcp_servers['hostile'].echo(text='restarted')")
    kind, server, message = _caught(flooded)
    assert (kind, server) == ("UpstreamUnavailable", "hostile"), message
    assert "the bridge's fixed bound" in message
    assert "32 MiB" in message
    assert growth < RSS_BOUND_MIB
    assert text_of(sibling).endswith("'still here'")
    assert text_of(again).endswith("'restarted'")  # the next call starts the server again


# --- a malformed or oversized result ---------------------------------------------------------


async def test_a_malformed_or_oversized_tool_result_reaches_sandbox_code_as_a_clear_error(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A tools/call answer is validated by the SDK's session: a result that is not a
    # CallToolResult, or one past the sandbox's frame limit, is an error naming what was wrong;
    # the server and the session keep serving.
    servers = {"hostile": _hostile()}
    malformed = "mcp_servers['hostile'].answer(result={'content': [{'type': 'text', 'text': 5}]})"
    oversized = f"mcp_servers['hostile'].big(size={17 * 1024 * 1024})"
    async with open_bridge(tmp_path, servers=servers) as bridge:
        refused = await bridge.run(CATCH.format(call=malformed))
        too_big = await bridge.run(CATCH.format(call=oversized))
        again = await bridge.run("await mcp_servers['hostile'].echo(text='fine')")
    kind, server, message = _caught(refused)
    assert (kind, server) == ("ToolError", "hostile"), message
    assert "invalid tools/call result: content.0.TextContent.text: Input should be" in message
    kind, server, message = _caught(too_big)
    assert kind == "ToolError", message
    assert "could not be sent to the sandbox" in message
    assert text_of(again).endswith("'fine'")


# --- a huge catalog -----------------------------------------------------------------------------


async def test_a_catalog_of_100k_tools_is_refused_naming_the_setting_and_search_still_answers(
    tmp_path: Path, sandbox_image: str
) -> None:
    servers = {"huge": _hostile("--tools", "100000"), "probe": _probe()}
    async with open_bridge(tmp_path, servers=servers) as bridge:
        (pid,) = bridge_pids(bridge.state_dir)
        await bridge.run("1", session="sibling")
        await bridge.run("1")
        peak_before = _status_kib(pid, "VmHWM")
        results: dict[str, Any] = {}

        async def search() -> None:
            results["search"] = await bridge.run(
                "[(h['server'], h['tool']) for h in "
                "await runtime.search_tool_docs('echo the given text back', limit=3)]"
            )

        async def sibling() -> None:
            results["sibling"] = await bridge.run("6 * 7", session="sibling")

        async with anyio.create_task_group() as tg:
            tg.start_soon(search)
            tg.start_soon(sibling)
        listing = await bridge.run(CATCH.format(call="runtime.query_tool_docs('huge')"))
        call = await bridge.run(CATCH.format(call="mcp_servers['huge'].echo(text='hi')"))
        peak_after = _status_kib(pid, "VmHWM")
    growth = (peak_after - peak_before) / 1024
    print(f"bridge peak RSS +{growth:.0f} MiB for a server listing 100,000 tools")
    hits = _value(results["search"])
    assert ("probe", "echo") in hits
    assert all(server != "huge" for server, _ in hits)
    assert text_of(results["sibling"]).endswith("42")
    for refused in (listing, call):
        kind, server, message = _caught(refused)
        assert (kind, server) == ("UpstreamUnavailable", "huge"), message
        assert "[servers] max_tool_list_size" in message
    assert growth < RSS_BOUND_MIB


# --- daemons of a server ------------------------------------------------------------------------


SPAWN = "await mcp_servers['hostile'].spawn_daemon()"


async def test_a_daemon_started_by_a_server_is_gone_when_the_server_exits_and_when_the_bridge_exits(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, servers={"hostile": _hostile()}) as bridge:
        first = _json_result(await bridge.run(SPAWN))
        assert _alive(first["daemon"])
        exited = await bridge.run(CATCH.format(call="mcp_servers['hostile'].exit(status=3)"))
        await _wait_gone(first["daemon"])  # the server exited on its own: its daemon goes too
        second = _json_result(await bridge.run(SPAWN))  # a restarted server, a new daemon
        assert _alive(second["daemon"])
    await _wait_gone(second["daemon"])  # the bridge exited normally
    assert _caught(exited)[0] == "UpstreamUnavailable"


async def test_a_daemon_started_by_a_server_is_gone_after_the_bridge_is_sigkilled_and_restarted(
    tmp_path: Path, sandbox_image: str
) -> None:
    work = tmp_path / "bridge"
    async with open_bridge(work, servers={"hostile": _hostile()}, check_orphans=False) as bridge:
        spawned = _json_result(await bridge.run(SPAWN))
        (killed,) = bridge_pids(bridge.state_dir)
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(MCPError):
            await bridge.run("1")
    async with open_bridge(work, servers={"hostile": _hostile()}) as bridge:
        await bridge.run("1 + 1")
        await _wait_gone(spawned["daemon"])
        await _wait_gone(spawned["server"])


def _cgroups_apply() -> bool:
    """Where per-server cgroups must work: root, with a cgroup2 hierarchy mounted."""
    if os.geteuid() != 0:
        return False
    with open("/proc/self/mountinfo") as mounts:
        return any(" - cgroup2 " in line for line in mounts)


async def test_a_daemon_survives_neither_a_sigkilled_bridge_nor_its_sigkilled_supervisor(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Only a cgroup per server can catch this: the process watching the server's descendants is
    # killed together with the bridge, so the next bridge must find them by the record it left.
    if not _cgroups_apply():
        pytest.skip("per-server cgroups need root (or a delegated cgroup2) and a cgroup2 mount")
    work = tmp_path / "bridge"
    async with open_bridge(work, servers={"hostile": _hostile()}, check_orphans=False) as bridge:
        spawned = _json_result(await bridge.run(SPAWN))
        (killed,) = bridge_pids(bridge.state_dir)
        supervisor = spawned["server_parent"]
        # Frozen first, so that neither the bridge nor (through its parent-death signal) the
        # supervisor can clean up: both die as if killed at the same instant.
        os.kill(killed, signal.SIGSTOP)
        os.kill(supervisor, signal.SIGKILL)
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(MCPError):
            await bridge.run("1")
    assert _alive(spawned["daemon"])  # nothing alive could have ended it
    async with open_bridge(work, servers={"hostile": _hostile()}) as bridge:
        await bridge.run("1 + 1")
        await _wait_gone(spawned["daemon"])
        await _wait_gone(spawned["server"])
