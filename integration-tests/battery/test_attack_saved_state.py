"""Sandbox code forging ``Snapshot`` frames (durable sessions), through the real bridge over stdio
(MCP SDK client) and real podman.

A sandbox of a durable session may send ``Snapshot`` frames at any moment: during its execution,
without end, with any ``unsaved`` list or error text. What the bridge keeps of them is bounded:
in memory (what the next call is told) and on disk (``[sessions] state_disk`` holds for
states still being written, not only for finished ones).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import (
    bridge_pids,
    code_text,
    open_bridge,
    open_http_bridge,
    payload_of,
    sandboxes_over_stdio,
    text_of,
)
from .test_hostile_protocol import CHANNEL as FIND_CHANNEL

pytestmark = pytest.mark.container

# The channel whichever it is (the unix socket, or the stdio pipe of a sandbox on a remote engine).
CHANNEL = (
    FIND_CHANNEL
    + """
from bridge_protocol.codec import encode
from bridge_protocol.messages import Snapshot
sock = channel_writer()
"""
)

NOTICE_FLOOD = """
for n in range(60):
    sock.sendall(encode(Snapshot(f"forged-{n}", last=True, unsaved=("x" * 4_000_000,))))
'sent'
"""


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise LookupError(f"no VmRSS for {pid}")


async def test_forged_snapshot_endings_cannot_pile_up_notices_in_the_bridge(
    tmp_path: Path, sandbox_image: str
) -> None:
    # 60 finished snapshots, each naming one unsaved "name" of 4 MB: before, the bridge kept a
    # notice of each, whole (240 MB held until the next call, then sent to the client).
    async with open_bridge(tmp_path) as bridge:
        (pid,) = bridge_pids(bridge.state_dir)
        await bridge.run("kept = 'state'")
        before = _rss_mib(pid)
        flood = await bridge.run(CHANNEL + NOTICE_FLOOD, timeout=60)
        after = _rss_mib(pid)
        print(f"bridge RSS {before:.0f} MiB before, {after:.0f} MiB after 240 MB of forged notices")
        assert code_text(flood) == "'sent'"
        assert after - before < 64
        told = await bridge.run("kept")
    assert text_of(told).endswith("'state'")
    notices = payload_of(told).get("notices", [])
    assert len(json.dumps(notices)) < 4096, f"{len(json.dumps(notices)):,} characters of notices"
    assert len(notices) <= 1


HOLD_OPEN = """
(client,) = [o for o in gc.get_objects() if type(o).__name__ == "SandboxClient"]
client.snapshots.take = lambda *args: None  # no genuine snapshot ends the forged one
chunk = bytes(3 * 1024 * 1024)
sock.sendall(encode(Snapshot("never-ending", data=chunk)))
sock.sendall(encode(Snapshot("never-ending", data=chunk)))
'holding'
"""


def _store_bytes(state_dir: Path) -> int:
    store = state_dir / "sessions" / "saved" / "default"
    return sum(entry.stat().st_size for entry in store.iterdir() if entry.is_file())


async def test_states_still_being_written_count_against_the_disk_limit(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Three sessions each start a 6 MiB state that never ends (under the 6 MiB per-state cap):
    # before, only finished states were counted, and 18 MiB of half-written files sat in a store
    # limited to 8 MiB (any number of sessions times [sessions] state_max).
    env = {"MCP_BRIDGE_SESSION_STATE_MAX": "6m", "MCP_BRIDGE_SESSION_STATE_DISK": "8m"}
    async with open_bridge(tmp_path, env=env) as bridge:
        for name in ("a", "b", "c"):
            held = await bridge.run(CHANNEL + HOLD_OPEN, session=name)
            assert code_text(held) == "'holding'"
        used = _store_bytes(bridge.state_dir)
        print(f"store holds {used:,} bytes with three never-ending states")
        assert used <= 8 * 1024 * 1024
        other = await bridge.run("6 * 7", session="bystander")
    assert text_of(other).endswith("42")


STALL = """
(client,) = [o for o in gc.get_objects() if type(o).__name__ == "SandboxClient"]
client.snapshots.take = lambda *args: None  # the bridge waits for a snapshot that never comes
'stalling'
"""


async def test_a_session_whose_snapshot_never_ends_does_not_hold_up_another_sessions_start(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Two live containers at most: the least recently used idle session is the stalling one.
    # Before, a new session waited for its snapshot (60 s) to hibernate it, past the start
    # timeout, and was refused although an idle session with its state saved could make room.
    env = {"MCP_BRIDGE_MAX_SESSIONS": "2", "MCP_BRIDGE_SANDBOX_START_TIMEOUT": "30s"}
    async with open_bridge(tmp_path, env=env) as bridge:
        stalled = await bridge.run(CHANNEL + STALL, session="stalling")
        assert code_text(stalled) == "'stalling'"
        await bridge.run("kept = 'honest'", session="honest")
        third = await bridge.run("6 * 7", session="third")
        honest = await bridge.run("kept", session="honest")
    assert payload_of(third)["status"] == "ok", payload_of(third)
    assert text_of(third).endswith("42")
    assert text_of(honest).endswith("'honest'")
    assert any("restored" in notice for notice in payload_of(honest)["notices"])


async def test_one_http_client_cannot_take_the_whole_saved_state_disk_from_another(
    tmp_path: Path, sandbox_image: str
) -> None:
    env = {
        "MCP_BRIDGE_SESSION_STATE_MAX": "4m",
        "MCP_BRIDGE_SESSION_STATE_DISK": "4m",
        "MCP_BRIDGE_SESSION_STATE_DISK_PER_CLIENT": "2m",
    }
    async with (
        open_http_bridge(tmp_path, env=env) as bridge,
        bridge.session() as hog,
        bridge.session() as other,
    ):
        await hog.run("open('/tmp/fill', 'wb').write(bytes(4_180_000))")
        hog_told = await hog.run("1")  # its state would be on disk once this runs
        await other.run("mine = 1")
        told = await other.run("mine")
    assert text_of(told).endswith("1")
    hog_notices = payload_of(hog_told).get("notices", [])
    assert any("[sessions] state_disk_per_client" in n for n in hog_notices), hog_notices
    notices = payload_of(told).get("notices", [])
    assert not any("[sessions] state_disk" in notice for notice in notices), notices


FORGED_HINT = """
import gc, io, os, pickle, struct, tarfile
(client,) = [o for o in gc.get_objects() if type(o).__name__ == "SandboxClient"]
client.snapshots.take = lambda *args: None  # the forged state stays the saved one
data = pickle.dumps({"kept": "yes", "pad": bytes(6 * 1024 * 1024)}, protocol=5)
names = ["no_such_module_x", "../../etc/passwd", "os.path", "\\x00", "sys"]
names += [f"m{n}" for n in range(1000)]
hint = "\\n".join(names).encode()[:2048]
tar = io.BytesIO()
tarfile.open(fileobj=tar, mode="w|").close()
state = (b"MCPSNAP2" + struct.pack(">H", len(hint)) + hint + struct.pack(">Q", len(data)) + data
         + tar.getvalue())
for at in range(0, len(state), 4 << 20):  # more than one chunk: the restore reads the hint first
    sock.sendall(encode(Snapshot("s-forged", data=state[at:at + (4 << 20)])))
sock.sendall(encode(Snapshot("s-forged", last=True)))
os._exit(3)
"""


async def test_a_state_whose_hint_names_anything_still_loads_and_only_in_its_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The hint at a state's head is the sandbox's own writing: bounded (2 KiB, 64 plain names),
    # read only by a sandbox of the same session; names that cannot be imported are skipped.
    async with open_bridge(tmp_path) as bridge:
        # The cell ends its sandbox once the forged state is out (a separate crashing call
        # would first wait, bounded, for the post-execution snapshot the forger never sends).
        crashed = await bridge.run(CHANNEL + FORGED_HINT, timeout=60)
        back = await bridge.run("kept, len(pad)")
    assert payload_of(crashed)["status"] == "crashed"
    assert text_of(back).endswith("('yes', 6291456)"), text_of(back)
    assert any("restored from its state" in notice for notice in payload_of(back)["notices"])


FORGED_HEAD = """
import gc, io, pickle, struct, tarfile
(client,) = [o for o in gc.get_objects() if type(o).__name__ == "SandboxClient"]
client.snapshots.take = lambda *args: None  # the forged state stays the saved one
data = pickle.dumps({"kept": "yes"}, protocol=5)
hint = HINT
tar = io.BytesIO()
tarfile.open(fileobj=tar, mode="w|").close()
state = (b"MCPSNAP2" + struct.pack(">H", len(hint)) + hint + struct.pack(">Q", len(data)) + data
         + tar.getvalue())
sock.sendall(encode(Snapshot("s-forged", data=state, last=True)))
'forged'
"""
PREIMPORTED = (
    "import os; p = '/run/bridge/preimport'; kept, open(p).read() if os.path.exists(p) else None"
)


@pytest.mark.parametrize(
    ("hint", "passed_on"),
    [
        (b"fractions\nstatistics", True),
        (b"fractions\n../../etc/passwd", False),
        (b"fractions\nos.path", False),
        (b"fractions\n--help", False),
        (b"\n".join(b"m%d" % n for n in range(65)), False),
    ],
)
async def test_the_bridge_passes_on_a_states_module_hint_only_when_every_name_is_plain(
    tmp_path: Path, sandbox_image: str, hint: bytes, passed_on: bool
) -> None:
    # The bridge reads a saved state's head (never its pickle) to name its modules to the next
    # sandbox of the session before it starts, and to a one-client bridge's warm pool: a head
    # forged by the sandbox with anything but plain module names within the limits is dropped
    # whole, so nothing the sandbox chose but such names reaches another sandbox's start.
    async with open_bridge(tmp_path) as bridge:
        forged = await bridge.run(CHANNEL + FORGED_HEAD.replace("HINT", repr(hint)), timeout=60)
    assert code_text(forged) == "'forged'"
    # Another session takes the warm sandbox: the forged state stays the saved one.
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_POOL_SIZE": "1"}) as bridge:
        pooled = await bridge.run("import sys; 'fractions' in sys.modules", session="other")
    async with open_bridge(tmp_path, env={"MCP_BRIDGE_POOL_SIZE": "0"}) as bridge:
        back = await bridge.run(PREIMPORTED)
    # Over a stdio channel (a remote engine) there is no channel directory to name them in:
    # nothing is passed on, the restore's imports start with the state's first chunk.
    passed_on = passed_on and not sandboxes_over_stdio()
    named = hint.decode() if passed_on else None
    assert text_of(back).endswith(repr(("yes", named))), text_of(back)
    assert text_of(pooled).endswith(repr(passed_on)), text_of(pooled)
