"""A fork (``runtime.fork_session``) writes untrusted bytes under a new name: it never replaces a
session or a saved state, never lands in another client's sessions, and counts against the disk
budget of saved states like any session."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import code_text, open_bridge, open_http_bridge, payload_of

pytestmark = pytest.mark.anyio

TRY_FORK = (
    "try:\n"
    "    print('forked', runtime.fork_session_sync({name!r}))\n"
    "except Exception as exc:\n"
    "    print(type(exc).__name__, exc)\n"
)


def _saved(state_dir: Path) -> dict[str, bytes]:
    store = state_dir / "sessions" / "saved" / "default"
    return {p.name: p.read_bytes() for p in sorted(store.glob("*.state"))}


async def test_a_fork_onto_an_existing_or_invalid_name_is_refused_and_overwrites_nothing(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("y = 'mine'", session="other")
        await bridge.run("y", session="other")  # its state is on disk once this runs
        await bridge.run("y = 'intruder'")
        await bridge.run("y")
        before = _saved(bridge.state_dir)
        onto_other = await bridge.run(TRY_FORK.format(name="other"))
        onto_itself = await bridge.run(TRY_FORK.format(name="default"))
        bad_name = await bridge.run(TRY_FORK.format(name="../escape"))
        await bridge.run("1")
        after = _saved(bridge.state_dir)
        other = await bridge.run("y", session="other")
    for refused in (onto_other, onto_itself):
        assert "InvalidArguments" in code_text(refused)
        assert "already exists" in code_text(refused)
        assert "forked" not in code_text(refused)
    assert "'other'" in code_text(onto_other)
    assert "InvalidArguments" in code_text(bad_name)
    assert "session name" in code_text(bad_name)
    assert set(after) == set(before)  # no new state, none replaced by the refused forks
    assert code_text(other) == "'mine'"


async def test_a_fork_past_the_disk_budget_is_refused_naming_the_setting(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_SESSION_STATE_DISK": "300k"}
    async with open_bridge(tmp_path, env=env) as bridge:
        await bridge.run("import os\nblob = os.urandom(200_000)")
        told = await bridge.run(TRY_FORK.format(name="copy"))
        missing = await bridge.run("'blob' in globals()", session="copy")
    text = code_text(told)
    assert "ToolError" in text
    assert "[sessions] state_disk" in text
    assert "'copy' was not created" in text
    assert code_text(missing) == "False"
    assert payload_of(told)["status"] == "ok"


async def test_over_http_a_fork_lands_in_the_calling_clients_own_sessions_only(
    tmp_path: Path,
) -> None:
    async with (
        open_http_bridge(tmp_path) as bridge,
        bridge.session() as alice,
        bridge.session() as bob,
    ):
        await alice.run("secret = 'alice-only'")
        forked = await alice.run(TRY_FORK.format(name="copy"))
        await bob.run("secret = 'bob-only'")
        bob_forked = await bob.run(TRY_FORK.format(name="copy"))  # free among bob's names
        bob_copy = await bob.run("secret", session="copy")
        alice_copy = await alice.run("secret", session="copy")
    assert code_text(forked) == "forked copy"
    assert code_text(bob_forked) == "forked copy"
    assert code_text(bob_copy) == "'bob-only'"
    assert code_text(alice_copy) == "'alice-only'"
