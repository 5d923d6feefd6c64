"""One bridge over streamable HTTP, many clients: nobody gets in where they do not belong.

Each test starts the real bridge (``serve --http``) as a process and drives it with the official
SDK's streamable-HTTP client (or raw HTTP where the test is about what a client that is not an SDK
may send), against real podman sandboxes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from .conftest import (
    CALL_TIMEOUT,
    open_http_bridge,
    payload_of,
    text_of,
)

pytestmark = pytest.mark.container

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bare", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _value(result: types.CallToolResult) -> Any:
    assert not result.is_error, text_of(result)
    return payload_of(result).get("result")


async def test_two_http_clients_never_see_each_others_variables_in_default_or_named_sessions(
    tmp_path: Path,
) -> None:
    async with (
        open_http_bridge(tmp_path) as bridge,
        bridge.session() as alice,
        bridge.session() as bob,
    ):
        for session in (None, "shared-name"):
            named = {} if session is None else {"session": session}
            stored = await alice.run("secret = 'alice-only'\nsecret", **named)
            assert _value(stored) == "'alice-only'"
            seen = await bob.run("globals().get('secret', 'nothing')", **named)
            where = session or "default"
            assert _value(seen) == "'nothing'", f"bob read alice's variable in {where}"
            assert _value(await alice.run("secret", **named)) == "'alice-only'"


async def test_a_client_is_not_blocked_by_another_clients_running_code(tmp_path: Path) -> None:
    async with (
        open_http_bridge(tmp_path) as bridge,
        bridge.session() as alice,
        bridge.session() as bob,
    ):
        running = anyio.Event()
        alice_done = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message == "alice is running":
                running.set()

        async def alice_runs_forever() -> None:
            # Ends only by cancellation: the bridge interrupts it when the client cancels.
            code = "print('alice is running', flush=True)\nimport time\nwhile True: time.sleep(1)"
            try:
                await alice.session.call_tool(
                    "run_python",
                    {"code": code, "timeout": CALL_TIMEOUT},
                    read_timeout_seconds=CALL_TIMEOUT,
                    progress_callback=on_progress,
                )
            finally:
                alice_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(alice_runs_forever)
            with anyio.fail_after(CALL_TIMEOUT):
                await running.wait()
            # Alice's code is running in her default session; Bob's default is his own.
            with anyio.fail_after(60):
                answer = await bob.session.call_tool("run_python", {"code": "6 * 7"})
            assert _value(answer) == "42"
            assert not alice_done.is_set()
            tg.cancel_scope.cancel()
