"""Durable sessions through the real bridge: a session's namespace and /tmp files survive a
SIGKILLed bridge, a crashed sandbox, idle expiry and the live-container limit (hibernation); what
cannot be saved is named; two bridges never load each other's sessions; a corrupted saved state
gives a clear notice and a fresh session."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import bridge_pids, bridge_text, code_text, open_bridge, owned_containers

pytestmark = [pytest.mark.anyio, pytest.mark.engine]
PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
wait_until_removed = importlib.import_module("integration-tests.conftest").wait_until_removed

STATE = (
    "import json\n"
    "x = 41\n"
    "def bump(n):\n"
    "    return x + n\n"
    "class Box:\n"
    "    def __init__(self, v): self.v = v\n"
    "box = Box([1, 2])\n"
    "with open('/tmp/note.txt', 'w') as f:\n"
    "    f.write('kept')\n"
)
CHECK = "bump(1), json.dumps(box.v), open('/tmp/note.txt').read()"
EXPECTED = "(42, '[1, 2]', 'kept')"


def _value(result: Any) -> str:
    return code_text(result)


def _notices(result: Any) -> str:
    return " | ".join((result.structured_content or {}).get("notices", []))


def _saved_states(state_dir: Path, store: str = "default") -> list[Path]:
    return sorted((state_dir / "sessions" / "saved" / store).glob("*.state"))


async def test_sigkilled_bridge_brings_variables_function_import_and_tmp_back(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, check_orphans=False) as bridge:
        assert (await bridge.run(STATE)).structured_content["status"] == "ok"
        # Another session is apart from the default one.
        assert _value(await bridge.run("'x' in globals()", session="other")) == "False"
        await bridge.run("x = 7", session="other")
        await bridge.run("x", session="other")  # runs once the state of `x = 7` is on disk
        assert _value(await bridge.run(CHECK)) == EXPECTED  # waits for the first snapshot
        for pid in bridge_pids(bridge.state_dir):
            os.kill(pid, signal.SIGKILL)
    async with open_bridge(tmp_path) as bridge:
        back = await bridge.run(CHECK)
        other = await bridge.run("x", session="other")
    assert _value(back) == EXPECTED
    assert "was restored from its state saved at" in _notices(back)
    assert _value(other) == "7"


async def test_reset_deletes_the_saved_state(tmp_path: Path, sandbox_image: str) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1")
        await bridge.run("x")
        assert _saved_states(bridge.state_dir)
        await bridge.run("y = 2", reset=True)
        await bridge.run("y")
    async with open_bridge(tmp_path) as bridge:
        after = await bridge.run("'x' in globals(), y")
    assert _value(after) == "(False, 2)"


async def test_twenty_sessions_over_a_live_limit_of_four_all_keep_their_state(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_MAX_SESSIONS": "4", "MCP_BRIDGE_POOL_SIZE": "0"}
    async with open_bridge(tmp_path, env=env) as bridge:
        for i in range(20):
            code = f"v = {i} * 10\nopen('/tmp/i', 'w').write('{i}')"
            made = await bridge.run(code, session=f"s{i}")
            assert made.structured_content["status"] == "ok", bridge_text(made)
            assert len(owned_containers(bridge_pids(bridge.state_dir)[0])) <= 4
        results = [await bridge.run("v, open('/tmp/i').read()", session=f"s{i}") for i in range(20)]
    assert [_value(r) for r in results] == [f"({i * 10}, '{i}')" for i in range(20)]
    assert "was restored" in _notices(results[0])


async def test_idle_expiry_hibernates_and_the_next_call_restores(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_SESSION_TTL": "1s", "MCP_BRIDGE_POOL_SIZE": "0"}
    async with open_bridge(tmp_path, env=env) as bridge:
        began = time.time()
        await bridge.run(STATE)
        pid = bridge_pids(bridge.state_dir)[0]
        live = owned_containers(pid)
        assert live
        # The idle sweep stops the container once its state is saved: podman's events say when.
        await wait_until_removed(live, since=began)
        assert owned_containers(pid) == []
        back = await bridge.run(CHECK)
    assert _value(back) == EXPECTED
    assert "was restored" in _notices(back)


async def test_os_exit_brings_back_the_last_good_state_and_says_so(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run(STATE)
        crashed = await bridge.run("x = 1000\nimport os\nos._exit(3)")
        back = await bridge.run(CHECK)
    assert crashed.structured_content["status"] == "crashed"
    assert "restored to the state after the last successful execution" in _notices(crashed)
    assert _value(back) == EXPECTED
    assert "was restored from its state saved at" in _notices(back)


async def test_unpicklable_objects_are_named_and_the_rest_is_kept(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = (
        "import threading\n"
        "lock = threading.Lock()\n"
        "numbers = (i for i in range(3))\n"
        "keep = {'a': [1, 2]}\n"
        "alias = keep\n"
    )
    async with open_bridge(tmp_path) as bridge:
        await bridge.run(code)
        told = await bridge.run("1")
        await bridge.run("import os\nos._exit(1)")
        back = await bridge.run("keep, alias is keep, 'lock' in globals(), 'numbers' in globals()")
    assert "lock (lock)" in _notices(told)
    assert "numbers (generator)" in _notices(told)
    assert _value(back) == "({'a': [1, 2]}, True, False, False)"
    assert "numbers (generator)" in _notices(back)


async def test_two_bridges_on_one_state_dir_never_load_each_others_sessions(
    tmp_path: Path, sandbox_image: str
) -> None:
    shared = tmp_path / "shared-state"
    args = ("--state-dir", str(shared))
    async with open_bridge(tmp_path / "a", args=args) as first:
        await first.run("secret = 'of a'")
        await first.run("1")
        async with open_bridge(tmp_path / "b", args=args) as second:
            other = await second.run("'secret' in globals()")
        async with open_bridge(
            tmp_path / "c", args=args, env={"MCP_BRIDGE_SESSION_STORE": "c"}
        ) as third:
            own = await third.run("'secret' in globals()")
            await third.run("mine = 'of c'")
            await third.run("1")
    async with open_bridge(tmp_path / "a", args=args) as first:
        again = await first.run("secret, 'mine' in globals()")
    assert _value(other) == "False"
    assert "another bridge of this user is using the session store" in _notices(other)
    assert _value(own) == "False"
    assert _value(again) == "('of a', False)"


async def test_a_corrupted_saved_state_gives_a_notice_and_a_fresh_session(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1")
        await bridge.run("x")
        states = _saved_states(bridge.state_dir)
    assert states
    for path in states:
        path.write_bytes(b"MCPSNAP1" + os.urandom(64))
    async with open_bridge(tmp_path) as bridge:
        fresh = await bridge.run("'x' in globals()")
        later = await bridge.run("y = 2\ny")
    assert _value(fresh) == "False"
    assert "could not be restored" in _notices(fresh)
    assert "fresh session" in _notices(fresh)
    assert _value(later) == "2"


FORK = (
    "x = 1\n"
    "open('/tmp/note.txt', 'w').write('before')\n"
    "made = await runtime.fork_session('trial')\n"
    "x = 2\n"  # after the fork: only the original sees this
    "open('/tmp/note.txt', 'w').write('after')\n"
    "made\n"
)
READ = "x, open('/tmp/note.txt').read()"


async def test_a_fork_holds_the_state_of_its_moment_and_changing_it_leaves_the_original_alone(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        forked = await bridge.run(FORK)
        copy = await bridge.run(READ, session="trial")
        await bridge.run("x = 99\nopen('/tmp/note.txt', 'w').write('changed')", session="trial")
        changed = await bridge.run(READ, session="trial")
        original = await bridge.run(READ)
        sync = await bridge.run("runtime.fork_session_sync('trial-2')")
        second = await bridge.run(READ, session="trial-2")
    assert forked.structured_content["status"] == "ok", bridge_text(forked)
    assert _value(forked) == "'trial'"
    assert _value(copy) == "(1, 'before')"
    assert "session 'trial' was forked from session 'default' at" in _notices(copy)
    assert "restored from its state" not in _notices(copy)
    assert _value(changed) == "(99, 'changed')"
    assert _value(original) == "(2, 'after')"
    assert _value(sync) == "'trial-2'"
    assert _value(second) == "(2, 'after')"


async def test_a_fork_survives_a_sigkilled_bridge_like_any_saved_session(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, check_orphans=False) as bridge:
        await bridge.run(STATE)
        assert _value(await bridge.run("runtime.fork_session_sync('kept')")) == "'kept'"
        for pid in bridge_pids(bridge.state_dir):
            os.kill(pid, signal.SIGKILL)
    async with open_bridge(tmp_path) as bridge:
        back = await bridge.run(CHECK, session="kept")
    assert _value(back) == EXPECTED
    assert "session 'kept' was forked from session 'default' at" in _notices(back)


async def test_a_fork_that_saved_its_own_state_is_restored_from_it_not_from_the_fork(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path, check_orphans=False) as bridge:
        await bridge.run("x = 1\nruntime.fork_session_sync('trial')")
        first = await bridge.run("x = 5", session="trial")
        await bridge.run("x", session="trial")  # runs once the state of `x = 5` is on disk
        for pid in bridge_pids(bridge.state_dir):
            os.kill(pid, signal.SIGKILL)
    async with open_bridge(tmp_path) as bridge:
        back = await bridge.run("x", session="trial")
    assert "session 'trial' was forked from session 'default' at" in _notices(first)
    assert _value(back) == "5"
    assert "session 'trial' was restored from its state saved at" in _notices(back)
    assert "forked" not in _notices(back)


async def test_forking_without_saved_sessions_is_a_clear_error_saying_why(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_SESSION_PERSIST": "false"}
    code = (
        "try:\n"
        "    runtime.fork_session_sync('copy')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    async with open_bridge(tmp_path, env=env) as bridge:
        refused = await bridge.run(code)
    text = code_text(refused)
    assert "ToolError" in text
    assert "cannot be forked" in text
    assert "MCP_BRIDGE_SESSION_PERSIST is false" in text


async def test_a_large_state_only_read_is_not_written_again_and_survives_a_crash(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Past the inline limit a forked child saves the state; one that equals the last state it
    # sent (hashed) is announced as unchanged: the file on disk stays, and still restores.
    large = "blob = bytes(range(256)) * 8192\nx = 1\nopen('/tmp/big.bin', 'wb').write(blob)"
    check = "len(blob), x, len(open('/tmp/big.bin', 'rb').read())"

    async with open_bridge(tmp_path) as bridge:

        def saved() -> tuple[int, int]:
            (state,) = _saved_states(bridge.state_dir)
            info = state.stat()
            return info.st_ino, info.st_mtime_ns

        await bridge.run(large)
        await bridge.run("len(blob)")  # runs once the state of `large` is on disk
        first = saved()
        for _ in range(3):
            assert _value(await bridge.run(check)) == "(2097152, 1, 2097152)"
        assert saved() == first
        await bridge.run("x = 2")
        await bridge.run("x")
        assert saved() != first
        crashed = await bridge.run("x = 3\nimport os\nos._exit(3)")
        back = await bridge.run(check)
    assert crashed.structured_content["status"] == "crashed"
    assert _value(back) == "(2097152, 2, 2097152)"


async def test_a_state_refused_for_disk_budget_is_saved_once_room_is_made(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The state of "b" does not fit beside that of "a"; resetting "a" makes room, and the next
    # call of "b", which changes nothing, saves it (the bridge asks the sandbox for it whole).
    blob = "blob = bytes(range(256)) * 8192"
    env = {"MCP_BRIDGE_SESSION_STATE_DISK": "3m"}
    async with open_bridge(tmp_path, env=env) as bridge:
        await bridge.run(blob, session="a")
        await bridge.run("len(blob)", session="a")  # runs once the state of "a" is on disk
        await bridge.run(blob, session="b")
        refused = await bridge.run("len(blob)", session="b")
        assert "[sessions] state_disk" in _notices(refused)
        assert len(_saved_states(bridge.state_dir)) == 1
        await bridge.run("x = 0", session="a", reset=True)
        await bridge.run("len(blob)", session="b")
        saved = await bridge.run("len(blob)", session="b")
        assert _notices(saved) == ""
        assert len(_saved_states(bridge.state_dir)) == 2
    async with open_bridge(tmp_path, env=env) as bridge:
        back = await bridge.run("len(blob)", session="b")
    assert _value(back) == "2097152"


async def test_functions_that_use_servers_and_tools_are_saved_and_call_them_after_a_restart(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A function is saved with the globals it names: the servers mapping, a server, a tool held
    # in a variable. They hold the sandbox's channel, so they are saved as references to the
    # running sandbox's own objects (before, every such function was left unsaved).
    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
    code = (
        "def by_mapping(t):\n    return mcp_servers['probe'].echo.sync(text=t)\n"
        "server = mcp_servers['probe']\n"
        "def by_server():\n    return server\n"
        "tool = server.echo\n"
        "def by_tool(t):\n    return tool.sync(text=t)\n"
        "def by_alias(t):\n    return mcp_probe.echo.sync(text=t)\n"
    )
    async with open_bridge(tmp_path, servers=servers) as bridge:
        defined = await bridge.run(code)
        await bridge.run("1")  # answered once the state of the definitions is saved
    async with open_bridge(tmp_path, servers=servers) as bridge:
        back = await bridge.run("[by_mapping('a'), repr(by_server()), by_tool('b'), by_alias('c')]")
    assert "could not be saved" not in _notices(defined)
    assert "could not be saved" not in _notices(back)
    assert _value(back) == "['a', \"<MCP server 'probe'>\", 'b', 'c']"
