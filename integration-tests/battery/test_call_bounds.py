"""What sandbox code makes the host hold or write through its tool calls is bounded, through the
real bridge (stdio, MCP SDK client), real podman and a real upstream server: calls in flight and
their bytes, audit records, names quoted in errors, and the fields of a result it forges.
"""

from __future__ import annotations

import json
import sys
import time
from ast import literal_eval
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    CALL_TIMEOUT,
    bridge_pids,
    code_text,
    open_bridge,
    payload_of,
    peak_rss_mib,
    text_of,
)
from .test_hostile_protocol import CHANNEL

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
SERVERS = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}

FLOOD_CALLS = 6000
FLOOD = f"""
import asyncio
from mcp import mcp_servers, ToolError
pad = "x" * 100_000
async def one():
    try:
        await mcp_servers["probe"].sleep(seconds=10, pad=pad)
        return "ok"
    except ToolError as exc:
        return f"{{type(exc).__name__}} {{exc.code}}"
print("flooding", flush=True)
outcomes = await asyncio.gather(*(one() for _ in range({FLOOD_CALLS})))
sorted((o, outcomes.count(o)) for o in set(outcomes))
"""
RSS_BOUND_MIB = 200
"""Growth of the bridge's peak RSS allowed under the flood. Without the bounds the bridge held
every call: 600 MB of arguments in flight, over 1 GiB of RSS."""


async def test_a_flood_of_concurrent_large_calls_is_bounded_and_other_sessions_answer(
    tmp_path: Path, sandbox_image: str
) -> None:
    flooding = anyio.Event()
    flood_done = False
    flood_result: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "flooding":
            flooding.set()

    async with open_bridge(tmp_path, servers=SERVERS) as bridge:
        (pid,) = bridge_pids(bridge.state_dir)
        await bridge.run("1", session="other")  # started before, so no start-up is measured
        await bridge.run("await mcp_servers['probe'].echo(text='warm')")
        before = peak_rss_mib(pid)

        async def flood() -> None:
            nonlocal flood_done
            with anyio.fail_after(CALL_TIMEOUT):
                flood_result.append(
                    await bridge.session.call_tool(
                        "run_python",
                        {"code": FLOOD, "timeout": 110},
                        read_timeout_seconds=CALL_TIMEOUT,
                        progress_callback=on_progress,
                    )
                )
            flood_done = True

        async with anyio.create_task_group() as group:
            group.start_soon(flood)
            with anyio.fail_after(CALL_TIMEOUT):
                await flooding.wait()
            started = time.monotonic()
            other = await bridge.run("1 + 1", session="other")
            latency = time.monotonic() - started
            answered_while_flooding = not flood_done
        peak = peak_rss_mib(pid)
        after = await bridge.run("await mcp_servers['probe'].echo(text='after')")
    (flooded,) = flood_result
    outcomes = dict(literal_eval(code_text(flooded).split("[result] ")[-1]))
    print(
        f"bridge peak RSS {before:.0f} MiB before, {peak:.0f} MiB after {FLOOD_CALLS} concurrent "
        f"calls of 100 KB; outcomes {outcomes}; the other session answered in {latency:.2f} s"
    )
    assert payload_of(flooded)["status"] == "ok", payload_of(flooded)
    assert text_of(other) == "2"
    assert answered_while_flooding
    assert set(outcomes) == {"ok", "TooManyCalls 209"}
    assert sum(outcomes.values()) == FLOOD_CALLS
    assert peak - before < RSS_BOUND_MIB
    assert text_of(after) == "'after'"


NAMES = """
from mcp import mcp_servers, ToolError
big = "k" * 4_000_000
for _ in range(4):
    await mcp_servers["probe"].echo(text="x", **{big: 1})
# A tool name no listing offers: a raw call, as hostile code can always send.
echo = mcp_servers["probe"].echo
Tool, registry = type(echo), echo._registry
try:
    await Tool("probe", "t" * 4_000_000, registry)(text="x")
except ToolError as exc:
    refused = [type(exc).__name__, len(str(exc)), len(repr(exc.data))]
refused
"""


async def test_huge_argument_and_tool_names_leave_bounded_audit_records_and_errors(
    tmp_path: Path, sandbox_image: str
) -> None:
    audit, log = tmp_path / "audit.jsonl", tmp_path / "bridge.log"
    env = {"MCP_BRIDGE_AUDIT_LOG": str(audit), "MCP_BRIDGE_LOG_FILE": str(log)}
    async with open_bridge(tmp_path, servers=SERVERS, env=env) as bridge:
        result = await bridge.run(NAMES, timeout=110)
    assert payload_of(result)["status"] == "ok", payload_of(result)
    kind, message_chars, data_chars = literal_eval(code_text(result))
    lines = audit.read_bytes().splitlines()
    print(f"audit: {len(lines)} records, {audit.stat().st_size} bytes for 20 MB of names")
    assert kind == "UnknownTool"
    assert message_chars < 1000
    assert data_chars < 1000
    assert len(lines) == 5
    assert all(len(line) <= 16 * 1024 for line in lines)
    records = [json.loads(line) for line in lines]
    assert [r["outcome"] for r in records] == ["ok"] * 4 + ["unknown_tool"]
    assert all(len(name) <= 49 for r in records for name in r["arguments"])
    assert len(records[4]["tool"]) <= 129
    assert log.stat().st_size < 64 * 1024


FORGE = """
import os, socket
from bridge_protocol import encode
from bridge_protocol.messages import ErrorInfo, Result
from mcp import mcp_servers
execution = mcp_servers["probe"].echo._registry._execution
big = "v" * 4_000_000  # three of them and the type: just under the 16 MiB frame limit
error = ErrorInfo(type="T" * 1_000_000, message=big, traceback=big)
forged = Result(execution_id=execution, status="error", value=big, error=error)
channel_writer().sendall(encode(forged))
import time
time.sleep(30)
"""


async def test_a_forged_result_is_held_to_the_sandbox_clients_own_caps(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, servers=SERVERS) as bridge:
        forged = await bridge.run(CHANNEL + FORGE, timeout=60)
    payload = payload_of(forged)
    shown = "".join(block.text for block in forged.content if hasattr(block, "text"))
    assert payload["status"] == "error"
    assert len(payload["error"]["type"]) <= 200
    assert len(payload["error"]["message"]) <= 16 * 1024
    # 12 MB forged; what reaches the MCP client is the value, message and traceback at their caps
    # (10,000 + 16 KiB + 64 KiB), each shown once.
    assert shown.count("v") <= 10_000 + 16 * 1024 + 64 * 1024 + 100
    assert len(shown) < 100 * 1024
