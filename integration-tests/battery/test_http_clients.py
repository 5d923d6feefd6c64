"""One bridge over streamable HTTP, many clients: nobody gets in where they do not belong.

Each test starts the real bridge (``serve --http``) as a process and drives it with the official
SDK's streamable-HTTP client (or raw HTTP where the test is about what a client that is not an SDK
may send), against real podman sandboxes.
"""

from __future__ import annotations

import hashlib
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from .conftest import (
    CALL_TIMEOUT,
    bridge_env,
    bridge_text,
    code_text,
    open_http_bridge,
    owned_containers,
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


def _value(result: types.CallToolResult) -> str:
    """What the code returned (the value of its last expression), as the client reads it."""
    assert not result.is_error, text_of(result)
    assert payload_of(result)["status"] == "ok", bridge_text(result)
    return code_text(result)


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


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mcp_code_execution_mode", *args]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, env=bridge_env(env)
    )


def _new_token(token_file: Path, name: str) -> str:
    """A token made the way users make them: the ``token`` command."""
    made = _cli("token", name, env={"MCP_BRIDGE_HTTP_TOKEN_FILE": str(token_file)})
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _token_file(path: Path, *names: str) -> dict[str, str]:
    """A token file written by hand in the documented format; returns name → token."""
    tokens = {name: secrets.token_urlsafe(32) for name in names}
    lines = [f"{n} sha256:{hashlib.sha256(t.encode()).hexdigest()}\n" for n, t in tokens.items()]
    path.write_text("".join(lines))
    path.chmod(0o600)
    return tokens


async def _post_initialize(bridge: Any, token: str | None = None) -> httpx2.Response:
    async with bridge.http(token) as http:
        return await http.post(bridge.url, json=INITIALIZE, headers=MCP_HEADERS)


async def test_requests_without_or_with_a_wrong_token_get_401_with_a_bearer_challenge(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "tokens"
    alice = _token_file(token_file, "alice")["alice"]
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(token_file)}
    async with open_http_bridge(tmp_path / "bridge", env=env) as bridge:
        for token in (None, "not-" + alice, alice + "x"):
            refused = await _post_initialize(bridge, token)
            assert refused.status_code == 401, token
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith("Bearer "), challenge
            assert 'error="invalid_token"' in challenge
            assert "mcp-session-id" not in refused.headers
        async with bridge.session(alice) as client:
            assert _value(await client.run("'in'")) == "'in'"


async def test_each_principal_sees_only_its_own_sessions_and_finds_them_again_on_reconnect(
    tmp_path: Path,
) -> None:
    tokens = _token_file(tmp_path / "tokens", "alice", "bob")
    alice, bob = tokens["alice"], tokens["bob"]
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    async with open_http_bridge(tmp_path / "bridge", env=env) as bridge:
        async with bridge.session(alice) as first:
            assert _value(await first.run("work = 'alice'\nwork")) == "'alice'"
            await first.run("named = 1", session="notes")
        async with bridge.session(bob) as other:
            assert _value(await other.run("globals().get('work', 'nothing')")) == "'nothing'"
            absent = "globals().get('named', 'nothing')"
            assert _value(await other.run(absent, session="notes")) == "'nothing'"
        # A new MCP session of the same principal (a reconnect) finds her sessions.
        async with bridge.session(alice) as again:
            assert _value(await again.run("work")) == "'alice'"
            assert _value(await again.run("named", session="notes")) == "1"


async def test_a_stolen_session_id_is_useless_with_another_principals_token(tmp_path: Path) -> None:
    tokens = _token_file(tmp_path / "tokens", "alice", "bob")
    alice, bob = tokens["alice"], tokens["bob"]
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    async with open_http_bridge(tmp_path / "bridge", env=env) as bridge:
        opened = await _post_initialize(bridge, alice)
        assert opened.status_code == 200
        session_id = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        async with bridge.http(bob) as http:
            headers = {**MCP_HEADERS, "mcp-session-id": session_id}
            answer = await http.post(bridge.url, json=call, headers=headers)
        assert answer.status_code == 404


def test_listening_beyond_loopback_without_a_token_file_is_refused() -> None:
    done = _cli("serve", "--http", "0.0.0.0:0")
    assert done.returncode == 2
    assert "MCP_BRIDGE_HTTP_TOKEN_FILE" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("mode", [0o644, 0o620, 0o602])
def test_a_token_file_other_users_could_read_or_change_is_refused(
    tmp_path: Path, mode: int
) -> None:
    token_file = tmp_path / "tokens"
    token = _new_token(token_file, "alice")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token not in token_file.read_text(), "the token file must hold hashes only"
    token_file.chmod(mode)
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(token_file)}
    done = _cli("serve", "--http", "127.0.0.1:0", env=env)
    assert done.returncode == 2
    assert "MCP_BRIDGE_HTTP_TOKEN_FILE" in done.stderr
    assert f"chmod 600 {token_file}" in done.stderr
    assert "Traceback" not in done.stderr


async def test_idle_unauthenticated_sessions_expire_and_an_ended_session_stops_its_sandboxes(
    tmp_path: Path,
) -> None:
    env = {"MCP_BRIDGE_HTTP_ANONYMOUS_TTL": "1s", "MCP_BRIDGE_POOL_SIZE": "0"}
    async with open_http_bridge(tmp_path, env=env) as bridge:
        log = bridge.stderr
        mark = len(log.text)
        opened = await _post_initialize(bridge)
        session_id = opened.headers["mcp-session-id"]
        expired = "MCP session of an unauthenticated client ended after 1 s idle"
        await log.wait_for(expired, start=mark)
        async with bridge.http() as http:
            headers = {**MCP_HEADERS, "mcp-session-id": session_id}
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            assert (await http.post(bridge.url, json=ping, headers=headers)).status_code == 404

        mark = len(log.text)
        async with bridge.session() as client:
            assert _value(await client.run("state = 1\nstate")) == "1"
            assert len(owned_containers(bridge.pid)) == 1
        # Leaving sends DELETE: nobody can reach that client's sessions any more.
        await log.wait_for("ended by its client; its sessions default were stopped", start=mark)
        assert owned_containers(bridge.pid) == []


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


FLOOD = 10_000
FLOOD_WORKERS = 8
"""Concurrent initializes: fewer than the per-client bound (16), so there is always an idle bare
session to end for the next one — with more, the initializes past the bound that find every
session busy are refused (429), which is the bound working, not a lock-out."""
RSS_GROWTH_BOUND_MIB = 40
"""What 10,000 bare initializes may add to the bridge's RSS (measured: a few MiB now; ~370 MiB
before MCP sessions were bounded per client)."""


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~40 s on an idle 2-core host; minutes when it is shared
async def test_ten_thousand_bare_initializes_lock_out_nobody_and_leave_the_bridge_small(
    tmp_path: Path,
) -> None:
    async with open_http_bridge(tmp_path) as bridge, bridge.session() as holder:
        assert _value(await holder.run("kept = 'still here'\nkept")) == "'still here'"
        statuses: dict[int, int] = {}

        async def flood(count: int) -> None:
            async with bridge.http() as http:
                for _ in range(count):
                    answer = await http.post(bridge.url, json=INITIALIZE, headers=MCP_HEADERS)
                    statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

        await flood(200)  # warm-up: the allocator's first growth is not the flood's
        before = _rss_kib(bridge.pid)
        with anyio.fail_after(800):
            async with anyio.create_task_group() as tg:
                for _ in range(FLOOD_WORKERS):
                    tg.start_soon(flood, FLOOD // FLOOD_WORKERS)
        after = _rss_kib(bridge.pid)
        mib = f"{before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after"
        print(f"bridge RSS {mib}: {statuses}")

        # The client that held a session kept it, and its state.
        assert _value(await holder.run("kept")) == "'still here'"
        # A new client still gets in and runs code.
        async with bridge.session() as newcomer:
            assert _value(await newcomer.run("globals().get('kept', 'own namespace')")) == (
                "'own namespace'"
            )
        assert statuses == {200: FLOOD + 200}
        assert after - before < RSS_GROWTH_BOUND_MIB * 1024
