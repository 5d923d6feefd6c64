"""Other local accounts get nothing of the bridge: not its sandboxes' channels, not its state.

The attack these tests replay: a sandbox's channel socket exists for a moment before the
container connects (listen → create → start → connect, ~0.5-1 s with the warm pool). Another
account that reaches the socket in that window is taken for the sandbox: it receives the
model's code and calls the user's MCP servers with the bridge user's rights.

The attacker is a real process of another uid (``subprocess`` with ``user=``: the tests run as
root). The window is held open at the exact point the attack aims at: the listener exists and
the container is not created yet (a wrapper around the backend's create step, which runs the
attacker first). Everything else is the real backend on real podman, or the real bridge over
stdio with the MCP SDK client.

The state dirs live under a directory made like a home directory (0755, outside pytest's own
0700 tree), so the only thing that can keep another account out is what the bridge does.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.channel import Channel
from bridge_core.runtime import _podman_api
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_protocol import Execute, Hello, Result, encode

from .conftest import code_text, open_bridge, payload_of

pytestmark = [pytest.mark.container, pytest.mark.engine]

SYSTEM_PYTHON = "/usr/bin/python3"
"""The attacker's interpreter: another account cannot enter root's home, where hatch's is."""
OTHER_UID = 54321
"""An account with no files anywhere: a plain other local user."""
NOBODY = 65534
"""The uid rootful sandboxes run as: a host process of that uid is the hardest case."""
START_TIMEOUT = 90.0
PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"

# Connects to the socket named by argv[1] and prints what happened: "connected", or the errno.
_CONNECT = """
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(errno.errorcode.get(exc.errno, exc.errno))
else:
    print("connected")
"""

# Connects, sends a forged Hello, says so, then reports what the bridge sent back: EOF or a
# reset (closed unread) is the right answer; DATA means it was taken for the sandbox.
_FORGE = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(bytes.fromhex(sys.argv[2]))
print("connected", flush=True)
s.settimeout(120)
try:
    data = s.recv(65536)
except ConnectionResetError:
    print("RESET")
else:
    print("EOF" if not data else "DATA " + data.hex())
"""


def _other_account(uid: int) -> dict[str, Any]:
    """subprocess keyword arguments running the child as ``uid`` with no supplementary groups."""
    return {"user": uid, "group": uid, "extra_groups": [], "cwd": "/"}


@pytest.fixture
def home() -> Iterator[Path]:
    """A directory like a user's home on Debian: 0755, so only the bridge's own modes count."""
    path = Path(tempfile.mkdtemp(prefix="bridge-home-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def backend(home: Path) -> Any:
    backend = await PodmanBackend.connect(state_dir=home / "state" / "runtime")
    try:
        yield backend
    finally:
        await backend.aclose()


def _hold_window(monkeypatch: pytest.MonkeyPatch, attack: Callable[[Path], None]) -> None:
    """Run ``attack(channel_dir)`` while the socket listens and before the container exists."""
    create = PodmanBackend._create_verify_start

    def attacked(self: PodmanBackend, spec: SandboxSpec, name: str, channel_dir: Path) -> None:
        attack(channel_dir)
        create(self, spec, name, channel_dir)

    monkeypatch.setattr(PodmanBackend, "_create_verify_start", attacked)


async def _answers(backend: PodmanBackend, sandbox: Any, name: str) -> None:
    """The sandbox behind ``sandbox.stream`` is the real one: it handshakes and runs code."""
    channel = Channel(sandbox.stream)
    with anyio.fail_after(60):
        await channel.handshake(name)
        await channel.send(Execute("e1", "6 * 7"))
        while not isinstance(message := await channel.receive(), Result):
            pass
    assert message.status == "ok"
    assert message.value == "42"


@pytest.mark.parametrize("uid", [OTHER_UID, NOBODY], ids=["other-user", "nobody"])
async def test_another_local_account_cannot_reach_a_sandbox_channel_while_it_listens(
    backend: PodmanBackend,
    sandbox_image: str,
    monkeypatch: pytest.MonkeyPatch,
    uid: int,
) -> None:
    outcome: list[str] = []

    def connect_as_other_account(channel_dir: Path) -> None:
        socket_path = channel_dir / "channel.sock"
        assert socket_path.is_socket()  # the window is open: the bridge listens
        done = subprocess.run(
            [SYSTEM_PYTHON, "-c", _CONNECT, str(socket_path)],
            capture_output=True,
            text=True,
            timeout=30,
            **_other_account(uid),
        )
        outcome.append(done.stdout.strip() or done.stderr.strip())

    _hold_window(monkeypatch, connect_as_other_account)
    spec = SandboxSpec(name="window", image=sandbox_image, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT):
        sandbox = await backend.start(spec)
    try:
        assert outcome == ["EACCES"]
        await _answers(backend, sandbox, spec.name)
    finally:
        await backend.kill(sandbox)


def _forge_as_root(channel_dir: Path, forged: bytes) -> subprocess.Popen[str]:
    # Root passes every permission check: it reaches the socket by its path.
    return subprocess.Popen(
        [SYSTEM_PYTHON, "-c", _FORGE, str(channel_dir / "channel.sock"), forged.hex()],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )


def _forge_as_nobody(channel_dir: Path, forged: bytes) -> subprocess.Popen[str]:
    # The sandbox's own uid on the host, handed an open descriptor of the channel directory:
    # /proc/self/fd/N jumps past the private parents, the way only a leak could.
    fd = os.open(channel_dir, os.O_PATH | os.O_DIRECTORY)
    try:
        return subprocess.Popen(
            [SYSTEM_PYTHON, "-c", _FORGE, f"/proc/self/fd/{fd}/channel.sock", forged.hex()],
            stdout=subprocess.PIPE,
            text=True,
            pass_fds=(fd,),
            **_other_account(NOBODY),
        )
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "forge", [_forge_as_root, _forge_as_nobody], ids=["root-on-the-host", "nobody-on-the-host"]
)
async def test_a_process_that_reaches_the_socket_anyway_is_refused_before_a_byte_is_read(
    backend: PodmanBackend,
    sandbox_image: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    forge: Callable[[Path, bytes], subprocess.Popen[str]],
) -> None:
    attackers: list[subprocess.Popen[str]] = []

    def connect_first(channel_dir: Path) -> None:
        attacker = forge(channel_dir, encode(Hello(versions=(1,), client_version="forged")))
        attackers.append(attacker)
        assert attacker.stdout is not None
        # Connected (queued on the listener) before the container even exists.
        assert attacker.stdout.readline().strip() == "connected"

    _hold_window(monkeypatch, connect_first)
    spec = SandboxSpec(name="forged", image=sandbox_image, connect_timeout=START_TIMEOUT)
    try:
        with anyio.fail_after(START_TIMEOUT):
            sandbox = await backend.start(spec)
        try:
            await _answers(backend, sandbox, spec.name)
        finally:
            await backend.kill(sandbox)
        (attacker,) = attackers
        out, _ = attacker.communicate(timeout=30)
        assert out.strip() in ("EOF", "RESET")  # cut off; not one byte of the bridge's
        refusals = [r.getMessage() for r in caplog.records if "refused a channel" in r.message]
        assert len(refusals) == 1
        assert f"pid {attacker.pid}" in refusals[0]
    finally:
        for attacker in attackers:
            attacker.kill()
            attacker.wait(timeout=30)


def _open_to_others(root: Path, *, passable: Callable[[Path], bool]) -> list[str]:
    """Everything under ``root`` (itself included) with a group or other permission bit, except
    directories ``passable`` allows; those must be 0711 (or 0700) inside a 0700 parent. What the
    sandbox reads inside them (kept full outputs: ``output/`` 0755, files 0444) may be readable,
    never writable, by others: only the container reaches it, through its own mount."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if passable(path):
            # 0700: a sandbox that mounts nothing (the host keeps its copies of copied-in files)
            if mode not in (0o711, 0o700) or stat.S_IMODE(path.parent.stat().st_mode) != 0o700:
                found.append(f"{path} {mode:o} (parent {path.parent.stat().st_mode & 0o777:o})")
        elif any(passable(parent) for parent in path.parents):
            if mode & 0o022:
                found.append(f"{path} {mode:o} (writable by others, inside a channel dir)")
        elif mode & 0o077 and not path.is_symlink():
            found.append(f"{path} {mode:o}")
    return found


def _channel_dir(path: Path) -> bool:
    """``sandboxes/<bridge owner>/<container>/``: the owner dir itself is private (0700)."""
    return path.parent.parent.name == "sandboxes" and path.is_dir()


async def test_the_private_podman_service_its_socket_log_and_the_state_dir_are_private(
    home: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        _podman_api, "socket_candidates", lambda env, euid: [f"unix://{home}/none.sock"]
    )
    state = home / "state" / "runtime"
    backend = await PodmanBackend.connect(state_dir=state)
    try:
        assert backend.url == f"unix://{state}/podman-{os.getpid()}.sock"
        spec = SandboxSpec(name="private", image=sandbox_image, connect_timeout=START_TIMEOUT)
        with anyio.fail_after(START_TIMEOUT):
            sandbox = await backend.start(spec)
        try:
            service_files = {p.name for p in state.iterdir()}
            assert {f"podman-{os.getpid()}.sock", f"podman-{os.getpid()}.log"} <= service_files
            assert _open_to_others(home / "state", passable=_channel_dir) == []
            assert [p for p in (state / "sandboxes").glob("*/*") if _channel_dir(p)]
        finally:
            await backend.kill(sandbox)
    finally:
        await backend.aclose()


def _read_as(uid: int, path: Path) -> str:
    """Try to read ``path`` as ``uid``: the contents' length, or the errno name."""
    done = subprocess.run(
        [
            SYSTEM_PYTHON,
            "-c",
            "import errno, sys\ntry:\n    print(len(open(sys.argv[1], 'rb').read()))\n"
            "except OSError as exc:\n    print(errno.errorcode.get(exc.errno, exc.errno))",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        **_other_account(uid),
    )
    return done.stdout.strip() or done.stderr.strip()


# Prints past the output cap (spilled to a host file), and calls a proxied tool (the server's
# process record and its tool list cache).
_BUSY = """
from mcp import mcp_servers
print("x" * 5000)
await mcp_servers["probe"].echo(text="hello")
"""


def _old_state_dir(state: Path) -> Path:
    """A state dir as a version before this fix left it: every directory 0755, files 0644."""
    for directory in ("runtime/sandboxes", "tools", "upstream", "sessions/output"):
        (state / directory).mkdir(parents=True)
    for path in [state, *state.rglob("*")]:
        path.chmod(0o755)
    (state / "runtime" / "seccomp-no-keyring.json").write_text("{}")
    cached = state / "tools" / "0123456789abcdef.json"
    cached.write_text(json.dumps({"format": 1, "tools": [], "note": "private tool list"}))
    for path in (state / "runtime" / "seccomp-no-keyring.json", cached):
        path.chmod(0o644)
    return cached


async def test_after_a_bridge_run_nothing_it_wrote_is_open_to_other_accounts(
    home: Path,
) -> None:
    work = home / "work"
    logs = work / "logs"
    env = {
        "MCP_BRIDGE_AUDIT_LOG": str(logs / "audit.jsonl"),
        "MCP_BRIDGE_LOG_FILE": str(logs / "bridge.log"),
        "MCP_BRIDGE_OUTPUT_CAP": "1k",
    }
    servers = {"probe": {"command": sys.executable, "args": [str(PROBE)]}}
    async with open_bridge(work, servers=servers, env=env) as bridge:
        result = payload_of(await bridge.run(_BUSY))
        assert result["status"] == "ok", result
        state = bridge.state_dir
        written = {p.relative_to(state).parts[0] for p in state.rglob("*")}
        assert {"runtime", "tools", "upstream", "sessions"} <= written
        assert (state / "sessions" / "output").is_dir()  # output spilled (the file is gone)
        assert list((state / "upstream").iterdir())  # the probe server's process record
        assert (logs / "audit.jsonl").stat().st_size > 0
        assert _open_to_others(state, passable=_channel_dir) == []
        assert _open_to_others(logs, passable=lambda _: False) == []
        assert _read_as(OTHER_UID, logs / "audit.jsonl") == "EACCES"


async def test_an_old_open_state_dir_is_made_private_when_the_bridge_starts(home: Path) -> None:
    work = home / "work"
    cached = _old_state_dir(work / "state")
    assert _read_as(OTHER_UID, cached).isdigit()  # readable by anyone before
    async with open_bridge(work) as bridge:
        assert code_text(await bridge.run("1 + 1")) == "2"
        state = bridge.state_dir
        for directory in (state, *(p for p in state.iterdir() if p.is_dir())):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
        assert stat.S_IMODE((state / "runtime" / "sandboxes").stat().st_mode) == 0o700
        # The profile an older version wrote (0644) is gone; today's is 0600.
        assert not (state / "runtime" / "seccomp-no-keyring.json").exists()
        profile = state / "runtime" / "sandbox-seccomp.json"
        assert stat.S_IMODE(profile.stat().st_mode) == 0o600
        assert _read_as(OTHER_UID, cached) == "EACCES"
        assert _read_as(NOBODY, cached) == "EACCES"


def test_the_attacker_really_is_another_account() -> None:
    # Guards the tests above against a false pass: the attacker must not be root in disguise.
    done = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import os; print(os.geteuid(), os.getegid(), os.getgroups())"],
        capture_output=True,
        text=True,
        timeout=30,
        **_other_account(OTHER_UID),
    )
    assert done.stdout.strip().split(maxsplit=2) == [str(OTHER_UID), str(OTHER_UID), "[]"]
