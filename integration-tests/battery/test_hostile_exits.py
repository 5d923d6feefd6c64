"""Code that tries to end its own sandbox, through the real bridge (stdio, MCP SDK client) and
real podman: ``sys.exit``, ``os._exit``, SIGKILL to its own process group, an ignored SIGINT.

``sys.exit(n)`` is an exception like any other: the session survives (docs/decisions/0011). Anything
that really ends the process is a ``crashed`` result naming the exit status, and the session's next
call runs in a new sandbox restored to its last saved state, with a notice on both calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import code_text, open_bridge, payload_of, text_of

pytestmark = [pytest.mark.container, pytest.mark.engine]


async def test_sys_exit_with_a_status_is_an_error_and_the_session_survives(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        exited = await bridge.run("print('before')\nimport sys\nsys.exit(3)")
        after = await bridge.run("kept")
    payload = payload_of(exited)
    assert payload["status"] == "error"
    assert payload["error"]["type"] == "SystemExit"
    assert payload["error"]["message"] == "3"
    assert code_text(exited).startswith("before\n[traceback]\n")
    assert text_of(after) == "'state'"
    assert "notices" not in payload_of(after)


async def test_sys_exit_zero_is_a_normal_end_and_the_session_survives(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'state'")
        zero = await bridge.run("import sys\nprint('done')\nsys.exit(0)")
        bare = await bridge.run("raise SystemExit")
        after = await bridge.run("kept")
    assert payload_of(zero)["status"] == "ok"
    assert code_text(zero) == "done"
    assert payload_of(bare)["status"] == "ok"
    assert text_of(after) == "'state'"


async def _replaced(bridge: Any, code: str, **arguments: Any) -> Any:
    """Run ``code`` in a session with state; check the next call runs in a new sandbox restored
    to the state saved before ``code`` (durable sessions); return ``code``'s result."""
    await bridge.run("kept = 'state'")
    ended = await bridge.run(code, **arguments)
    after = await bridge.run("kept")
    assert text_of(after).endswith("'state'")
    assert any("was restored from its state saved at" in n for n in payload_of(after)["notices"])
    return ended


async def test_os_exit_is_a_crash_naming_the_status_and_the_session_is_replaced(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        ended = payload_of(
            await _replaced(bridge, "import os\nprint('bye', flush=True)\nos._exit(4)")
        )
    assert ended["status"] == "crashed"
    assert ended["error"]["message"] == "container exited with status 4"
    assert any("restored to the state after the last successful" in n for n in ended["notices"])


async def test_sigkill_to_its_own_process_group_is_a_crash_and_the_session_is_replaced(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("import os, signal\nos.kill(1, signal.SIGKILL)")  # init ignores it
        assert text_of(await bridge.run("'init survived'")) == "'init survived'"
        ended = payload_of(await _replaced(bridge, "import os\nos.killpg(0, 9)"))
    assert ended["status"] == "crashed"
    assert ended["error"]["message"] == "container exited with status 137"


IGNORE_SIGINT = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ignoring interrupts", flush=True)
while True:
    pass
"""


async def test_code_ignoring_sigint_is_killed_at_the_timeout_and_the_session_replaced(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 1", session="bystander")
        ended = await _replaced(bridge, IGNORE_SIGINT, timeout=3)
        bystander = await bridge.run("kept", session="bystander")
    assert payload_of(ended)["status"] == "timeout"
    assert code_text(ended) == "ignoring interrupts"  # what was produced is kept
    assert any("killed" in notice for notice in payload_of(ended)["notices"])
    assert text_of(bystander) == "1"
