"""run_python end to end in real podman sandboxes: persistence, sessions, reset, timeout,
cancellation, output modes, images, progress, and no leftovers after a SIGKILLed bridge."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from .conftest import bridge_pids, code_text, containers_left, open_bridge, owned_containers

pytestmark = [pytest.mark.container, pytest.mark.engine]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_variables_persist_across_calls(tmp_path: Path, sandbox_image: str) -> None:
    async with open_bridge(tmp_path) as bridge:
        first = await bridge.run("import math\nradius = 2")
        second = await bridge.run("round(math.pi * radius ** 2, 2)")
    assert first.is_error is False
    assert _text(second) == "12.57"


async def test_named_sessions_are_separate_and_default_is_untouched(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("owner = 'default'")
        await bridge.run("owner = 'alpha'", session="alpha")
        alpha = await bridge.run("owner", session="alpha")
        default = await bridge.run("owner")
        fresh = await bridge.run("'owner' in globals()", session="beta")
    assert _text(alpha) == "'alpha'"
    assert _text(default) == "'default'"
    assert _text(fresh) == "False"
    assert alpha.structured_content["session"] == "alpha"


async def test_reset_gives_a_fresh_namespace(tmp_path: Path, sandbox_image: str) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 1")
        after = await bridge.run("'kept' in globals()", reset=True)
    assert _text(after).endswith("False")


async def test_timeout_returns_partial_output_and_session_recovers(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        slow = await bridge.run(
            "import time\nprint('started', flush=True)\ntime.sleep(60)", timeout=3
        )
        after = await bridge.run("21 * 2")
    assert slow.is_error is True
    assert slow.structured_content["status"] == "timeout"
    assert code_text(slow).startswith("started\n[traceback]\n")
    assert _text(after).endswith("42")


async def test_cancelling_a_running_call_interrupts_it_and_bridge_stays_healthy(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("count = 0")
        with anyio.fail_after(60), pytest.raises(MCPError):
            # The SDK client sends notifications/cancelled when its read timeout passes.
            await bridge.session.call_tool(
                "run_python",
                {"code": "import time\nwhile True:\n    count += 1\n    time.sleep(0.01)"},
                read_timeout_seconds=3,
            )
        after = await bridge.run("count > 0")
    assert after.is_error is False
    assert _text(after).endswith("True")


async def test_compact_and_toon_output_modes(tmp_path: Path, sandbox_image: str) -> None:
    code = "[{'n': i, 'square': i * i} for i in range(12)]"
    async with open_bridge(tmp_path / "compact") as bridge:
        compact = await bridge.run(code)
    async with open_bridge(tmp_path / "toon", env={"MCP_BRIDGE_OUTPUT_MODE": "toon"}) as bridge:
        toon = await bridge.run(code)
    assert _text(compact).startswith("[{'n': 0, 'square': 0}")
    assert "result[12]{n,square}:" in _text(toon)
    timings = ("duration", "sandbox_start")  # measured: differ between the two bridges
    assert {k: v for k, v in compact.structured_content.items() if k not in timings} == {
        k: v for k, v in toon.structured_content.items() if k not in timings
    }


PNG_CODE = """
import struct, zlib
from mcp import runtime
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
raw = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 4 for _ in range(4))
png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
open("/tmp/red.png", "wb").write(png)
runtime.display_image("/tmp/red.png")
print("drawn")
"""


async def test_png_written_by_code_arrives_as_image_content(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        result = await bridge.run(PNG_CODE)
    images = [c for c in result.content if isinstance(c, types.ImageContent)]
    assert result.is_error is False
    assert len(images) == 1
    assert images[0].mime_type == "image/png"


async def test_progress_notifications_arrive_while_code_runs(
    tmp_path: Path, sandbox_image: str
) -> None:
    received: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        received.append((progress, total, message))

    code = "from mcp import runtime\nfor i in range(1, 4):\n    runtime.progress(i, 3, f'step {i}')"
    lines = "for i in range(3):\n    print(f'line {i}', flush=True)"
    async with open_bridge(tmp_path) as bridge:
        await bridge.session.call_tool(
            "run_python", {"code": code}, read_timeout_seconds=120, progress_callback=on_progress
        )
        user = list(received)
        received.clear()
        await bridge.session.call_tool(
            "run_python", {"code": lines}, read_timeout_seconds=120, progress_callback=on_progress
        )
    assert user == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert [m for _, _, m in received] == ["line 0", "line 1", "line 2"]


async def test_sigkilled_bridge_leaves_no_container_after_next_start(
    tmp_path: Path, sandbox_image: str
) -> None:
    killed: list[int] = []
    async with open_bridge(tmp_path / "first", check_orphans=False) as bridge:
        await bridge.run("x = 1")
        killed = bridge_pids(bridge.state_dir)
        assert killed
        assert owned_containers(killed[0])
        killed_at = time.time()
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(MCPError):
            await bridge.run("x")
    async with open_bridge(tmp_path / "second") as bridge:
        result = await bridge.run("1 + 1")  # connecting the runtime removes dead bridges' leftovers
        assert _text(result) == "2"
        assert await containers_left(killed[0], since=killed_at) == []


async def test_output_past_the_cap_keeps_head_and_tail_and_names_the_full_output(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = "for i in range(2000):\n    print(f'line {i:04d}')"
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_OUTPUT_CAP": "4k"}) as bridge:
        result = await bridge.run(code)
        path = result.structured_content["full_output"]
        read = await bridge.run(f"text = open({path!r}).read()\nlen(text.splitlines()), text[-10:]")
        write = await bridge.run(f"open({path!r}, 'a').write('forged')")
    payload = result.structured_content
    output = code_text(result)
    assert _text(read) == "(2000, 'line 1999\\n')"  # the session's code reads the full output
    assert "PermissionError" in _text(write) or "Read-only file system" in _text(write)
    assert result.is_error is False
    assert output.startswith("line 0000")
    assert output.endswith("line 1999")
    assert len(output) < 8 * 1024
    assert payload["truncated"] is True
    assert payload["full_output"].startswith("/run/bridge/output/")
    assert any(payload["full_output"] in notice for notice in payload["notices"])


async def test_memory_limit_setting_is_enforced_and_next_call_reports_the_reset(
    tmp_path: Path, sandbox_image: str
) -> None:
    hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))"
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_MEMORY_LIMIT": "128m"}) as bridge:
        crashed = await bridge.run(hog)
        after = await bridge.run("'alive'")
    assert crashed.is_error is True
    assert crashed.structured_content["status"] == "crashed"
    assert "128m" in _text(crashed)
    assert after.is_error is False
    assert _text(after).endswith("'alive'")


async def test_session_persist_false_gives_every_call_a_fresh_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_SESSION_PERSIST": "false", "MCP_BRIDGE_POOL_SIZE": "0"}
    async with open_bridge(tmp_path, env=env) as bridge:
        await bridge.run("x = 1")
        after = await bridge.run("'x' in globals()")
    assert _text(after).endswith("False")


async def test_sigterm_stops_the_bridge_and_removes_its_containers(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, check_orphans=False) as bridge:
        await bridge.run("x = 1")
        (pid,) = bridge_pids(bridge.state_dir)
        assert owned_containers(pid)
        terminated = time.time()
        os.kill(pid, signal.SIGTERM)
        # Leaving the client context waits for the bridge process to exit.
    assert bridge_pids(tmp_path / "state") == []
    assert await containers_left(pid, since=terminated) == []


async def test_a_cold_sandbox_start_does_not_eat_a_short_timeout(
    tmp_path: Path, sandbox_image: str
) -> None:
    # No warm pool: the first call starts a container, which takes longer than its timeout.
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_POOL_SIZE": "0"}) as bridge:
        first = await bridge.run("import time; time.sleep(0.05); 'done'", timeout=0.2)
    assert first.structured_content is not None
    assert first.structured_content["status"] == "ok", _text(first)
    assert _text(first).endswith("'done'")
    assert first.structured_content["sandbox_start"] > first.structured_content["duration"]
