"""The podman engine reached over ssh (``MCP_BRIDGE_RUNTIME_URL=ssh://...``), for real: the sshd
``scripts/prepare-remote`` runs on this machine, with its own key and known_hosts.

* the engine's host key is checked: a known_hosts without it refuses the connection;
* sandboxes there run under the bridge's own seccomp filter (written on that machine, read back
  from the OCI spec there) with nothing of the bridge's machine mounted;
* a dropped ssh link is a crashed sandbox: the call in flight says so, the remote container goes
  away by itself (its stdin ends), and the next call gets a fresh sandbox over a new link.
"""

from __future__ import annotations

import importlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core.channel import Channel, ChannelClosed
from bridge_core.errors import RuntimeUnavailable
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.podman import PodmanBackend
from bridge_protocol import Execute, Result

from .conftest import bridge_pids, code_text, open_bridge, owned_containers

pytestmark = [pytest.mark.container, pytest.mark.engine]

_shared = importlib.import_module("integration-tests.conftest")
REPO = Path(__file__).resolve().parents[2]
PREPARED = REPO / ".state" / "remote" / "env"
START_TIMEOUT = 60


def _remote_env() -> dict[str, str]:
    """The remote settings: from the environment, else what scripts/prepare-remote wrote."""
    found = {k: v for k in _shared.REMOTE_VARIABLES if (v := os.environ.get(k))}
    if not found.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://") and PREPARED.is_file():
        found = _shared._read_env_file(PREPARED)
    if not found.get("MCP_BRIDGE_RUNTIME_URL", "").startswith("ssh://"):
        message = "no ssh engine: run scripts/prepare-remote (as root) first"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture
def remote_env() -> dict[str, str]:
    return _remote_env()


@pytest.fixture
async def remote_backend(
    remote_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[PodmanBackend]:
    backend = await PodmanBackend.connect(
        state_dir=tmp_path / "state",
        url=remote_env["MCP_BRIDGE_RUNTIME_URL"],
        identity=Path(remote_env["MCP_BRIDGE_RUNTIME_IDENTITY"]),
        known_hosts=Path(remote_env["MCP_BRIDGE_RUNTIME_KNOWN_HOSTS"]),
    )
    try:
        yield backend
    finally:
        await backend.aclose()


async def test_an_engine_whose_host_key_is_not_known_is_refused(
    remote_env: dict[str, str], tmp_path: Path
) -> None:
    other = tmp_path / "known_hosts"
    url = remote_env["MCP_BRIDGE_RUNTIME_URL"]
    host_port = url.removeprefix("ssh://").split("@")[-1].split("/")[0]
    host, _, port = host_port.partition(":")
    # A known_hosts that names this host with another key (what a man in the middle presents).
    await anyio.run_process(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", tmp_path / "k"])
    key = (tmp_path / "k.pub").read_text().split()[:2]
    other.write_text(f"[{host}]:{port or 22} {' '.join(key)}\n")
    with pytest.raises(RuntimeUnavailable, match=r"(?i)host key"), anyio.fail_after(60):
        await PodmanBackend.connect(
            state_dir=tmp_path / "state",
            url=url,
            identity=Path(remote_env["MCP_BRIDGE_RUNTIME_IDENTITY"]),
            known_hosts=other,
        )


async def test_a_remote_sandbox_runs_under_the_bridges_filter_with_nothing_mounted(
    remote_backend: PodmanBackend, sandbox_image: str
) -> None:
    assert remote_backend.remote
    assert remote_backend.channel == "stdio"
    assert remote_backend.seccomp is not None
    # The profile podman reads is a file on the engine's machine, named by its content.
    assert remote_backend.seccomp.path.name.endswith(f"{remote_backend.seccomp.digest[:16]}.json")
    spec = SandboxSpec(name="remote-filter", image=sandbox_image, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT):
        sandbox = await remote_backend.start(spec)
    try:
        # Nothing mounted from this machine: files for the sandbox are copied in by the engine.
        shared = sandbox.shared_dir
        assert shared is not None
        assert shared.copy_in is not None
        channel = Channel(sandbox.stream)
        await channel.handshake(spec.name)
        code = (
            "import os\ntry:\n    os.unshare(os.CLONE_NEWUSER)\n    r = 'unshared'\n"
            "except OSError as e:\n    r = e.errno\nr"
        )
        await channel.send(Execute("e1", code))
        with anyio.fail_after(60):
            while not isinstance(message := await channel.receive(), Result):
                pass
        assert message.value == "1"  # EPERM: the bridge's filter, not podman's default
    finally:
        await remote_backend.kill(sandbox)


async def test_a_dropped_link_ends_the_channel_and_the_remote_container(
    remote_backend: PodmanBackend, sandbox_image: str
) -> None:
    spec = SandboxSpec(name="remote-drop", image=sandbox_image, connect_timeout=START_TIMEOUT)
    with anyio.fail_after(START_TIMEOUT):
        sandbox = await remote_backend.start(spec)
    channel = Channel(sandbox.stream)
    await channel.handshake(spec.name)
    await remote_backend._link.drop()  # type: ignore[union-attr]
    with pytest.raises(ChannelClosed), anyio.fail_after(30):
        await channel.receive()
    # The next start opens a new link; the dropped sandbox left by itself (stdin EOF).
    with anyio.fail_after(START_TIMEOUT):
        again = await remote_backend.start(spec)
        while (await remote_backend.status(sandbox)).running:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    await remote_backend.kill(again)
    await remote_backend.kill(sandbox)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _ssh_links(bridge_pid: int) -> list[int]:
    """The bridge's own ssh clients (``ssh -N``: forward and control master)."""
    links = []
    for child in _children(bridge_pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode()).name == "ssh" and b"-N" in argv:
            links.append(child)
    return links


async def test_a_dropped_link_mid_call_is_a_crash_and_the_next_call_gets_a_new_sandbox(
    remote_env: dict[str, str], tmp_path: Path
) -> None:
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "started":
            started.set()

    result: types.CallToolResult | None = None

    async def run_slow(bridge: Any) -> None:
        nonlocal result
        result = await bridge.session.call_tool(
            "run_python",
            {"code": "import time\nprint('started', flush=True)\ntime.sleep(120)"},
            read_timeout_seconds=120,
            progress_callback=on_progress,
        )

    env = {**remote_env, "MCP_BRIDGE_POOL_SIZE": "0"}
    async with open_bridge(tmp_path, env=env) as bridge:
        await bridge.run("before = 1")
        (pid,) = bridge_pids(bridge.state_dir)
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_slow, bridge)
            with anyio.fail_after(60):
                await started.wait()
            dropped = set(owned_containers(pid))
            links = _ssh_links(pid)
            assert links, "the bridge runs no ssh client"
            for link in links:
                os.kill(link, signal.SIGKILL)  # the network goes away
        after = await bridge.run("'before' in globals()")
        with anyio.fail_after(60):
            # It removed itself over there; only podman's listing can tell (nothing to wait on).
            while dropped & set(owned_containers(pid)):  # noqa: ASYNC110
                await anyio.sleep(0.1)
    assert result is not None
    assert result.is_error is True
    assert result.structured_content["status"] == "crashed"
    assert code_text(result) == "started"
    assert after.is_error is False
    # Like any crash: a new sandbox, restored to the state after the last successful execution.
    assert after.content[0].text.endswith("True")
    assert any("restored" in notice for notice in after.structured_content["notices"])
