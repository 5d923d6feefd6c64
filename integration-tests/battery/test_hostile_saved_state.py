"""Saved session state is untrusted bytes from the sandbox: the bridge bounds what it keeps,
keeps it private to its user, and never loses the last good state to an oversized one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from .conftest import open_bridge, payload_of, text_of

pytestmark = pytest.mark.anyio


async def test_a_state_past_the_size_cap_is_not_kept_and_the_last_good_one_is(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {"MCP_BRIDGE_SESSION_STATE_MAX": "1m"}
    async with open_bridge(tmp_path, env=env) as bridge:
        await bridge.run("small = 'good'")
        await bridge.run("small")  # its state is saved once this runs
        await bridge.run("big = bytes(8 * 1024 * 1024)")
        told = await bridge.run("len(big)")
        await bridge.run("import os\nos._exit(1)")
        back = await bridge.run("small, 'big' in globals()")
    notices = " ".join(payload_of(told)["notices"])
    assert "could not be saved" in notices
    assert "MCP_BRIDGE_SESSION_STATE_MAX" in notices
    assert text_of(back) == "('good', False)"


async def test_saved_states_are_private_to_the_bridges_user(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 1\nopen('/tmp/f', 'w').write('data')")
        await bridge.run("x")
        store = bridge.state_dir / "sessions" / "saved" / "default"
        files = [p for p in store.iterdir() if p.name != "lock"]
        assert files
        assert stat.S_IMODE(store.stat().st_mode) == 0o700
        assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
        for path in [*files, store / "lock"]:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
