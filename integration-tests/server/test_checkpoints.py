"""Checkpoints through the real bridge, a real SDK client and real podman: a labelled copy of a
session's namespace and /tmp files, brought back in the same cell or a later one, kept on disk
across a restart, bounded per session, and only ever its own session's."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from .conftest import bridge_text, code_text, open_bridge, open_http_bridge

pytestmark = [pytest.mark.anyio, pytest.mark.engine]

TRY = "try:\n    {call}\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"


def _ok(result: Any) -> str:
    payload = result.structured_content or {}
    assert payload.get("status") == "ok", bridge_text(result) or code_text(result)
    return code_text(result)


def _checkpoint_files(state_dir: Path) -> int:
    return len(list((state_dir / "sessions" / "saved" / "default").glob("*.state")))


async def test_a_restore_in_the_same_cell_brings_back_the_variables_and_tmp_files(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = (
        "x = 1\n"
        "open('/tmp/note.txt', 'w').write('before')\n"
        "runtime.checkpoint('a')\n"
        "x = 2\n"
        "y = 'made after'\n"
        "open('/tmp/note.txt', 'w').write('after')\n"
        "open('/tmp/new.txt', 'w').write('new')\n"
        "runtime.restore('a')\n"
        "import os\n"
        "x, 'y' in globals(), open('/tmp/note.txt').read(), os.path.exists('/tmp/new.txt')\n"
    )
    async with open_bridge(tmp_path) as bridge:
        same_cell = await bridge.run(code)
        # The next call sees the restored state, and saves it as the session's own.
        after = await bridge.run("x, runtime is not None, mcp_servers is not None")
    assert _ok(same_cell) == "(1, False, 'before', False)"
    assert _ok(after) == "(1, True, True)"


async def test_a_restore_across_cells_brings_back_x_with_or_without_await(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1\ndef f(): return x * 10")
        made = await bridge.run("runtime.checkpoint('a')")
        await bridge.run("x = 2")
        await bridge.run("runtime.restore('a')")
        plain = await bridge.run("x, f()")
        await bridge.run("x = 3")
        awaited = await bridge.run("r = await runtime.restore('a')\nr['label'], x, f()")
        saved = await bridge.run("(await runtime.checkpoint('b'))['label']")
    assert "'label': 'a'" in _ok(made)
    assert _ok(plain) == "(1, 10)"
    assert _ok(awaited) == "('a', 1, 10)"
    assert _ok(saved) == "'b'"


async def test_list_shows_the_checkpoints_and_a_ninth_label_replaces_the_oldest(
    tmp_path: Path, sandbox_image: str
) -> None:
    code = (
        "replaced = []\n"
        "for i in range(12):\n"
        "    n = i\n"
        "    replaced.append(runtime.checkpoint(f'c{i}')['replaced'])\n"
        "runtime.checkpoint('c11')\n"  # the same label: replaced, not added
        "labels = [c['label'] for c in runtime.list_checkpoints()]\n"
        "labels, replaced[7:]\n"
    )
    async with open_bridge(tmp_path) as bridge:
        told = await bridge.run(code)
        back = await bridge.run("runtime.restore('c5')\nn")
        gone = await bridge.run(TRY.format(call="runtime.restore('c0')"))
        files = _checkpoint_files(bridge.state_dir)
    labels = [f"c{i}" for i in range(4, 11)] + ["c11"]
    assert _ok(told) == f"({labels!r}, [None, 'c0', 'c1', 'c2', 'c3'])"
    assert _ok(back) == "5"
    assert _ok(gone).startswith("InvalidArguments")
    assert "has no checkpoint 'c0'" in _ok(gone)
    assert files == 8 + 1  # the checkpoints and the session's own state


async def test_an_unknown_label_and_a_path_like_label_are_clear_errors(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        unknown = await bridge.run(TRY.format(call="runtime.restore('nope')"))
        path = await bridge.run(TRY.format(call="runtime.checkpoint('../../x')"))
        empty = await bridge.run(TRY.format(call="runtime.checkpoint('')"))
        listed = await bridge.run("runtime.list_checkpoints()")
    assert _ok(unknown).startswith("InvalidArguments")
    assert "no checkpoint 'nope'" in _ok(unknown)
    assert _ok(path).startswith("InvalidArguments invalid checkpoint label '../../x'")
    assert _ok(empty).startswith("InvalidArguments")
    assert _ok(listed) == "[]"


async def test_a_forged_label_sent_straight_to_the_bridge_is_refused_there(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Hostile code bypasses the helper's check and forges the request and its snapshot.
    forge = (
        "from bridge_sandbox_client._calls import CallRegistry\n"
        "reg = runtime.restore.__self__._registry\n"
        "out = []\n"
        "for label in ('../../x', 'a' * 65, 'a/b', 7):\n"
        "    try:\n"
        "        CallRegistry.wait_sync(reg.request('checkpoint', "
        "{'label': label, 'snapshot_id': 'fork-x'}))\n"
        "    except Exception as exc:\n"
        "        out.append(type(exc).__name__)\n"
        "out, runtime.list_checkpoints()\n"
    )
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1")
        told = await bridge.run(forge)
        files = _checkpoint_files(bridge.state_dir)
    assert _ok(told) == "(['InvalidArguments', 'InvalidArguments', 'InvalidArguments', " + (
        "'InvalidArguments'], [])"
    )
    assert files == 1


async def test_a_checkpoint_survives_a_bridge_restart_and_a_reset_deletes_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1\nopen('/tmp/f', 'w').write('one')\nruntime.checkpoint('a')")
        await bridge.run("x = 2\nopen('/tmp/f', 'w').write('two')")
        await bridge.run("x")  # the state of `x = 2` is saved
    async with open_bridge(tmp_path) as bridge:
        before = await bridge.run("x")
        back = await bridge.run("runtime.restore('a')\nx, open('/tmp/f').read()")
        await bridge.run("pass", reset=True)
        reset = await bridge.run("runtime.list_checkpoints()")
    assert _ok(before) == "2"
    assert _ok(back) == "(1, 'one')"
    assert _ok(reset) == "[]"


async def test_another_session_and_another_http_client_cannot_see_or_restore_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with (
        open_http_bridge(tmp_path) as bridge,
        bridge.session() as alice,
        bridge.session() as bob,
    ):
        await alice.run("secret = 'alice'\nruntime.checkpoint('a')")
        other_session = await alice.run(TRY.format(call="runtime.restore('a')"), session="other")
        bob_restore = await bob.run(TRY.format(call="runtime.restore('a')"))
        bob_list = await bob.run("runtime.list_checkpoints()")
        own = await alice.run("secret = 'changed'\nruntime.restore('a')\nsecret")
    assert _ok(other_session).startswith("InvalidArguments")
    assert _ok(bob_restore).startswith("InvalidArguments")
    assert _ok(bob_list) == "[]"
    assert _ok(own) == "'alice'"


async def test_a_session_that_is_not_saved_says_why_it_has_no_checkpoints(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_SESSION_PERSIST": "false"}
    async with open_bridge(tmp_path, env=env) as bridge:
        made = await bridge.run(TRY.format(call="runtime.checkpoint('a')"))
        listed = await bridge.run(TRY.format(call="runtime.list_checkpoints()"))
    assert _ok(made).startswith("ToolError")
    assert "MCP_BRIDGE_SESSION_PERSIST is false" in _ok(made)
    assert "MCP_BRIDGE_SESSION_PERSIST is false" in _ok(listed)


async def test_restores_raced_against_each_other_and_other_calls_leave_a_working_session(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Hostile code fires restores without waiting for them (the sandbox drops their frames: it
    # did not ask for them under those ids), beside a checkpoint in a thread and a discovery
    # call: the bridge answers each (one restore at a time), and the session goes on.
    code = (
        "def race():\n"  # its locals outlive the restore, which replaces the globals
        "    import threading\n"
        "    from bridge_sandbox_client._calls import CallRegistry\n"
        "    reg = runtime.restore.__self__._registry\n"
        "    fired = [reg.request('restore_checkpoint', {'label': 'a', 'restore_id': "
        "f'checkpoint-{i}'}) for i in range(20)]\n"
        "    t = threading.Thread(target=runtime.checkpoint, args=('b',))\n"
        "    t.start()\n"
        "    runtime.discovered_servers()\n"
        "    t.join()\n"  # checkpoint 'b' holds x == 2
        "    outcomes = set()\n"
        "    for f in fired:\n"
        "        try:\n"
        "            CallRegistry.wait_sync(f)\n"
        "            outcomes.add('ok')\n"
        "        except Exception as exc:\n"
        "            outcomes.add(type(exc).__name__)\n"
        # Once every fired one is answered: a restore while another runs is refused (one at a
        # time), and on a slow engine the last fired ones were still running here.
        "    runtime.restore('a')\n"
        "    return outcomes\n"
        "x = 2\n"
        "outcomes = race()\n"
        "x, sorted(outcomes - {'ok', 'InvalidArguments'}), 'race' in globals()\n"
    )
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1\nruntime.checkpoint('a')")
        raced = await bridge.run(code)
        after = await bridge.run("x, sorted(c['label'] for c in runtime.list_checkpoints())")
        again = await bridge.run("x = 5\nruntime.restore('b')\nx")
    assert _ok(raced) == "(1, [], False)"  # restored; every fired restore answered
    assert _ok(after) == "(1, ['a', 'b'])"
    assert _ok(again) == "2"


async def test_ten_thousand_checkpoints_in_a_loop_keep_eight_and_the_session_goes_on(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Each one is a real snapshot: the loop runs until its timeout, whatever it reaches; the
    # bridge never holds more than the bound, and the session is usable after the interrupt.
    code = "for i in range(10_000):\n    n = i\n    runtime.checkpoint(f'c{i}')\n"
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("n = -1")
        looped = await bridge.run(code, timeout=8)
        files = _checkpoint_files(bridge.state_dir)
        listed = await bridge.run("[c['label'] for c in runtime.list_checkpoints()]")
        labels = ast.literal_eval(_ok(listed))
        back = await bridge.run(f"runtime.restore({labels[-1]!r})\nn")
    assert looped.structured_content["status"] in ("ok", "timeout")
    assert files <= 8 + 1
    numbers = [int(label[1:]) for label in labels]
    assert 1 <= len(numbers) <= 8
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # the newest, in order
    assert _ok(back) == str(numbers[-1])
