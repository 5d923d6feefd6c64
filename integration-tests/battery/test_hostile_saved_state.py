"""Saved session state is untrusted bytes from the sandbox: the bridge bounds what it keeps,
keeps it private to its user, and never loses the last good state to an oversized one."""

from __future__ import annotations

import stat
import time
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
    assert "[sessions] state_max" in notices
    assert text_of(back) == "('good', False)"


async def test_a_sparse_file_in_tmp_is_refused_by_the_sandbox_and_the_next_call_does_not_wait(
    tmp_path: Path, sandbox_image: str
) -> None:
    # An 8 GiB sparse file costs the sandbox nothing; before, its saving child streamed all of
    # it at every call and the bridge read it to the end before refusing it (26-31 s of bridge
    # CPU, the next call stalled 45-60 s). Now the sandbox measures /tmp before it writes a
    # state it could never load back (its memory limit) and sends none of it.
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("kept = 'good'")
        await bridge.run("f = open('/tmp/hole.img', 'wb'); f.truncate(8 << 30); f.close()")
        began = time.monotonic()
        told = await bridge.run("kept")
        waited = time.monotonic() - began
        await bridge.run("import os\nos._exit(1)")
        back = await bridge.run("kept")
    notices = " ".join(payload_of(told)["notices"])
    assert "hole.img" in notices
    assert "sparse" in notices
    assert waited < 10, waited
    assert text_of(back) == "'good'"


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
